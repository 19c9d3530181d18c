"""dpp: Discriminative Probabilistic Prototype learning (Bonilla & Robles-Kelly, ICML 2012).

Sets of feature vectors are softly assigned to K learned prototypes (eq. 3), pooled into a
representation on the simplex (eq. 2) and classified by a softmax (eq. 16); prototypes, the
inverse temperature and the classifier are learned together by maximising the log-likelihood with
soft labels (eqs. 5, 6, 17) by coordinate ascent from k-means.

Start with :class:`DPPClassifier` (scikit-learn API over lists of ``[M_n, D]`` arrays) and
:func:`load`; the functions below are the method's equations.
"""

from dpp.classifier import log_predictive, predict_proba
from dpp.encoding import encode_hard, encode_soft, hard_assignment, pool, soft_assignment
from dpp.errors import ConfigError, DataError, FitWarning, ModelFileError, NonFiniteResultError
from dpp.estimators import (
    ClassPriorClassifier,
    DPPClassifier,
    DPPClassifierCV,
    InfoLossClassifier,
    StandardPrototypeClassifier,
)
from dpp.likelihood import BetaPrior, Params, mean_log_likelihood, objective, set_log_likelihood
from dpp.model import FittedModel, fit_dpp
from dpp.persist import load
from dpp.sets import RaggedSets, one_hot

__all__ = [
    "BetaPrior",
    "ClassPriorClassifier",
    "DPPClassifier",
    "DPPClassifierCV",
    "ConfigError",
    "DataError",
    "FitWarning",
    "ModelFileError",
    "NonFiniteResultError",
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
