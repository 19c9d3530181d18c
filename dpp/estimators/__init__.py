r"""scikit-learn estimators over sets: DPP, the standard prototype, InfoLoss and the class prior.

Every estimator takes ``X`` as

* a list of ``[M_n, D]`` arrays, one per set (the convention of the multiple-instance libraries;
  what ``GridSearchCV`` and ``cross_val_score`` index);
* a :class:`~dpp.sets.RaggedSets` (its labels and weights are used when ``y`` is ``None``);
* a ``(vectors, set_ids)`` pair: ``[T, D]`` vectors and ``[T]`` integer set ids, in any order;
  set ``n`` is the one with the ``n``-th smallest id.

and ``y`` as ``[N]`` class labels of any type (``classes_`` holds them sorted, as in
scikit-learn) or ``[N, C]`` soft labels (rows on the simplex; ``classes_ = arange(C)``).

A fitted estimator predicts with eq. (16) on the set representation ``z`` of eq. (2):
``predict_proba`` gives ``[N, C]`` class probabilities, ``transform`` the ``[N, K]`` codes ``z``
(a learned soft bag-of-words for any downstream model). Preprocessing (``standardize``,
``pca_components``) is fitted on the training vectors and applied inside, so new raw sets need
nothing done to them. The constructor defaults are the defaults of the command line as well
(:mod:`dpp.experiment.config_store` builds the Hydra ``model`` and ``optimizer`` groups from them).

``clf.save(path)`` writes a fitted estimator to one ``.npz`` file; :func:`dpp.load` reads it
back.

The package: :mod:`~dpp.estimators.base` (inputs and the prototype base class),
:mod:`~dpp.estimators.dpp`, :mod:`~dpp.estimators.embedded` (DPP on a learned embedding),
:mod:`~dpp.estimators.baselines` (standard prototype, InfoLoss,
class prior), :mod:`~dpp.estimators.pooled` (the pooled and bag-of-words logistic
regressions), :mod:`~dpp.estimators.cv` (``DPPClassifierCV``), :mod:`~dpp.estimators.ensemble`
(``SetEnsembleClassifier``: members' predictions combined) and :mod:`~dpp.estimators.io`
(``load`` and every estimator by method name).
"""

import importlib as _importlib
import importlib.util as _util

from dpp.estimators.base import EXPERIMENT_PARAMS, SCORINGS, PrototypeClassifier
from dpp.estimators.baselines import (
    ClassPriorClassifier,
    InfoLossClassifier,
    StandardPrototypeClassifier,
)
from dpp.estimators.cv import RAW_VECTORS, DPPClassifierCV
from dpp.estimators.dpp import DPPClassifier
from dpp.estimators.embedded import EmbeddedDPPClassifier
from dpp.estimators.ensemble import SetEnsembleClassifier
from dpp.estimators.inputs import as_sets, labelled_sets, prediction_sets
from dpp.estimators.io import ESTIMATORS, NEURAL_ESTIMATORS, POOLED_ESTIMATORS, load
from dpp.estimators.neural import AttentionMILClassifier, DeepSetsClassifier
from dpp.estimators.pooled import BagOfWordsClassifier, PoolingClassifier

__all__ = [
    "EXPERIMENT_PARAMS",
    "ESTIMATORS",
    "POOLED_ESTIMATORS",
    "NEURAL_ESTIMATORS",
    "RAW_VECTORS",
    "AttentionMILClassifier",
    "DeepSetsClassifier",
    "BagOfWordsClassifier",
    "PoolingClassifier",
    "SCORINGS",
    "ClassPriorClassifier",
    "DPPClassifier",
    "DPPClassifierCV",
    "EmbeddedDPPClassifier",
    "InfoLossClassifier",
    "PrototypeClassifier",
    "SetEnsembleClassifier",
    "StandardPrototypeClassifier",
    "as_sets",
    "labelled_sets",
    "load",
    "prediction_sets",
]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.estimators.<module>``)
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
