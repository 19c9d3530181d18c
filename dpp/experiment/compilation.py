"""Compilation: JAX's persistent compilation cache and a counter of XLA compilations.

Compiling dominates small fits (a cross-validation of 100-set problems compiles for seconds and
fits in tenths of a second). Three things keep it down: continuous hyperparameters are traced
(:mod:`dpp.hyper`), shapes are bucketed (:meth:`dpp.sets.RaggedSets.bucketed`), and the programs
compiled by one run are stored on disk (:func:`enable_persistent_cache`) so that the next run of
the same experiment starts warm. :class:`CompileCounter` reports what was compiled, for the
benchmarks (``scripts/bench.py --cv``) and the run logs.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import jax
from jax import monitoring

logger = logging.getLogger(__name__)

#: JAX's monitoring event of one XLA backend compilation (with its duration).
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: JAX's monitoring event of a program found in the persistent cache.
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
#: Programs that took less than this to compile are not written to the persistent cache.
MIN_COMPILE_SECONDS = 0.1


def enable_persistent_cache(directory: str | Path | None) -> Path | None:
    """Turns on JAX's persistent compilation cache in ``directory`` (``None``: leaves it off).

    Programs that compiled for at least :data:`MIN_COMPILE_SECONDS` are stored there and loaded
    instead of compiled by later processes with the same JAX version, backend and program. The
    cache is keyed by JAX itself, so a stale entry is never used; deleting the directory is
    always safe.

    Args:
        directory: cache directory (created if absent), or ``None`` to do nothing.

    Returns:
        The directory as an absolute path, or ``None``.
    """
    if directory is None or str(directory) == "":
        return None
    path = Path(directory).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    logger.debug("JAX persistent compilation cache in %s", path)
    return path


#: The environment variable that turns the persistent cache on at ``import dpp``: a directory,
#: or ``1`` for :func:`default_compilation_cache` (``0`` or empty: off).
CACHE_ENV = "DPP_COMPILATION_CACHE"


def default_compilation_cache() -> Path:
    """``<cache_dir>/jax``: the CLI's ``compilation_cache`` (``$DPP_CACHE_DIR`` or ``.cache``)."""
    from dpp.datasets.base import default_cache_dir

    return Path(default_cache_dir()) / "jax"


def use_compilation_cache(directory: str | Path | None = None) -> Path:
    """Turns on JAX's persistent compilation cache for this process (Python users' switch).

    What the command line does for its runs (``compilation_cache``): the programs this process
    compiles (a fit's coordinate ascent, a selection's...) are stored in ``directory`` and
    loaded, not compiled, by every later process, so a second script's ``DPPClassifierCV()``
    compiles no coordinate-ascent program. Call it before the first fit; setting the
    environment variable ``DPP_COMPILATION_CACHE`` (a directory, or ``1`` for the default) does
    the same at ``import dpp``. Deleting the directory is always safe.

    Args:
        directory: where the programs go; ``None``: :func:`default_compilation_cache`, the
            command line's.

    Returns:
        The directory, absolute.
    """
    path = enable_persistent_cache(default_compilation_cache() if directory is None else directory)
    assert path is not None  # a directory was given
    return path


def cache_from_environment() -> Path | None:
    """:func:`use_compilation_cache` as ``$DPP_COMPILATION_CACHE`` asks (``import dpp`` calls it).

    Returns:
        The directory, or ``None`` when the variable is unset, empty or ``0``.
    """
    value = os.environ.get(CACHE_ENV, "").strip()
    if value in ("", "0"):
        return None
    return use_compilation_cache(None if value == "1" else value)


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
        cache_hits: programs loaded from the persistent compilation cache.
        names: the name of each compiled function (``jit(coordinate_ascent)``...), in order.
        durations: the seconds of each compilation, in the order of ``names``.
        loaded: whether each of ``names`` came from the persistent cache (its hit is reported
            inside its compilation, on the same thread).
    """

    def __init__(self):
        self.compiles = 0
        self.seconds = 0.0
        self.cache_hits = 0
        self.names: list[str] = []
        self.durations: list[float] = []
        self.loaded: list[bool] = []
        self._lock = threading.Lock()
        self._hit = threading.local()  # a cache hit seen in this thread's open compilation

    def _on_duration(self, event: str, duration: float, fun_name: str = "?", **_) -> None:
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
