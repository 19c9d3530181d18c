"""Compilation: JAX's persistent compilation cache and a counter of XLA compilations.

Compiling dominates small fits (a cross-validation of 100-set problems compiles for seconds and
fits in tenths of a second). Three things keep it down: continuous hyperparameters are traced
(:mod:`dpp.hyper`), shapes are bucketed (:meth:`dpp.sets.RaggedSets.bucketed`), and the programs
compiled by one run are stored on disk (:func:`enable_persistent_cache`) so that the next run of
the same experiment starts warm. :class:`CompileCounter` reports what was compiled, for the
benchmarks (``benchmarks/bench.py --cv``) and the run logs.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from jax import monitoring

from dpp.solvers.cache import (  # noqa: F401 (re-exported: their home before)
    CACHE_ENV,
    MAX_CACHE_BYTES,
    MIN_COMPILE_SECONDS,
    cache_from_environment,
    enable_persistent_cache,
    use_compilation_cache,
    user_compilation_cache,
)
from dpp.solvers.progress import BACKEND_COMPILE_EVENT, PREPARE_EVENTS

logger = logging.getLogger(__name__)

#: JAX's monitoring event of a program found in the persistent cache.
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


def default_compilation_cache() -> Path:
    """``<cache_dir>/jax``: the CLI's ``compilation_cache`` (``$DPP_CACHE_DIR`` or ``.cache``)."""
    from dpp.datasets.base import default_cache_dir

    return Path(default_cache_dir()) / "jax"


class CompileCounter:
    """Counts XLA compilations (and persistent-cache hits) while active.

    Use as a context manager::

        with CompileCounter() as counter:
            clf.fit(sets, y)
        print(counter.compiles, counter.seconds)

    Attributes:
        compiles: XLA backend compilations started inside the block (a program loaded from the
            persistent cache counts here too, and in ``cache_hits``).
        seconds: wall-clock seconds of those compilations.
        prepare_seconds: seconds of the work before them: tracing Python to jaxprs and
            lowering those to MLIR (a program found in memory costs neither).
        cache_hits: programs loaded from the persistent compilation cache.
        names: the name of each compiled function (``jit(coordinate_ascent)``...), in order.
        durations: the seconds of each compilation, in the order of ``names``.
        loaded: whether each of ``names`` came from the persistent cache (its hit is reported
            inside its compilation, on the same thread).
    """

    def __init__(self):
        self.compiles = 0
        self.seconds = 0.0
        self.prepare_seconds = 0.0
        self.cache_hits = 0
        self.names: list[str] = []
        self.durations: list[float] = []
        self.loaded: list[bool] = []
        self._lock = threading.Lock()
        self._hit = threading.local()  # a cache hit seen in this thread's open compilation

    def _on_duration(self, event: str, duration: float, fun_name: str = "?", **_) -> None:
        if event in PREPARE_EVENTS:
            with self._lock:
                self.prepare_seconds += duration
        if event == BACKEND_COMPILE_EVENT:
            with self._lock:
                self.compiles += 1
                self.seconds += duration
                self.names.append(str(fun_name))
                self.durations.append(float(duration))
                self.loaded.append(getattr(self._hit, "seen", False))
            self._hit.seen = False

    def _on_event(self, event: str, **_) -> None:
        if event == CACHE_HIT_EVENT:
            with self._lock:
                self.cache_hits += 1
            self._hit.seen = True

    def __enter__(self) -> CompileCounter:
        monitoring.register_event_duration_secs_listener(self._on_duration)
        monitoring.register_event_listener(self._on_event)
        return self

    def __exit__(self, *exc) -> None:
        monitoring.unregister_event_duration_listener(self._on_duration)
        monitoring.unregister_event_listener(self._on_event)

    def slowest(self, count: int = 5) -> list[tuple[str, float, int]]:
        """The ``count`` functions with the most compile seconds: ``(name, seconds, times)``."""
        totals: dict[str, list] = {}
        for name, seconds in zip(self.names, self.durations, strict=True):
            entry = totals.setdefault(name, [0.0, 0])
            entry[0] += seconds
            entry[1] += 1
        ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:count]
        return [(name, seconds, times) for name, (seconds, times) in ranked]

    def programs(self, name: str, loaded: bool | None = None) -> int:
        """Compilations of the functions whose name contains ``name`` (``"coordinate_ascent"``).

        ``loaded``: ``None`` counts both, ``False`` only those XLA compiled, ``True`` only
        those loaded from the persistent cache.
        """
        return sum(
            name in compiled and (loaded is None or hit == loaded)
            for compiled, hit in zip(self.names, self.loaded, strict=True)
        )

    def summary(self) -> str:
        """One line: compilations, their seconds and the persistent-cache hits."""
        return (
            f"{self.compiles} XLA compilations, {self.seconds:.1f} s "
            f"({self.cache_hits} loaded from the persistent cache)"
        )
