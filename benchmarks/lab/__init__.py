"""A suite of set tasks nobody here tuned for, every method on each, one table.

Each task (:data:`TASKS`, :mod:`dpp.datasets.suite`) is cut into stratified outer folds; in
every fold each method (:data:`METHODS`, a registry of factories) is fitted on the other folds
with its default selection and scored on the held-out one
(the methods are listed in :mod:`~lab.methods`).

InfoLoss is left out (its fits cost 10-100x a standard prototype's and it needs a beta scale
tuned per task). :func:`run_suite` runs it into a folder (``suite.json``, ``suite.csv``,
``suite.md``, ``suite.png``), from ``python benchmarks/suite.py``. Beside the package, not
installed: the scripts in ``benchmarks/`` import it as ``lab``.

The package's modules: :mod:`~lab.tasks` (the tasks, their draws and outer
folds), :mod:`~lab.methods` (the methods by name, what each fit chose),
:mod:`~lab.statistics` (paired differences, the default's rule, instance
evidence), :mod:`~lab.report` (tables and figures) and
:mod:`~lab.runner` (the run); their public names are imported here.
"""

from lab.methods import (
    BASELINES,
    DEFAULT,
    EMBEDDED_K,
    EMBEDDING,
    L2S,
    METHODS,
    NETWORK_GRID,
    QUICK_METHODS,
    SelectedNetwork,
    add_variant,
    make_method,
    selection_record,
)
from lab.report import (
    MAX_DRAWN,
    compare_table,
    decision_table,
    evidence_figure,
    instance_table,
    members_table,
    peer_table,
    rounds_table,
    selection_note,
    suite_figure,
    summary_table,
)
from lab.runner import check_suite, run_suite, run_task
from lab.statistics import (
    ALPHA,
    decide,
    example_evidence,
    instance_metrics,
    paired_differences,
)
from lab.tasks import (
    CORE_TASKS,
    DRAW_STRIDE,
    GENERATED_TASKS,
    MIL_SETS,
    QUICK_TASKS,
    REAL_TASKS,
    TASKS,
    cut_training,
    load_mil,
    membership_rows,
    mil_csv,
    outer_folds,
    unit_of,
)

__all__ = [
    "ALPHA",
    "BASELINES",
    "DEFAULT",
    "CORE_TASKS",
    "DRAW_STRIDE",
    "GENERATED_TASKS",
    "MIL_SETS",
    "REAL_TASKS",
    "EMBEDDED_K",
    "EMBEDDING",
    "L2S",
    "MAX_DRAWN",
    "METHODS",
    "add_variant",
    "NETWORK_GRID",
    "QUICK_METHODS",
    "QUICK_TASKS",
    "TASKS",
    "SelectedNetwork",
    "check_suite",
    "compare_table",
    "cut_training",
    "decide",
    "decision_table",
    "evidence_figure",
    "example_evidence",
    "instance_metrics",
    "instance_table",
    "load_mil",
    "make_method",
    "members_table",
    "mil_csv",
    "membership_rows",
    "outer_folds",
    "paired_differences",
    "peer_table",
    "rounds_table",
    "run_suite",
    "run_task",
    "selection_note",
    "selection_record",
    "suite_figure",
    "summary_table",
    "unit_of",
]
