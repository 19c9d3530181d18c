"""Predictions of a saved model for new sets, written to CSV.

    python scripts/predict.py MODEL SETS [--out predictions.csv] [--set-column set_id]
        [--label-column label] [--features a,b,c] [--no-vectors] [--no-compilation-cache]

MODEL is a file written by ``clf.save`` or a run's ``models/<method>.npz``; SETS is a sets file
(``.npz``, CSV or Parquet; see dpp/datasets/sets_file.py), labelled or not. The CSV has one row
per set: ``set_id`` (the file's id), ``predicted`` (a class) and ``p_<class>`` for every class;
with labels in SETS, also ``label``, and the accuracy is printed. Next to it,
``<out>_vectors.csv`` holds every vector's evidence (``instance_scores``): one row per vector,
``set_id``, ``vector`` (its position in its set, in the file's order) and ``score_<class>``, its
contribution to the set's score of each class in logits; a set's rows plus the model's intercept
(printed) sum to its class scores, whose softmax is ``p_<class>``. ``--no-vectors`` skips it.
JAX's persistent compilation
cache (``.cache/jax``, or ``$DPP_CACHE_DIR/jax``) is used unless ``--no-compilation-cache``.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dpp import load
from dpp.datasets.base import default_cache_dir
from dpp.datasets.sets_file import read_sets
from dpp.errors import DataError, ModelFileError
from dpp.solvers.cache import enable_persistent_cache


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "model", type=Path,
        help="a model file: written by clf.save(...) or a run's models/<method>.npz",
    )  # fmt: skip
    parser.add_argument(
        "sets", type=Path,
        help="the sets to predict: a sets file (.npz, CSV or Parquet), labelled or not",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("predictions.csv"),
        help="the predictions CSV, one row per set (default: %(default)s); the per-vector "
        "scores go beside it as <out>_vectors.csv",
    )  # fmt: skip
    parser.add_argument(
        "--set-column", default="set_id",
        help="CSV/Parquet sets: the column of set ids (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--label-column", default="label",
        help="CSV/Parquet sets: the column of labels, if any (default: %(default)s); with "
        "labels the accuracy is printed",
    )  # fmt: skip
    parser.add_argument(
        "--features", default=None,
        help="CSV/Parquet sets: comma-separated feature columns (default: every other column)",
    )  # fmt: skip
    parser.add_argument("--no-vectors", action="store_true", help="write no per-vector scores file")
    parser.add_argument(
        "--no-compilation-cache", action="store_true",
        help="do not use JAX's persistent compilation cache (.cache/jax or $DPP_CACHE_DIR/jax)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.no_compilation_cache:
        enable_persistent_cache(default_cache_dir() / "jax")
    features = args.features.split(",") if args.features else None
    try:
        clf = load(args.model)
        data = read_sets(args.sets, args.set_column, args.label_column, features)
        proba = clf.predict_proba((data.vectors, data.set_index))
    except (FileNotFoundError, ModelFileError, DataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    classes = np.asarray(clf.classes_)
    table = pd.DataFrame({"set_id": data.set_ids, "predicted": classes[np.argmax(proba, axis=1)]})
    for c, column in zip(classes, proba.T, strict=True):
        table[f"p_{c}"] = column
    if data.labels is not None:
        table["label"] = data.labels
        accuracy = np.mean(table["predicted"].astype(str) == table["label"].astype(str))
        print(f"accuracy {100 * accuracy:.2f}% on {len(table)} labelled sets")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    print(f"predictions for {len(table)} sets written to {args.out}")
    if not args.no_vectors:
        path = args.out.with_name(f"{args.out.stem}_vectors.csv")
        write_vector_scores(clf, data, classes, path)
    return 0


def write_vector_scores(clf, data, classes, path: Path) -> None:
    """Writes every vector's ``instance_scores`` row to ``path`` (one line said either way)."""
    if not hasattr(clf, "instance_scores"):
        print(f"{type(clf).__name__} gives no per-vector scores: {path.name} not written")
        return
    try:
        scores = np.concatenate(clf.instance_scores((data.vectors, data.set_index)))
    except NotImplementedError as err:  # an ensemble of probabilities: no decomposition
        print(f"{path.name} not written: {err}")
        return
    sizes = np.bincount(data.set_index, minlength=len(data.set_ids))
    table = pd.DataFrame(
        {
            "set_id": data.set_ids[data.set_index],
            "vector": np.arange(len(data.set_index)) - np.repeat(np.cumsum(sizes) - sizes, sizes),
        }
    )
    for c, column in zip(classes, scores.T, strict=True):
        table[f"score_{c}"] = column
    table.to_csv(path, index=False)
    intercept = ", ".join(f"{c}: {v:.4g}" for c, v in zip(classes, clf.intercept_, strict=True))
    print(f"per-vector scores of {len(table)} vectors written to {path} (intercept {intercept})")


if __name__ == "__main__":
    sys.exit(main())
