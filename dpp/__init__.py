"""dpp: Discriminative Probabilistic Prototype learning (Bonilla & Robles-Kelly, ICML 2012).

Sets of feature vectors are softly assigned to K learned prototypes (eq. 3), pooled into a
representation on the simplex (eq. 2) and classified by a softmax (eq. 16); prototypes, the
inverse temperature and the classifier are learned together by maximising the log-likelihood with
soft labels (eqs. 5, 6, 17) by coordinate ascent from k-means.

Start with :class:`DPPClassifier` (scikit-learn API over lists of ``[M_n, D]`` arrays) and
:func:`load`; the functions below are the method's equations.

``import dpp`` is lazy: a public name or a submodule (``dpp.encoding``, ``dpp.experiment``) is
imported the first time it is used, so importing the package loads neither Hydra, matplotlib,
pandas nor the Hydra config store. The layers, each importing only those below it (an
import-linter contract in ``pyproject.toml``, checked by CI):

* :mod:`dpp.experiment`: the experiment layer (Hydra runner, protocol, outputs, sweeps, tracking);
* :mod:`dpp.estimators`: the scikit-learn estimators and the model file's loader;
* :mod:`dpp.baselines`, :mod:`dpp.datasets` and :mod:`dpp.networks` (the models that learn
  their representation);
* :mod:`dpp.model` (the fit and its report) and :mod:`dpp.solvers`;
* the numerics: sets, padding, units, encoding, pooling, classifier, likelihood, gradients,
  init, hyper, sharding, selection, metrics, params, model_file, errors.
"""

from __future__ import annotations

import importlib as _importlib
import importlib.util as _util

#: Every public name of ``import dpp`` and the module that defines it.
_PUBLIC = {
    "log_predictive": "dpp.likelihood",
    "predict_proba": "dpp.likelihood",
    "encode_hard": "dpp.encoding",
    "encode_soft": "dpp.encoding",
    "hard_assignment": "dpp.encoding",
    "pool": "dpp.encoding",
    "soft_assignment": "dpp.encoding",
    "ConfigError": "dpp.errors",
    "DataError": "dpp.errors",
    "FitWarning": "dpp.errors",
    "ModelFileError": "dpp.errors",
    "NonFiniteResultError": "dpp.errors",
    "AttentionMILClassifier": "dpp.estimators",
    "BagOfWordsClassifier": "dpp.estimators",
    "ClassPriorClassifier": "dpp.estimators",
    "DeepSetsClassifier": "dpp.estimators",
    "DPPClassifier": "dpp.estimators",
    "EmbeddedDPPClassifier": "dpp.estimators",
    "DPPClassifierCV": "dpp.estimators",
    "InfoLossClassifier": "dpp.estimators",
    "PoolingClassifier": "dpp.estimators",
    "SetEnsembleClassifier": "dpp.estimators",
    "StandardPrototypeClassifier": "dpp.estimators",
    "BetaPrior": "dpp.likelihood",
    "Params": "dpp.likelihood",
    "mean_log_likelihood": "dpp.likelihood",
    "objective": "dpp.likelihood",
    "set_log_likelihood": "dpp.likelihood",
    "FitReport": "dpp.model",
    "FittedModel": "dpp.model",
    "fit_dpp": "dpp.model",
    "load": "dpp.estimators.io",
    "RaggedSets": "dpp.sets",
    "one_hot": "dpp.sets",
    "use_compilation_cache": "dpp.solvers.cache",
}

#: Modules of an optional extra, loaded where they are used: ``experiment.optuna_sweeper`` (the
#: ``sweep`` extra's Optuna; Hydra's sweeper plugin imports it).
OPTIONAL_MODULES = ("experiment.optuna_sweeper",)


_CACHE_READ = []  # whether $DPP_COMPILATION_CACHE was read in this process


def __getattr__(name: str):
    if name in _PUBLIC:
        if not _CACHE_READ:  # the first name used from dpp: the persistent cache, on by default
            _CACHE_READ.append(True)
            _importlib.import_module("dpp.solvers.cache").cache_from_environment()
        value = getattr(_importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")  # a submodule, on first use


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = sorted(_PUBLIC)
