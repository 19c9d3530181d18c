"""One process of a multi-process DPP fit (jax.distributed over localhost, CPU collectives).

python tests/distributed_fit.py OUT.npz [COORDINATOR NUM_PROCESSES PROCESS_ID]

Without the last three arguments: the single-process reference. Every process loads the same
synthetic sets and k-means centres; the fit splits the sets across the devices of all processes
(each process places only its own part) and process 0 writes the fitted model to OUT.npz.
tests/test_sharding.py runs it.
"""

import sys

from dpp.sharding import initialize_distributed


def main() -> None:
    out = sys.argv[1]
    if len(sys.argv) > 2:
        initialize_distributed(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    import jax
    import numpy as np

    from dpp.datasets.synthetic import make_synthetic
    from dpp.init import kmeans_centres
    from dpp.model import fit_dpp
    from dpp.solvers.coordinate_ascent import FitSettings

    sets = make_synthetic(num_sets=100, min_size=1, max_size=20, seed=0).sets
    centres = kmeans_centres(np.asarray(sets.vectors), 2, 0, 1, 300)
    model = fit_dpp(sets, centres, FitSettings(), jax.random.key(0), devices="all")
    if jax.process_index() == 0:
        np.savez(
            out,
            history=model.history,
            mu=model.prototypes,
            beta=model.beta,
            theta=np.asarray(model.theta),
            log_probs=np.asarray(model.log_predictive(sets)),
            processes=jax.process_count(),
            devices=jax.device_count(),
        )


if __name__ == "__main__":
    main()
