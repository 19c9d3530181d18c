"""``PersistentOptunaSweeper``: Hydra's Optuna sweeper, ``n_trials`` the stored study's size.

The logic is in :mod:`dpp.optuna_sweeper`; Optuna is imported only when a sweep starts.
"""

from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper


class PersistentOptunaSweeper(OptunaSweeper):
    """:class:`OptunaSweeper` that adds only the trials a stored study is missing."""

    def __init__(self, *args, **kwargs) -> None:  # the parent's arguments, in its order
        from dpp.optuna_sweeper import PersistentOptunaSweeperImpl

        self.sweeper = PersistentOptunaSweeperImpl(*args, **kwargs)
