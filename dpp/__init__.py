"""dpp: Discriminative Probabilistic Prototype learning (Bonilla & Robles-Kelly, ICML 2012).

Sets of feature vectors are softly assigned to K learned prototypes (eq. 3), pooled into a
representation on the simplex (eq. 2) and classified by a softmax (eq. 16); prototypes, the
inverse temperature and the classifier are learned together by maximising the log-likelihood with
soft labels (eqs. 5, 6, 17) by coordinate ascent from k-means.

Start with :class:`DPPClassifier` (scikit-learn API over lists of ``[M_n, D]`` arrays) and
:func:`load`; the functions below are the method's equations.
"""

import importlib as _importlib

from dpp.classifier import log_predictive, predict_proba
from dpp.encoding import encode_hard, encode_soft, hard_assignment, pool, soft_assignment
from dpp.errors import ConfigError, DataError, FitWarning, ModelFileError, NonFiniteResultError
from dpp.estimators import (
    AttentionMILClassifier,
    BagOfWordsClassifier,
    ClassPriorClassifier,
    DeepSetsClassifier,
    DPPClassifier,
    DPPClassifierCV,
    InfoLossClassifier,
    PoolingClassifier,
    StandardPrototypeClassifier,
)
from dpp.likelihood import BetaPrior, Params, mean_log_likelihood, objective, set_log_likelihood
from dpp.model import FittedModel, fit_dpp
from dpp.persist import load
from dpp.sets import RaggedSets, one_hot

#: Every module the README names, an attribute of the package after ``import dpp``, except
#: :data:`OPTIONAL_MODULES`.
MODULES = (
    "baselines", "baselines.pooling", "classifier", "compilation", "config_check",
    "config_store", "datasets",
    "datasets.adult", "datasets.generated", "datasets.indian_pines", "datasets.mpeg7",
    "datasets.sets_file", "datasets.suite", "datasets.synthetic", "discovery", "encoding",
    "errors", "estimators",
    "experiment", "experiment_settings", "gradients", "hyper", "init", "likelihood", "metrics",
    "model", "normalize", "params", "persist", "plots", "protocol", "reporting", "run_folder",
    "units", "model_file", "estimators.base", "estimators.dpp", "estimators.baselines",
    "estimators.cv", "estimators.io", "estimators.pooled", "estimators.neural",
    "baselines.neural", "pooling",
    "selection", "sets", "sharding", "solvers", "splits", "suite", "sweep", "tables", "tracking",
)  # fmt: skip
#: Modules of an optional extra, loaded where they are used: ``optuna_sweeper`` (the ``sweep``
#: extra's Optuna; Hydra's sweeper plugin imports it).
OPTIONAL_MODULES = ("optuna_sweeper",)
for _name in MODULES:
    _importlib.import_module(f"{__name__}.{_name}")

__all__ = [
    "AttentionMILClassifier",
    "BagOfWordsClassifier",
    "BetaPrior",
    "ClassPriorClassifier",
    "DPPClassifier",
    "DPPClassifierCV",
    "DeepSetsClassifier",
    "ConfigError",
    "DataError",
    "FitWarning",
    "ModelFileError",
    "NonFiniteResultError",
    "PoolingClassifier",
    "InfoLossClassifier",
    "StandardPrototypeClassifier",
    "FittedModel",
    "Params",
    "RaggedSets",
    "encode_hard",
    "encode_soft",
    "fit_dpp",
    "hard_assignment",
    "load",
    "log_predictive",
    "mean_log_likelihood",
    "objective",
    "one_hot",
    "pool",
    "predict_proba",
    "set_log_likelihood",
    "soft_assignment",
]
