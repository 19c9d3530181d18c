"""An ensemble of set classifiers: their predictions combined, instead of one refit.

The per-pooling winners of DPP's selection (mean, max and gem, each chosen by its own
:class:`~dpp.DPPClassifierCV`), or one selection over several k-means seeds, fitted on the same
sets; the ensemble predicts the weighted mean of their log-probabilities, renormalised (a
product of experts, Hinton 2002). Every pooling wins on some tasks and none on all, and one
choice among them by cross-validation on 80-200 sets is noisy; combining keeps each member's
signal without betting on the choice (Breiman 1996's bagging argument, over models rather than
resamples). A mean of log-probabilities is a mean of the members' class scores up to one
constant per set, so it keeps their exact per-vector decomposition
(:meth:`SetEnsembleClassifier.instance_scores`).

A fitted ensemble saves to one model file (:meth:`SetEnsembleClassifier.save`) that
:func:`dpp.load` reads back: the header names every member's own header and the members'
arrays are stored under ``member<i>.<name>``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from dpp import model_file
from dpp.estimators.base import SetClassifierMixin
from dpp.estimators.inputs import labelled_sets
from dpp.model import FitReport
from dpp.model.report import CLEAN_STATUSES, STATUSES

#: The class name a model file of an ensemble records (``estimator`` of its header).
ENSEMBLE = "SetEnsembleClassifier"
#: How an ensemble combines its members' predictions, as its model files record it
#: (``params.combine``): the weighted mean of their log-probabilities, renormalised. A file
#: that records ``"proba"`` (the mean of probabilities, dpp 0.2's other choice; a 0.1 file,
#: without the field, combined so) is read by dpp 0.2.
COMBINE = "log_proba"


def combined_log_proba(logs, weights) -> np.ndarray:
    """``[N, C]`` log class probabilities of members' predictions combined.

    The weighted mean of the log-probabilities less its log-sum-exp over the classes.

    Args:
        logs: ``[m, N, C]`` the members' log class probabilities.
        weights: ``[m]`` their weights, > 0, summing to 1.
    """
    logs = np.asarray(logs, np.float64)
    w = np.asarray(weights, np.float64)[:, None, None]
    mean = np.sum(w * logs, axis=0)
    return mean - logsumexp(mean, axis=1, keepdims=True)


def seed_members(estimator, seeds=(0, 1, 2)) -> list[tuple[str, BaseEstimator]]:
    """``estimator`` once per k-means seed: its ``random_state`` (or its tuned estimator's).

    Args:
        estimator: a set classifier with ``random_state``, or a :class:`~dpp.DPPClassifierCV`
            (the seed then goes to the estimator it tunes, and to its folds).
        seeds: the seeds, one member each.
    """
    members = []
    for seed in seeds:
        member = clone(estimator)
        inner = member.get_params().get("estimator")
        if inner is not None:  # a DPPClassifierCV: the seed of the estimator it tunes
            member.set_params(estimator=clone(inner).set_params(random_state=int(seed)))
        else:
            member.set_params(random_state=int(seed))
        members.append((f"seed{seed}", member))
    return members


class SetEnsembleClassifier(SetClassifierMixin, ClassifierMixin, BaseEstimator):
    r"""Set classifiers fitted on the same sets, their predictions combined.

    ``predict_proba`` is the softmax of the weighted mean of the members' log-probabilities,
    :math:`p(c) \propto \prod_m p_m(c)^{w_m}` (a product of experts, Hinton 2002), and
    ``predict`` the most probable class. The ensemble's class scores are the weighted mean of
    its members' up to one constant per set, so :meth:`instance_scores` and ``intercept_``
    decompose them exactly as each member's do.

    Args:
        estimators: ``(name, estimator)`` pairs, the members (each cloned and fitted).
            :func:`dpp.estimators.cv.pooling_members` gives DPP's per-pooling winners (what
            ``DPPClassifierCV(**RAW_VECTORS)`` fits and combines itself), :func:`seed_members`
            one member per k-means seed. ``None`` (the default, so that ``get_params``
            works) is refused at ``fit``.
        weights: ``[len(estimators)]`` non-negative weights of the members (not all 0), their
            share of the mean; ``None``: equal.

    Fitted attributes: ``estimators_`` (the fitted members, in order), ``named_estimators_``
    (by name), ``classes_`` (shared by every member), ``n_features_in_``, ``member_statuses_``
    (name -> the member's ``fit_report_.status``) and ``fit_report_`` (status: the first
    member status that is not clean in :data:`~dpp.model.report.STATUSES` order from the
    worst, ``early_stopped`` when a member stopped early, else ``converged``; the reason names
    every member's status).
    """

    def __init__(self, estimators=None, weights=None):
        self.estimators = estimators
        self.weights = weights

    def checked_members(self) -> list[tuple[str, BaseEstimator]]:
        """The ``(name, estimator)`` pairs, checked.

        Raises:
            ValueError: no members, names not distinct text, a member without
                ``predict_proba``, weights of another length, negative or all 0.
        """
        if self.estimators is None:
            raise ValueError(
                "SetEnsembleClassifier needs its members: estimators=[(name, estimator), ...], "
                "e.g. dpp.estimators.cv.pooling_members() (DPPClassifierCV(**RAW_VECTORS) fits "
                "that ensemble itself) or seed_members(estimator)"
            )
        members = list(self.estimators)
        if not members or not all(isinstance(m, tuple) and len(m) == 2 for m in members):
            raise ValueError(
                f"estimators must be a non-empty list of (name, estimator) pairs, got "
                f"{self.estimators!r}"
            )
        names = [name for name, _ in members]
        if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"estimators' names must be distinct non-empty text, got {names}")
        for name, est in members:
            if not hasattr(est, "predict_proba"):
                raise ValueError(f"member {name!r} ({type(est).__name__}) has no predict_proba")
        if self.weights is not None:
            w = np.asarray(self.weights, np.float64)
            if (
                w.shape != (len(members),)
                or not np.all(np.isfinite(w))
                or np.any(w < 0)
                or (w.sum() == 0)
            ):
                raise ValueError(
                    f"weights must be {len(members)} finite values >= 0, not all 0, got "
                    f"{self.weights!r}"
                )
        return members

    def fit(self, X, y=None, sample_weight=None):
        """Fits every member on the same sets; returns ``self``.

        Args:
            X: training sets (see :mod:`dpp.estimators`).
            y: ``[N]`` class labels or ``[N, C]`` soft labels (``None`` for labelled
                ``RaggedSets``).
            sample_weight: optional ``[N]`` per-set weights.

        Raises:
            ValueError: the errors of :meth:`checked_members` and of :func:`labelled_sets`, and
                members that disagree on the classes; each member's own ``fit`` errors.
        """
        members = self.checked_members()
        sets, classes = labelled_sets(X, y, sample_weight)
        fitted = [(name, clone(est).fit(sets)) for name, est in members]
        for name, est in fitted:
            if len(est.classes_) != len(classes):
                raise ValueError(
                    f"member {name!r} has {len(est.classes_)} classes, the sets {len(classes)}"
                )
            est.classes_ = classes  # each member saw the labels as columns, as the ensemble
            if hasattr(est, "best_estimator_"):  # a selection saves its refitted estimator
                est.best_estimator_.classes_ = classes
        self.set_fitted(fitted, classes)
        return self

    def set_fitted(self, fitted: list, classes: np.ndarray) -> None:
        """Sets the fitted attributes from fitted ``(name, estimator)`` pairs and ``classes``.

        What ``fit``, :class:`~dpp.DPPClassifierCV`'s refit and the model file's loader call.
        """
        self.estimators_ = [est for _, est in fitted]
        self.named_estimators_ = dict(fitted)
        self.classes_ = np.asarray(classes)
        self.n_features_in_ = int(self.estimators_[0].n_features_in_)
        self.member_statuses_ = {name: est.fit_report_.status for name, est in fitted}
        self.fit_report_ = _report(self.member_statuses_)

    def _weights(self) -> np.ndarray:
        n = len(self.estimators_)
        w = np.ones(n) if self.weights is None else np.asarray(self.weights, np.float64)
        return w / w.sum()

    def _used(self) -> list[tuple[float, BaseEstimator]]:
        """``(weight, member)`` of every member whose weight is not 0 (weights summing to 1)."""
        check_is_fitted(self, "estimators_")
        self.checked_members()  # the weights as set now (they act at prediction)
        return [(w, e) for w, e in zip(self._weights(), self.estimators_, strict=True) if w > 0]

    def predict_log_proba(self, X) -> np.ndarray:
        """``[N, C]`` log class probabilities of the combination (float64).

        The members' weighted mean log-probabilities less its log-sum-exp over the classes.
        """
        used = self._used()
        logs = [np.asarray(e.predict_log_proba(X), np.float64) for _, e in used]
        return combined_log_proba(logs, [w for w, _ in used])

    def transform(self, X) -> np.ndarray:
        """``[N, K_1 + ... + K_m]`` the members' set representations ``z``, side by side."""
        check_is_fitted(self, "estimators_")
        return np.concatenate([np.asarray(e.transform(X), np.float64) for e in self.estimators_], 1)

    def instance_scores(self, X) -> list[np.ndarray]:
        """Each vector's ``[M_n, C]`` part of its set's class scores.

        The weighted mean of the members' :meth:`~dpp.DPPClassifier.instance_scores`: the
        ensemble's log-probabilities are the weighted mean of the members' less one constant
        per set, and each member's are the log-softmax of its vectors' scores plus its
        ``intercept_``, so ``instance_scores(X)[n].sum(0) + intercept_`` are the ensemble's
        class scores, whose log-softmax is ``predict_log_proba(X)[n]`` (to the members'
        float32 rounding).

        Args:
            X: ``N`` sets (as ``fit`` takes them).

        Returns:
            ``N`` float64 arrays ``[M_n, C]``, rows in the order of each set's vectors,
            columns in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        used = self._used()
        parts = [(w, e.instance_scores(X)) for w, e in used]
        return [
            sum(w * np.asarray(scores[n], np.float64) for w, scores in parts)
            for n in range(len(parts[0][1]))
        ]

    @property
    def intercept_(self) -> np.ndarray:
        """``[C]`` float64: the weighted mean of the members' ``intercept_``.

        The part of the class scores no vector carries (see :meth:`instance_scores`).

        Raises:
            AttributeError: before ``fit``.
        """
        if "estimators_" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} is not fitted: no intercept_")
        return sum(w * np.asarray(e.intercept_, np.float64) for w, e in self._used())

    def soft_assignments(self, X) -> list[np.ndarray]:
        """Every vector's codes under each member, side by side: ``[M_n, K_1 + ... + K_m]``.

        The members' :meth:`~dpp.DPPClassifier.soft_assignments` (eq. 3) concatenated along
        the prototypes in the order of ``estimators_``, as :meth:`transform` concatenates
        their ``z``; a member's block is its ``prototypes_``' count wide.

        Raises:
            AttributeError: a member without ``soft_assignments`` (naming it).
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        check_is_fitted(self, "estimators_")
        parts = []
        for name, est in self.named_estimators_.items():
            if not hasattr(est, "soft_assignments"):
                raise AttributeError(
                    f"member {name!r} ({type(est).__name__}) has no soft_assignments"
                )
            parts.append(est.soft_assignments(X))
        return [
            np.concatenate([np.asarray(p[n], np.float64) for p in parts], axis=1)
            for n in range(len(parts[0]))
        ]

    def save(self, path) -> Path:
        """Writes the fitted ensemble to one model file; :func:`dpp.load` reads it back.

        Each member is written by its own ``save`` (a :class:`~dpp.DPPClassifierCV` writes its
        refitted estimator) and read back with every check of a model file; the ensemble's
        file holds each member's header and its arrays under ``member<i>.<name>``.

        Returns:
            The path written.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        check_is_fitted(self, "estimators_")
        headers, arrays = [], {}
        with tempfile.TemporaryDirectory() as tmp:
            for i, est in enumerate(self.estimators_):
                header, member_arrays = model_file.read(est.save(Path(tmp) / f"member{i}.npz"))
                headers.append(header)
                arrays.update({f"member{i}.{k}": v for k, v in member_arrays.items()})
        names = list(self.named_estimators_)
        weights = None if self.weights is None else [float(w) for w in self.weights]
        header = {
            "estimator": ENSEMBLE,
            "method": "ensemble",
            "params": {"names": names, "weights": weights, "combine": COMBINE},
            "members": headers,
            "classes": model_file.jsonable(self.classes_.tolist()),
            "classes_dtype": self.classes_.dtype.kind,
            "n_features_in": self.n_features_in_,
            "info": model_file.jsonable(self.fit_report_.to_dict()),
        }
        return model_file.write(path, header, arrays)


def _report(statuses: dict) -> FitReport:
    """The ensemble's report: its worst member status, and every member's in the reason."""
    found = [s for s in statuses.values() if s is not None]
    unclean = [s for s in reversed(STATUSES) if s in found and s not in CLEAN_STATUSES]
    if unclean:
        status = unclean[0]
    elif "early_stopped" in found:
        status = "early_stopped"
    else:
        status = "converged" if found else None
    reason = "; ".join(f"{name}: {s}" for name, s in statuses.items())
    return FitReport(method="ensemble", status=status, reason=f"members' statuses: {reason}")


def from_file(path: Path, header: dict, arrays: dict, build) -> SetEnsembleClassifier:
    """The ensemble of a model file whose header records :data:`ENSEMBLE`.

    Args:
        path: the file (named in errors).
        header: its header; ``members`` holds each member's.
        arrays: its arrays; member ``i``'s under ``member<i>.``.
        build: ``(path, header, arrays) -> estimator``, the loader of one member's parts
            (:func:`dpp.estimators.io.load`'s checks).

    Raises:
        ModelFileError: members, names, weights or classes that do not agree, naming the field.
    """
    members, params = header.get("members"), header.get("params")
    if not isinstance(members, list) or not members or not isinstance(params, dict):
        raise model_file.bad(path, "members", "must list each member's header")
    names = params.get("names")
    if not isinstance(names, list) or len(names) != len(members):
        raise model_file.bad(path, "params.names", f"must name the {len(members)} members")
    combine = params.get("combine", "proba")  # a 0.1 file, without the field, combined so
    if combine != COMBINE:
        raise model_file.bad(
            path, "params.combine", f"is {combine!r}: an ensemble of the members' mean "
            "probabilities, which dpp 0.2 reads (pip install 'dpp<0.3'); this dpp combines "
            "log-probabilities only",
        )  # fmt: skip
    prefixes = [f"member{i}." for i in range(len(members))]
    stray = [k for k in arrays if not any(k.startswith(p) for p in prefixes)]
    if stray:
        raise model_file.bad(path, "arrays", f"{stray} belong to no member")
    fitted = []
    for i, (name, member) in enumerate(zip(names, members, strict=True)):
        if not isinstance(member, dict):
            raise model_file.bad(path, f"members[{i}]", "must be a model file's header")
        own = {k[len(prefixes[i]) :]: v for k, v in arrays.items() if k.startswith(prefixes[i])}
        fitted.append((str(name), build(path, member, own)))
    ensemble = SetEnsembleClassifier(
        estimators=[(n, clone(e)) for n, e in fitted],
        weights=params.get("weights"),
    )
    try:
        ensemble.checked_members()
    except ValueError as err:
        raise model_file.bad(path, "params", str(err)) from None
    classes = np.asarray(header.get("classes"))
    if header.get("classes_dtype") in ("U", "S", "O"):
        classes = classes.astype(str)
    for i, (_, est) in enumerate(fitted):
        if not np.array_equal(np.asarray(est.classes_), classes):
            raise model_file.bad(path, f"members[{i}].classes", "differ from the ensemble's")
    ensemble.set_fitted(fitted, classes)
    return ensemble
