"""``PersistentOptunaSweeper``: Hydra's Optuna sweeper, ``n_trials`` the stored study's size.

The logic is in :mod:`dpp.experiment.optuna_sweeper`; Optuna is imported only when a sweep starts.
"""

import logging

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:  # the sweep extra is not installed (`pip install -e .`): no sweeper here,
    OptunaSweeper = None  # and no warning from Hydra's plugin scan on every run (issue 56)

# alembic (Optuna's database migrations) logs "setup plugin ..." and "Context impl ..." at INFO
# when it is imported and when a storage opens: noise in a sweep's output
logging.getLogger("alembic").setLevel(logging.WARNING)

if OptunaSweeper is not None:

    class PersistentOptunaSweeper(OptunaSweeper):
        """:class:`OptunaSweeper` that adds only the trials a stored study is missing."""

        def __init__(self, *args, **kwargs) -> None:  # the parent's arguments, in its order
            from dpp.experiment.optuna_sweeper import PersistentOptunaSweeperImpl

            self.sweeper = PersistentOptunaSweeperImpl(*args, **kwargs)
