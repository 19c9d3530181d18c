"""Choice of the ridge ``lambda`` by cross-validation on the training sets only.

The Theta-step is a convex problem on fixed codes ``z``, so the selection fits the softmax
classifier of eq. (16) on the codes of a fixed encoder (the k-means hard codes of the standard
prototype, by default) for every ``lambda`` of a grid and every fold, and keeps the ``lambda``
with the highest mean validation log-likelihood per set. The test sets are never seen.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from sklearn.model_selection import KFold, StratifiedGroupKFold, StratifiedKFold

from dpp.classifier import log_predictive
from dpp.solvers.coordinate_ascent import fit_classifier
from dpp.solvers.lbfgs import LBFGSSettings


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
        raise ValueError(f"cross-validation needs 2 <= folds <= N, got folds={folds}")
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


def cv_scores(
    z: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    grid: list[float],
    folds: int,
    seed: int,
    solver: LBFGSSettings,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    """Mean validation log-likelihood per set of the Theta-step for every ``lambda``.

    Args:
        z: ``[N, K]`` training codes.
        labels: ``[N, C]`` soft labels.
        weights: ``[N]`` per-set weights of the training objective.
        grid: candidate ``lambda`` values (>= 0).
        folds: number of folds.
        seed: fold assignment seed.
        solver: Theta-step solver.
        groups: optional ``[N]`` group of each set; folds then keep groups whole.

    Returns:
        ``[len(grid)]`` mean over folds of the validation log-likelihood per set (nats).

    Within a fold the grid is walked from the strongest ``lambda`` down, each fit starting from
    the previous solution (a regularisation path; the problem is convex, so only the number of
    iterations changes).
    """
    z, labels, weights = (np.asarray(a) for a in (z, labels, weights))
    scores = np.zeros(len(grid))
    path = sorted(range(len(grid)), key=lambda i: -float(grid[i]))  # strongest lambda first
    for train_idx, val_idx in cv_folds(labels, folds, seed, groups):
        theta = jnp.zeros((z.shape[1], labels.shape[1]), z.dtype)
        fold = [jnp.asarray(a[train_idx]) for a in (z, labels, weights)]
        for i in path:  # warm start: each lambda starts from the previous (stronger) solution
            theta = fit_classifier(*fold, theta, float(grid[i]), solver)
            log_p = np.asarray(log_predictive(jnp.asarray(z[val_idx]), theta))
            scores[i] += float(np.mean(np.sum(labels[val_idx] * log_p, axis=1))) / folds
    return scores


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


def _next_value(values: list[float], strongest: bool) -> float | None:
    """One geometric step beyond the strongest or weakest value (``None``: cannot go on)."""
    if strongest:
        edge, inner = values[0], values[1] if len(values) > 1 else 0.0
        return edge * (edge / inner if inner > 0 else 10.0) if edge > 0 else None
    edge, inner = values[-1], values[-2] if len(values) > 1 else 0.0
    return edge / (inner / edge if edge > 0 and inner > 0 else 10.0) if edge > 0 else None


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
    if len(values) == 1:
        position = "only value"
    elif best == 0:
        position = "strongest edge"
    elif best == len(values) - 1:
        position = "weakest edge"
    else:
        position = "interior"
    return PathChoice(values, np.asarray(scores), best, position, added)


def select_l2(
    z: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    grid: list[float],
    folds: int,
    seed: int,
    solver: LBFGSSettings,
    groups: np.ndarray | None = None,
    max_extensions: int = MAX_EXTENSIONS,
) -> tuple[float, PathChoice]:
    """The ``lambda`` with the best cross-validated log-likelihood (ties: larger).

    The grid is extended while the best value lies at its edge (:func:`choose_on_path`).
    ``lambda`` applies to the summed likelihood of the folds' training parts, which hold
    ``(folds - 1) / folds`` of the sets; it is rescaled by ``folds / (folds - 1)`` before it is
    returned, so that it means the same strength on the whole training part.

    With ``groups`` the folds keep each group whole (:func:`cv_folds`).

    Returns:
        ``(lambda, choice)``: the rescaled ``lambda`` and the :class:`PathChoice` (unscaled
        values, scores of :func:`cv_scores`).

    Raises:
        ValueError: for an empty grid or a negative value.
    """
    grid = [float(g) for g in grid]
    if not grid or min(grid) < 0:
        raise ValueError("the lambda grid must be a non-empty list of values >= 0")
    scores = cv_scores(z, labels, weights, grid, folds, seed, solver, groups)

    def score_new(l2: float) -> float:
        return float(cv_scores(z, labels, weights, [l2], folds, seed, solver, groups)[0])

    choice = choose_on_path(grid, scores, score_new, max_extensions)
    return choice.values[choice.best] * folds / (folds - 1), choice
