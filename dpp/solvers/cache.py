"""JAX's persistent compilation cache: on by default for Python users, in a per-user folder.

Compiling dominates small fits; the programs one process compiles are stored on disk and loaded,
not compiled, by the next (:func:`enable_persistent_cache`). ``dpp`` turns the cache on at the
first name used from it (:func:`cache_from_environment`), in :func:`user_compilation_cache`,
unless ``DPP_COMPILATION_CACHE=0``; the command line uses its own ``compilation_cache``
(:mod:`dpp.experiment.compilation`).
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import jax

logger = logging.getLogger(__name__)

#: The environment variable of dpp's cache folder (features, compiled programs).
CACHE_DIR_ENV = "DPP_CACHE_DIR"
#: Programs that took less than this to compile are not written to the persistent cache.
MIN_COMPILE_SECONDS = 0.1


#: The persistent cache's size cap: past it, the least recently used programs are deleted when
#: a process turns the cache on (:func:`prune_cache`).
MAX_CACHE_BYTES = 2 * 2**30


def prune_cache(path: Path, max_bytes: int = MAX_CACHE_BYTES) -> int:
    """Deletes the least recently used files of a cache folder until it holds ``max_bytes``.

    Once per process, when the cache is turned on: not JAX's own size cap
    (``jax_compilation_cache_max_size``), which reads a timestamp file beside every entry on
    every write and stops writing at all once a folder holds an entry without one (written by a
    process without the cap: an older dpp, the command line, JAX used directly). Files that
    vanish meanwhile (another process pruning) are skipped.

    Args:
        path: the cache folder.
        max_bytes: the size to stay under.

    Returns:
        The number of files deleted.
    """
    entries = []
    for entry in path.iterdir():
        try:
            stat = entry.stat()
        except FileNotFoundError:
            continue
        if entry.is_file():
            entries.append((max(stat.st_atime, stat.st_mtime), stat.st_size, entry))
    total = sum(size for _, size, _ in entries)
    deleted = 0
    for _, size, entry in sorted(entries):  # the least recently used first
        if total <= max_bytes:
            break
        entry.unlink(missing_ok=True)
        total -= size
        deleted += 1
    if deleted:
        logger.info("compilation cache %s: %d least recently used files deleted", path, deleted)
    return deleted


def enable_persistent_cache(directory: str | Path | None) -> Path | None:
    """Turns JAX's persistent compilation cache on in ``directory``, or off for ``None``.

    Programs that compiled for at least :data:`MIN_COMPILE_SECONDS` are stored there and loaded
    instead of compiled by later processes with the same JAX version, backend and program; past
    :data:`MAX_CACHE_BYTES` the least recently used are deleted now (:func:`prune_cache`). The
    cache is keyed by JAX itself, so a stale entry is never used; deleting the directory is
    always safe. Takes effect for the programs compiled after the call.

    Args:
        directory: cache directory (created if absent); ``None`` or ``""``: off.

    Returns:
        The directory as an absolute path, or ``None`` (off).
    """
    from jax.experimental.compilation_cache import compilation_cache

    if directory is None or str(directory) == "":
        jax.config.update("jax_compilation_cache_dir", None)
        compilation_cache.reset_cache()
        logger.debug("JAX persistent compilation cache off")
        return None
    path = Path(directory).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    prune_cache(path)
    compilation_cache.reset_cache()  # the next compilation reads the setting anew
    logger.debug("JAX persistent compilation cache in %s", path)
    return path


#: The environment variable of the Python users' persistent cache, read at the first name used
#: from ``dpp``: unset, empty or ``1``: on, in :func:`user_compilation_cache`; ``0`` or
#: ``off``: off; anything else: that directory.
CACHE_ENV = "DPP_COMPILATION_CACHE"


def user_compilation_cache() -> Path:
    """The Python users' cache: ``$DPP_CACHE_DIR/jax``, else ``$XDG_CACHE_HOME/dpp/jax``.

    ``$XDG_CACHE_HOME`` defaults to ``~/.cache`` (a per-user folder, as PyTorch's compiler and
    Triton keep theirs); with ``$DPP_CACHE_DIR`` set it is the command line's directory too.
    """
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser() / "jax"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "dpp" / "jax"


def use_compilation_cache(directory: str | Path | None = None) -> Path:
    """Turns on JAX's persistent compilation cache for this process in ``directory``.

    On by default for Python users (:func:`cache_from_environment`, at the first name used from
    ``dpp``): call this to choose another directory, before the first fit. The programs
    this process compiles (a fit's coordinate ascent, a selection's...) are stored there and
    loaded, not compiled, by every later process, so a second script's ``DPPClassifierCV()``
    compiles no coordinate-ascent program. Deleting the directory is always safe.

    Args:
        directory: where the programs go; ``None``: :func:`user_compilation_cache`.

    Returns:
        The directory, absolute.
    """
    path = enable_persistent_cache(user_compilation_cache() if directory is None else directory)
    assert path is not None  # a directory was given
    return path


def off_by_environment() -> bool:
    """Whether ``$DPP_COMPILATION_CACHE`` turns the cache off (``0``, ``off``, ``false``, ``no``).

    The one switch for every process: the command line's ``compilation_cache`` gives way to it.
    """
    return os.environ.get(CACHE_ENV, "").strip().lower() in ("0", "off", "false", "no")


def cache_from_environment() -> Path | None:
    """The persistent cache as ``$DPP_COMPILATION_CACHE`` says (:data:`CACHE_ENV`); on by default.

    Called once, at the first name used from ``dpp`` (``dpp.DPPClassifier``, ...), so that a
    second Python process fits without compiling what the first compiled. Tests and CI set
    ``DPP_COMPILATION_CACHE=0``.

    A folder that cannot be made or written (a read-only home) leaves the cache off with a
    ``UserWarning`` naming it: a name used from ``dpp`` never fails for the cache's sake.

    Returns:
        The directory, or ``None`` when the variable says ``0`` or ``off``, or the folder
        cannot be used.
    """
    value = os.environ.get(CACHE_ENV, "").strip()
    if off_by_environment():
        return enable_persistent_cache(None)
    folder = user_compilation_cache() if value in ("", "1") else Path(value)
    try:
        return use_compilation_cache(folder)
    except OSError as err:
        warnings.warn(
            f"dpp's compilation cache is off: its folder {folder} cannot be used ({err}); set "
            f"{CACHE_ENV} to a writable folder, or to 0",
            stacklevel=2,
        )
        return enable_persistent_cache(None)


#: The kernel's default limit on memory mappings per process (``vm.max_map_count``).
DEFAULT_MAX_MAP_COUNT = 65530
#: The share of that limit past which :func:`release_compiled_programs` drops JAX's programs.
RELEASE_SHARE = 0.3


def memory_mappings() -> int:
    """The memory mappings this process holds (lines of ``/proc/self/maps``; 0 without it)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


def max_map_count() -> int:
    """The kernel's limit on memory mappings per process (``/proc/sys/vm/max_map_count``)."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return DEFAULT_MAX_MAP_COUNT


def release_compiled_programs(share: float = RELEASE_SHARE) -> bool:
    """Drops JAX's compiled programs (``jax.clear_caches()``) when this process holds many.

    Every compiled XLA CPU program that stays alive holds several memory mappings (4 to 9 in
    the probes), and dpp's jitted functions keep one program per shape they have seen: a
    process that fits thousands
    of differently shaped problems (a long suite run, a test worker) reaches the kernel's limit
    on mappings per process, where XLA's compiler crashes with a segmentation fault instead of
    raising. Called between the units of work that may share nothing (the suite's tasks and
    outer folds, the test modules); later fits compile again what they need. Not thread-safe:
    never while another thread fits.

    Args:
        share: the share of :func:`max_map_count` past which the programs are dropped.

    Returns:
        Whether they were dropped.
    """
    count = memory_mappings()
    if count <= share * max_map_count():
        return False
    jax.clear_caches()
    logger.info(
        "%d memory mappings (limit %d): JAX's compiled programs dropped", count, max_map_count()
    )
    return True
