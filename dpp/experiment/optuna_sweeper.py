"""Hydra's Optuna sweeper with persistent studies: ``n_trials`` counts the study's finished trials.

Hydra's ``OptunaSweeper`` loads a stored study (``hydra.sweeper.storage=sqlite:///study.db``,
``load_if_exists``) but then asks ``n_trials`` *new* trials on every invocation. Here
``n_trials`` is the size the study should reach: a sweep that was interrupted, or is run again
with a larger ``n_trials``, adds only the missing trials to the same study
(``configs/hparams_search/optuna.yaml`` names the plugin
``hydra_plugins.dpp_optuna_sweeper.persistent_optuna_sweeper.PersistentOptunaSweeper``, which
runs :class:`PersistentOptunaSweeperImpl`).

Trials count when they ended ``COMPLETE`` or ``PRUNED``. A ``FAIL`` trial (a job that raised) is
not counted, so a study always reaches ``n_trials`` trials with a value; a trial left
``RUNNING`` by a killed sweep is not counted either (both are reported, and new trials take
their places). Within one invocation Hydra's sweeper still stops at its ``max_failure_rate``.

Alembic (the database migrations of Optuna's RDB storage) logs two INFO lines each time a
storage opens; its logger is set to WARNING here, so they stay out of a sweep's output.
"""

from __future__ import annotations

import logging

import numpy as np
from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl
from omegaconf import OmegaConf

logger = logging.getLogger(__name__)
logging.getLogger("alembic").setLevel(logging.WARNING)  # "Context impl SQLiteImpl." etc.


def finished_trials(study_name: str, storage) -> tuple[int, int, int]:
    """``(finished, running, failed)`` trial counts of a stored study (zeros if it is absent).

    ``finished`` counts the ``COMPLETE`` and ``PRUNED`` trials: what ``n_trials`` counts.

    Args:
        study_name: the study's name.
        storage: an Optuna storage URL (e.g. ``sqlite:///study.db``) or ``None`` (in memory:
            nothing is stored, so nothing is finished).
    """
    import optuna

    if storage is None:
        return 0, 0, 0
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:  # optuna 2.10: no study of that name in the storage
        return 0, 0, 0
    states = [trial.state for trial in study.trials]
    state = optuna.trial.TrialState
    return (
        sum(s in (state.COMPLETE, state.PRUNED) for s in states),
        sum(s == state.RUNNING for s in states),
        sum(s == state.FAIL for s in states),
    )


class PersistentOptunaSweeperImpl(OptunaSweeperImpl):
    """``OptunaSweeperImpl`` that first subtracts the stored study's finished trials."""

    def sweep(self, arguments):
        """Runs ``n_trials`` minus the finished trials of the stored study, then Hydra's sweep."""
        finished, running, failed = finished_trials(self.study_name, self.storage)
        if finished or running or failed:
            others = [f"{running} left running by an interrupted sweep"] if running else []
            others += [f"{failed} failed (not counted)"] if failed else []
            logger.info(
                "study %r in %s holds %d finished trial(s)%s; n_trials=%d: %d to run",
                self.study_name,
                self.storage,
                finished,
                "".join(f", {o}" for o in others),
                self.n_trials,
                max(self.n_trials - finished, 0),
            )
        if finished or failed:
            self._reseed(finished + failed)
        self.job_idx = finished + running + failed  # job folders continue the trial numbers
        self.n_trials = max(self.n_trials - finished, 0)
        return super().sweep(arguments)

    def _reseed(self, finished: int) -> None:
        """Seeds the sampler from ``(seed, finished)``, so the continued study asks new points.

        A sampler seeded as at the study's start would repeat its first random points; this
        keeps the sweep repeatable for a seed and a resume point. (The samplers' random state is
        ``_rng``, here and in TPE's random start-up sampler: private in optuna 2.10, the
        version the ``sweep`` extra pins.)
        """
        seed = OmegaConf.select(self.config, "hydra.sweeper.sampler.seed")
        if seed is None:
            return
        state = int(np.random.SeedSequence([int(seed), finished]).generate_state(1)[0])
        holders = [self.sampler, getattr(self.sampler, "_random_sampler", None)]
        reseeded = False
        for holder in holders:
            if isinstance(getattr(holder, "_rng", None), np.random.RandomState):
                holder._rng = np.random.RandomState(state)
                reseeded = True
        if not reseeded:
            logger.warning(
                "%s has no known random state: the continued study may repeat its first points",
                type(self.sampler).__name__,
            )
