"""Set models that learn their representation, on Equinox: the networks and DPP on an embedding.

Not baselines of the paper's method but models of their own: the embedded DPP (eqs. 2, 3 and 16
on a learned embedding) and the neural peers it is measured against (attention MIL, Deep Sets /
MI-Net). Their estimators live in :mod:`dpp.estimators.embedded` and
:mod:`dpp.estimators.neural`.

* :mod:`~dpp.networks.layers`: the embedding MLP and the models (Equinox modules);
* :mod:`~dpp.networks.training`: sets in padded size buckets and the Adam trainer, epochs in one
  compiled program, many fits batched;
* :mod:`~dpp.networks.readout`: what a trained network says of sets (probabilities, codes,
  per-vector evidence), and the embedded DPP as a fitted model;
"""

import importlib as _importlib
import importlib.util as _util


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.networks.<module>``)
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
