"""The suite's statistics: paired differences, the default's rule, instance evidence."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.tasks import TASKS


def paired_differences(records: list[dict], a: str, b: str, metric: str = "accuracy") -> dict:
    """Method ``a`` minus method ``b`` over the units (task, draw, fold) both finished.

    The figure that decides defaults: a gain is a gain only where its mean difference stands
    out of its standard error and no family of tasks loses significantly.

    Args:
        records: suite records; records of several runs carry a ``run`` field (the runs of
            ``benchmarks/suite.py --compare`` with several ``--out`` folders), and a unit is then
            one (run, task, draw, fold): differences pair records of one run only.
        a: a method name.
        b: another method name.
        metric: a record metric (``accuracy``, ``test_log_likelihood``, ...).

    Returns:
        ``{"units", "mean", "se", "wins", "ties", "losses", "p", "families"}``: the mean
        difference and its standard error over the paired units, the counts of units where
        ``a`` is above, level with or below ``b``, the two-sided Wilcoxon signed-rank p-value
        (scipy; ``None`` when every difference is 0 or fewer than 2 units) and the same per
        task family (:data:`TASKS`' third field). ``units`` 0 when no unit has both.
    """
    from scipy.stats import wilcoxon

    frame = pd.DataFrame(records)
    if "draw" not in frame:
        frame["draw"] = 0
    frame["draw"] = frame["draw"].fillna(0).astype(int)
    keys = ["task", "draw", "fold"] + (["run"] if "run" in frame else [])
    pairs = (
        frame[frame.method == a][[*keys, metric]]
        .merge(frame[frame.method == b][[*keys, metric]], on=keys, suffixes=("_a", "_b"))
        .dropna()
    )

    def summary(part: pd.DataFrame) -> dict:
        diff = (part[f"{metric}_a"] - part[f"{metric}_b"]).to_numpy(float)
        n = diff.size
        out = {"units": int(n), "mean": float(diff.mean()) if n else None}
        out["se"] = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else None
        out.update(wins=int((diff > 0).sum()), ties=int((diff == 0).sum()),
                   losses=int((diff < 0).sum()))  # fmt: skip
        out["p"] = float(wilcoxon(diff).pvalue) if n > 1 and np.any(diff != 0) else None
        return out

    result = summary(pairs)
    family = pairs.task.map(lambda t: TASKS[t][2] if t in TASKS else t)
    result["families"] = {f: summary(pairs[family == f]) for f in dict.fromkeys(family)}
    return result


#: The significance level of the default's rule: a rule worse than the paper's mean pooling on
#: a task family at this Wilcoxon p is not shipped.
ALPHA = 0.05


def decide(records: list[dict], candidates, reference: str = "dpp_mean") -> dict:
    """The default selection rule by the issue's criterion, from suite records.

    Among ``candidates`` measured against ``reference`` (the paper's mean pooling) on paired
    units, the one with the largest mean accuracy difference that is significantly worse
    (Wilcoxon p < :data:`ALPHA` with a negative mean) on no task family (``eligible``) and
    significantly better over all units (p < :data:`ALPHA` with a positive mean: a gain within
    noise is not a gain); otherwise ``chosen`` is ``None`` and the reference stays.

    Returns:
        ``{"reference", "rows": {candidate: paired_differences(...) | {"eligible": bool,
        "worse_on": [families], "gains": bool}}, "chosen": name or None}``; a candidate with no
        paired unit is left out.
    """
    rows = {}
    for name in candidates:
        d = paired_differences(records, name, reference)
        if not d["units"]:
            continue
        worse = [
            f for f, part in d["families"].items()
            if part["p"] is not None and part["p"] < ALPHA and part["mean"] < 0
        ]  # fmt: skip
        gains = d["p"] is not None and d["p"] < ALPHA and d["mean"] > 0
        rows[name] = {**d, "eligible": not worse, "worse_on": worse, "gains": gains}
    eligible = [n for n, r in rows.items() if r["eligible"] and r["gains"]]
    chosen = max(eligible, key=lambda n: rows[n]["mean"], default=None)
    return {"reference": reference, "rows": rows, "chosen": chosen}


def instance_metrics(estimator, sets, labels: np.ndarray, witnesses: np.ndarray) -> dict:
    """How well a fitted estimator's per-vector evidence finds the witnesses of held-out sets.

    The evidence of a vector is its contribution to the log-odds of the positive class (the
    last), ``instance_scores[:, -1] - instance_scores[:, 0]`` (:meth:`instance_scores`).

    Returns:
        ``instance_auc`` (ROC AUC of the evidence against the vectors' witness labels, over
        every held-out vector) and ``top_witness`` (the share of positive sets whose
        highest-evidence vector is a witness); for attention MIL also ``attention_auc`` and
        ``attention_top_witness`` (the same for its attention weights), and ``proba_instance_auc``
        and ``proba_top_witness`` for the positive class's probability of each vector alone
        (:meth:`instance_proba`). Empty for an estimator
        without :meth:`instance_scores`, or with one class of vectors; without ``instance_auc``
        for one that refuses it (an ensemble of probabilities).
    """
    from sklearn.metrics import roc_auc_score

    if not hasattr(estimator, "instance_scores") or len(np.unique(witnesses)) < 2:
        return {}
    positive = labels.argmax(1) == labels.shape[1] - 1
    out, readings = {}, {}
    try:
        readings[""] = [s[:, -1] - s[:, 0] for s in estimator.instance_scores(sets)]
    except NotImplementedError:  # a mean of probabilities: no per-vector decomposition
        pass
    if hasattr(estimator, "attention_weights"):
        readings["attention_"] = estimator.attention_weights(sets)
    if hasattr(estimator, "instance_proba"):  # each vector alone (mi-Net's instance classifier)
        readings["proba_"] = [p[:, -1] for p in estimator.instance_proba(sets)]
    sizes = sets.set_sizes()
    ids = np.repeat(np.arange(sizes.size), sizes)
    for prefix, per_set in readings.items():
        evidence = np.concatenate(per_set)
        # each set's highest-evidence vector (the first at ties, as argmax): sorted by set, then
        # by decreasing evidence, a set's first row is its top
        top = np.lexsort((-evidence, ids))[np.cumsum(sizes) - sizes]
        hits = witnesses[top] == 1
        out[f"{prefix}instance_auc"] = float(roc_auc_score(witnesses, evidence))
        out[f"{prefix}top_witness"] = float(hits[positive].mean()) if positive.any() else None
    return out


def example_evidence(estimator, sets, labels: np.ndarray, test: np.ndarray) -> dict:
    """The first positive test set's index and its vectors' evidence (and attention)."""
    if not hasattr(estimator, "instance_scores"):
        return {}
    chosen = test[labels[test].argmax(1) == labels.shape[1] - 1][:1]
    if chosen.size == 0:
        return {}
    example = sets.subset(chosen)
    try:
        scores = estimator.instance_scores(example)[0]
    except NotImplementedError:  # an ensemble of probabilities: no per-vector evidence
        return {}
    out = {
        "example_set": int(chosen[0]),
        "example_evidence": (scores[:, -1] - scores[:, 0]).tolist(),
    }
    if hasattr(estimator, "attention_weights"):
        out["example_attention"] = estimator.attention_weights(example)[0].tolist()
    return out
