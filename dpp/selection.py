"""The parts of model selection every estimator shares: folds and the regularisation path.

:func:`cv_splits` reads ``cv`` as scikit-learn's ``GridSearchCV`` does (:func:`cv_folds` for a
number of folds, grouped or stratified), and :func:`choose_on_path` picks the best strength of a
path, extending it while the best lies at an edge; :func:`choose` picks among scored candidates, a
pure function of their scores.
:class:`dpp.estimators.DPPClassifierCV` (the one selection of ``l2``, used by the command
line's ``l2_selection.kind=cv`` and ``dpp_cv`` alike) and the pooled baselines' choice of ``C``
are built on them.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np
from sklearn.model_selection import KFold, StratifiedGroupKFold, StratifiedKFold, train_test_split


def cv_folds(
    labels: np.ndarray, folds: int, seed: int, groups: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``folds`` (train, validation) index pairs.

    With ``groups`` (e.g. the spatial block of each set), every group lies wholly in one fold
    (scikit-learn ``StratifiedGroupKFold``), so validation sets never share a group with the
    sets fitted. Otherwise stratified on the label argmax when every class has at least
    ``folds`` sets, else plain shuffled folds.

    Raises:
        ValueError: if ``folds < 2``, there are fewer sets (or groups) than folds.
    """
    labels = np.asarray(labels)
    if folds < 2 or labels.shape[0] < folds:
        raise ValueError(
            f"cross-validation needs 2 <= folds <= N (the number of training sets), got "
            f"folds={folds} and N={labels.shape[0]}"
            + (f": pass cv={labels.shape[0]} or more sets" if labels.shape[0] >= 2 else "")
        )
    strata = np.argmax(labels, axis=1)
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != strata.shape or np.unique(groups).size < folds:
            raise ValueError(
                f"group cross-validation needs one group per set and at least {folds} groups"
            )
        splitter = StratifiedGroupKFold(folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(strata)), strata, groups))
    counts = np.bincount(strata)
    if np.all(counts[counts > 0] >= folds):
        splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(strata)), strata))
    return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(strata))))


def cv_splits(
    cv, labels: np.ndarray, seed: int, groups: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, validation) index pairs from ``cv`` as scikit-learn's ``GridSearchCV`` reads it.

    Args:
        cv: a number of folds (:func:`cv_folds`: stratified, or grouped with ``groups``), a
            scikit-learn splitter (anything with ``split(X, y, groups)``; ``y`` is the most
            probable class of each set), or an iterable of ``(train, validation)`` index arrays.
        labels: ``[N, C]`` soft labels.
        seed: shuffling seed of the folds when ``cv`` is a number.
        groups: optional ``[N]`` group of each set.

    Returns:
        The pairs, as int64 arrays.

    Raises:
        ValueError: a number below 2 or above ``N``, a pair with an empty part, indices outside
            ``[0, N)``, repeated, or shared by both parts, or no pair at all.
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        return cv_folds(labels, int(cv), seed, groups)
    if hasattr(cv, "split") and not isinstance(cv, str | bytes):
        pairs = cv.split(np.zeros((n, 1)), np.argmax(labels, axis=1), groups)
    elif isinstance(cv, Iterable) and not isinstance(cv, str | bytes):
        pairs = cv
    else:
        raise ValueError(
            f"cv must be a number of folds, a scikit-learn splitter or an iterable of "
            f"(train, validation) index arrays; got {cv!r}"
        )
    splits = []
    for f, pair in enumerate(pairs):
        parts = [np.asarray(part) for part in pair] if isinstance(pair, Iterable) else []
        if len(parts) != 2 or any(part.dtype.kind not in "iu" for part in parts):
            raise ValueError(f"cv split {f} is not a (train, validation) pair of index arrays")
        train, val = (part.astype(np.int64) for part in parts)
        for name, part in (("training", train), ("validation", val)):
            if part.ndim != 1 or part.size == 0:
                raise ValueError(f"cv split {f}: the {name} part must be a non-empty 1-D array")
            if part.min() < 0 or part.max() >= n or np.unique(part).size != part.size:
                raise ValueError(
                    f"cv split {f}: the {name} indices must be distinct and lie in [0, {n})"
                )
        if np.intersect1d(train, val).size:
            raise ValueError(f"cv split {f}: a set is both trained on and validated on")
        splits.append((train, val))
    if not splits:
        raise ValueError("cv gave no (train, validation) split")
    return splits


#: Values a selection may add beyond each end of its grid before it reports an edge.
MAX_EXTENSIONS = 3


class PathChoice(NamedTuple):
    """A choice on a regularisation path, and where it lies.

    Attributes:
        values: every strength scored, strongest first (the grid and what was added).
        scores: ``[len(values)]`` their scores (higher is better).
        best: index of the choice in ``values`` (ties go to the stronger value).
        position: ``interior``; ``strongest edge`` or ``weakest edge`` (the choice is the
            strongest or weakest value scored: the extension limit was reached, or the weakest
            value is 0); ``only value`` for a one-value grid.
        added: the values added beyond the grid, in the order they were scored.
    """

    values: list[float]
    scores: np.ndarray
    best: int
    position: str
    added: list[float]


#: Positions of a choice at an end of the values scored (:func:`dpp.selection.choose_on_path`).
EDGES = ("strongest edge", "weakest edge")


def edge_message(owner: str, name: str, choice: PathChoice, max_extensions: int) -> str:
    """The warning of a selection whose choice lies at an edge after its last extension.

    Args:
        owner: the estimator's class name.
        name: the parameter chosen (``l2``, ``C``).
        choice: the :class:`~dpp.selection.PathChoice` (its ``values`` run strongest first).
        max_extensions: the extensions allowed on each side.

    Returns:
        One sentence naming the chosen value, the edge and every value scored.
    """
    best = choice.values[choice.best]
    scored = ", ".join(f"{v:.3g}" for v in choice.values)
    return (
        f"{owner}: the chosen {name} = {best:.3g} lies at the {choice.position} of the values "
        f"scored [{scored}] (strongest first), after max_extensions = {max_extensions} "
        f"extension(s) on each side ({len(choice.added)} added): the best value may lie "
        "beyond it; widen the grid or allow more extensions"
    )


def _next_value(values: list[float], strongest: bool) -> float | None:
    """One geometric step beyond the strongest or weakest value (``None``: cannot go on).

    Rounded to 12 significant digits, so that a step of 10 below ``1e-5`` is ``1e-06`` as a
    user writes it, not ``1.0000000000000002e-06``.
    """
    if strongest:
        edge, inner = values[0], values[1] if len(values) > 1 else 0.0
        step = edge * (edge / inner if inner > 0 else 10.0) if edge > 0 else None
    else:
        edge, inner = values[-1], values[-2] if len(values) > 1 else 0.0
        step = edge / (inner / edge if edge > 0 and inner > 0 else 10.0) if edge > 0 else None
    return None if step is None else float(f"{step:.12g}")


def choose_on_path(
    values: list[float],
    scores: np.ndarray,
    score_new: Callable[[float], float],
    max_extensions: int = MAX_EXTENSIONS,
) -> PathChoice:
    """The best strength of a regularisation path, extended while the best lies at an edge.

    While the best value is the strongest (or weakest) scored, one more value is scored one
    geometric step beyond it (the ratio of the two outermost values on that side, or 10), at
    most ``max_extensions`` times on each side; a weakest value of 0 is a true end.

    Args:
        values: strengths (``l2``, or ``1 / C``), larger is stronger, any order, distinct.
        scores: their scores (higher is better).
        score_new: scores one new strength.
        max_extensions: values that may be added on each side (0: the grid as given).

    Returns:
        The :class:`PathChoice`.

    Raises:
        ValueError: for no value, a negative one, or scores of another length.
    """
    order = np.argsort(-np.asarray(values, np.float64), kind="stable")
    values = [float(values[i]) for i in order]
    scores = [float(np.asarray(scores)[i]) for i in order]
    if not values or values[-1] < 0 or len(scores) != len(values):
        raise ValueError("a path needs values >= 0 and one score per value")
    added, extended = [], {True: 0, False: 0}
    while True:
        best = max(range(len(values)), key=lambda i: (scores[i], -i))  # ties: the stronger
        at_edge = {True: best == 0, False: best == len(values) - 1}
        side = next((s for s in (True, False) if at_edge[s] and len(values) > 1), None)
        step = None if side is None else _next_value(values, side)
        if side is None or step is None or extended[side] >= max_extensions:
            break
        extended[side] += 1
        added.append(step)
        score = float(score_new(step))
        if side:
            values.insert(0, step)
            scores.insert(0, score)
        else:
            values.append(step)
            scores.append(score)
    position = position_among(values, values[best])
    return PathChoice(values, np.asarray(scores), best, position, added)


def position_among(values: list[float], chosen: float) -> str:
    """Where ``chosen`` lies among ``values`` (``l2``: larger is stronger).

    Returns:
        ``only value`` (one distinct value), ``strongest edge`` (the largest), ``weakest
        edge`` (the smallest) or ``interior``: the positions of :class:`PathChoice`.
    """
    if len(set(values)) == 1:
        return "only value"
    if chosen == max(values):
        return "strongest edge"
    if chosen == min(values):
        return "weakest edge"
    return "interior"


def holdout_split(
    labels: np.ndarray, fraction: float | int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``(fit, held_out)`` indices: ``ceil(fraction * N)`` sets held out of ``N``.

    Stratified by the label's argmax when every present class has two sets and there are at
    least as many held-out sets as classes; otherwise a plain random draw. Used for early
    stopping and for the validation metric of a sweep (held out of the *training* sets).

    Args:
        labels: ``[N, C]`` (soft) labels.
        fraction: share held out, in ``(0, 1)``; an ``int``: that many sets (in ``[1, N)``),
            as scikit-learn's ``test_size``.
        seed: random state.

    Returns:
        Two sorted int arrays partitioning ``range(N)``.
    """
    strata = np.argmax(np.asarray(labels), axis=1)
    counts = np.bincount(strata)
    count = isinstance(fraction, int | np.integer)
    held_out = int(fraction) if count else int(np.ceil(fraction * len(strata)))
    stratify = strata if counts[counts > 0].min() >= 2 and held_out >= np.sum(counts > 0) else None
    fit, rest = train_test_split(
        np.arange(len(strata)), test_size=fraction, random_state=seed, stratify=stratify
    )
    return np.sort(fit), np.sort(rest)


#: Early stopping needs at least this many held-out sets; with fewer it is skipped.
MIN_VALIDATION_SETS = 10


class HoldOut(NamedTuple):
    """The held-out split of early stopping, or why there is none.

    Attributes:
        fit: sorted indices of the sets fitted (``None`` without early stopping).
        validation: sorted indices of the held-out sets (``None`` without early stopping).
        skipped: why early stopping is skipped (too few held-out sets), else ``None``.
    """

    fit: np.ndarray | None
    validation: np.ndarray | None
    skipped: str | None


def early_stopping_runs(num_sets: int, fraction: float, widen: bool = False) -> bool:
    """Whether :func:`hold_out` holds sets out of ``num_sets`` (rather than skipping).

    ``ceil(fraction * num_sets) >= MIN_VALIDATION_SETS``, or with ``widen``
    ``num_sets >= 2 * MIN_VALIDATION_SETS``; never for ``fraction <= 0``.

    Args:
        num_sets: the number of training sets ``N`` of the fit.
        fraction: the held-out share (``validation_fraction``, in ``[0, 1)``).
        widen: the fit's ``widen_validation`` (a share under 10 sets widened to 10).

    Returns:
        ``True`` where the fit stops early on held-out sets, ``False`` where it trains
        unmonitored. Raises nothing: the share is checked by the estimators' parameters.
    """
    if fraction <= 0:
        return False
    held = int(np.ceil(fraction * num_sets))
    return held >= MIN_VALIDATION_SETS or (widen and num_sets >= 2 * MIN_VALIDATION_SETS)


def hold_out(
    labels: np.ndarray, fraction: float, seed: int, otherwise: str, widen: bool = False
) -> HoldOut:
    """Early stopping's held-out share of the training sets: the one rule of every fit.

    The prototype fits (rounds of coordinate ascent), DPP on an embedding and the networks
    (Adam epochs) all hold out ``ceil(fraction * N)`` sets by :func:`holdout_split`, and skip
    early stopping when that is fewer than :data:`MIN_VALIDATION_SETS`. With ``widen`` (an
    Adam-trained fit's ``widen_validation``, the embedded DPP's default: it would otherwise
    train ``max_epochs`` epochs unmonitored and memorise small data) a share that small is
    widened to :data:`MIN_VALIDATION_SETS` sets where at least as many are left to fit
    (``N >= 2 * MIN_VALIDATION_SETS``); the refit after early stopping trains on all ``N``
    sets. (The prototype fits instead hold every set out once, :func:`round_folds`.)

    Args:
        labels: ``[N, C]`` (soft) labels of the training sets.
        fraction: share held out; 0 turns early stopping off.
        seed: random state of the split.
        otherwise: what the fit does instead when early stopping is skipped (ends the
            ``skipped`` sentence, e.g. ``"stopping by tol"``).
        widen: hold out :data:`MIN_VALIDATION_SETS` sets where the share holds fewer and
            ``N`` allows.

    Returns:
        A :class:`HoldOut`.
    """
    if fraction <= 0:
        return HoldOut(None, None, None)
    num_sets = np.asarray(labels).shape[0]
    held = int(np.ceil(fraction * num_sets))
    if not early_stopping_runs(num_sets, fraction, widen):
        return HoldOut(
            None,
            None,
            f"early stopping skipped: {held} validation sets (< {MIN_VALIDATION_SETS}); "
            f"{otherwise}",
        )
    share = fraction if held >= MIN_VALIDATION_SETS else MIN_VALIDATION_SETS  # widened
    return HoldOut(*holdout_split(labels, share, seed), None)


def round_folds(
    labels: np.ndarray, fraction: float, seed: int
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Folds that choose a prototype fit's rounds where :func:`hold_out` would hold out too few.

    Under ``ceil(fraction * N) < MIN_VALIDATION_SETS`` a held-out share is too small to tell
    the rounds apart (fewer than 46 training sets at 0.2), yet rounds run to ``tol`` overfit
    small data: the codes saturate. Instead every set is held out once, in
    ``round(1 / fraction)`` stratified folds (5 at 0.2, at least 2, at most 10;
    :func:`cv_folds`), so the rounds are judged on all ``N`` sets.

    Args:
        labels: ``[N, C]`` (soft) labels of the training sets.
        fraction: early stopping's share (> 0).
        seed: random state of the folds.

    Returns:
        ``(fit, validation)`` index pairs, or ``None`` where :func:`hold_out` holds out enough
        sets, or where ``N < MIN_VALIDATION_SETS`` (too few sets even in all).
    """
    n = np.asarray(labels).shape[0]
    if fraction <= 0 or n < MIN_VALIDATION_SETS or np.ceil(fraction * n) >= MIN_VALIDATION_SETS:
        return None
    return cv_folds(labels, int(np.clip(round(1 / fraction), 2, 10)), seed)


def stopping_split(
    labels: np.ndarray, fraction: float, seed: Callable[[int], int], otherwise: str
) -> tuple[HoldOut, list[tuple[np.ndarray, np.ndarray]] | None]:
    """``(split, folds)``: how a prototype fit stops early, a held-out share or folds.

    The share of :func:`hold_out`; where it would hold out too few sets, every set held out
    once in the folds of :func:`round_folds` (``None`` otherwise, and without early stopping).

    Args:
        labels: ``[N, C]`` (soft) labels of the training sets.
        fraction: early stopping's share; 0 turns it off.
        seed: ``seed(0)`` the split's random state, ``seed(1)`` the folds'; each is called
            only where it is used.
        otherwise: what the fit does where early stopping is skipped (:func:`hold_out`).
    """
    if fraction <= 0:
        return HoldOut(None, None, None), None
    split = hold_out(labels, fraction, seed(0), otherwise)
    if split.fit is not None:
        return split, None
    return split, round_folds(labels, fraction, seed(1))
