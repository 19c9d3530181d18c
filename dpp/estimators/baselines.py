"""The paper's baselines as estimators: the standard prototype, InfoLoss and the class prior."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from dpp import params as check
from dpp.baselines.class_prior import fit_class_prior
from dpp.baselines.infoloss import InfoLossSettings, fit_infoloss
from dpp.baselines.standard import fit_standard, hard_code_model
from dpp.estimators.base import PrototypeClassifier
from dpp.init import KMEANS_MAX_ITER, KMEANS_N_INIT, KMEANS_SOLVER
from dpp.model import FittedModel
from dpp.sets import RaggedSets
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import FitSettings

_FIT = FitSettings()
_INFOLOSS = InfoLossSettings()


class StandardPrototypeClassifier(PrototypeClassifier):
    """The standard prototype baseline (section 4.2): k-means centres, hard codes (eq. 1).

    Sets are bag-of-words histograms of their vectors' nearest centres (eqs. 1, 2), classified
    by the same softmax (eq. 16) and Theta-step as DPP. Parameters as :class:`DPPClassifier`
    (``optimizer`` sets the Theta-step's L-BFGS; ``warm_start`` reuses the previous fit's
    centres instead of running k-means again).
    """

    method = "standard"
    fold_fits = "theta_paths"

    def __init__(
        self,
        n_prototypes: int = 10,
        l2: float = _FIT.l2,
        *,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess=None,
        init="k-means",
        warm_start: bool = False,
        optimizer: str = solver_options.DEFAULT_OPTIMIZER,
        optimizer_options: dict | None = None,
        kmeans_n_init: int = KMEANS_N_INIT,
        kmeans_max_iter: int = KMEANS_MAX_ITER,
        kmeans_solver: str = KMEANS_SOLVER,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        self.n_prototypes = n_prototypes
        self.l2 = l2
        self.standardize = standardize
        self.pca_components = pca_components
        self.preprocess = preprocess
        self.init = init
        self.warm_start = warm_start
        self.optimizer = optimizer
        self.optimizer_options = optimizer_options
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_max_iter = kmeans_max_iter
        self.kmeans_solver = kmeans_solver
        self.random_state = random_state
        self.verbose = verbose

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        centres = self.initial_centres(sets, seed)
        solver = solver_options.theta_solver(self.optimizer, self.optimizer_options)
        return fit_standard(sets, centres, float(self.l2), solver)

    def fold_codes(self, part: RaggedSets, sets: RaggedSets) -> np.ndarray:
        """``[N, K]`` codes of every set of ``sets`` by the encoder that ``fit(part)`` builds.

        The encoder (preprocessing, centres, internal units) does not depend on ``l2``, so the
        fits of a cross-validation fold differ only in their Theta-step:
        :class:`~dpp.estimators.DPPClassifierCV` encodes each fold once and fits every fold's
        ``l2`` path as one program (:func:`dpp.solvers.coordinate_ascent.fit_classifier_paths`).

        Args:
            part: the labelled sets a fit would train on (the fold's training part).
            sets: the sets to encode, in the units of ``part`` (e.g. all of a search's sets).

        Returns:
            ``[N, K]`` eq. (1), (2) histograms of nearest centres, float32.

        Raises:
            ValueError: the errors of :meth:`fit` for bad parameters, centres or dimensions.
        """
        self.check_params()
        self.preprocess_ = self._fit_preprocess(part)
        fitted = self._preprocessed(part)
        model = hard_code_model(fitted, self.initial_centres(fitted, self._seed()), self.method)
        return np.asarray(model.encode(self._preprocessed(sets)))


class InfoLossClassifier(PrototypeClassifier):
    """InfoLoss (Lazebnik & Raginsky 2009): centres that minimise the information loss.

    Centres are learned from k-means by minimising the soft-Voronoi information loss plus
    ``gamma`` times the distortion, then sets are coded by hard assignment (eq. 1) and classified
    by the same softmax as DPP.

    Args:
        beta_scale: soft-Voronoi ``beta`` relative to 1 / median squared distance.
        gamma_scale: distortion weight ``gamma`` relative to ``beta``.
        max_rounds: alternations of the pi-update and the centre step.
        tol: stop when a round lowers the objective by less than ``tol`` relatively.
        centre_max_iter: L-BFGS iterations of each centre step.

    The other parameters are those of :class:`DPPClassifier`.
    """

    method = "infoloss"

    def __init__(
        self,
        n_prototypes: int = 10,
        l2: float = _FIT.l2,
        beta_scale: float = _INFOLOSS.beta_scale,
        gamma_scale: float = _INFOLOSS.gamma_scale,
        max_rounds: int = _INFOLOSS.max_rounds,
        tol: float = _INFOLOSS.tol,
        centre_max_iter: int = _INFOLOSS.centre_solver.max_iter,
        *,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess=None,
        init="k-means",
        warm_start: bool = False,
        optimizer: str = solver_options.DEFAULT_OPTIMIZER,
        optimizer_options: dict | None = None,
        kmeans_n_init: int = KMEANS_N_INIT,
        kmeans_max_iter: int = KMEANS_MAX_ITER,
        kmeans_solver: str = KMEANS_SOLVER,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        self.n_prototypes = n_prototypes
        self.l2 = l2
        self.beta_scale = beta_scale
        self.gamma_scale = gamma_scale
        self.max_rounds = max_rounds
        self.tol = tol
        self.centre_max_iter = centre_max_iter
        self.standardize = standardize
        self.pca_components = pca_components
        self.preprocess = preprocess
        self.init = init
        self.warm_start = warm_start
        self.optimizer = optimizer
        self.optimizer_options = optimizer_options
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_max_iter = kmeans_max_iter
        self.kmeans_solver = kmeans_solver
        self.random_state = random_state
        self.verbose = verbose

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **PrototypeClassifier.PARAMETER_RULES,
        "beta_scale": check.Real(low=0, low_open=True),
        "gamma_scale": check.Real(low=0),
        "max_rounds": check.Int(0),
        "tol": check.Real(low=0),
        "centre_max_iter": check.Int(1),
    }

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        centres = self.initial_centres(sets, seed)
        theta_solver = solver_options.theta_solver(self.optimizer, self.optimizer_options)
        settings = InfoLossSettings(
            beta_scale=float(self.beta_scale),
            gamma_scale=float(self.gamma_scale),
            max_rounds=int(self.max_rounds),
            tol=float(self.tol),
            centre_solver=dataclasses.replace(theta_solver, max_iter=int(self.centre_max_iter)),
        )
        return fit_infoloss(sets, centres, float(self.l2), theta_solver, settings)


class ClassPriorClassifier(PrototypeClassifier):
    """The class-prior baseline: every set gets the weighted training proportions of the classes.

    Tells how much of a score the encoding actually earns: scikit-learn's
    ``DummyClassifier(strategy="prior")`` for sets, with soft labels and set weights. A closed
    form: nothing is preprocessed, drawn or iterated, so it takes none of the prototype
    estimators' shared parameters (``standardize``, ``init``, ``random_state``, ...).

    Args:
        n_prototypes: rows of its prototypes and ``Theta`` (the mean training vector, repeated;
            the predictions do not depend on it). With ``l2``, what
            :class:`~dpp.DPPClassifierCV` and the experiments set on every prototype method.
        l2: accepted and unused (the prior has no weights to shrink).
    """

    method = "class_prior"
    uses_centres = False
    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        "n_prototypes": check.Int(1),
        "l2": check.Real(low=0),
    }

    def __init__(self, n_prototypes: int = 1, l2: float = 0.0):
        self.n_prototypes = n_prototypes
        self.l2 = l2

    def check_params(self) -> None:
        """Checks ``n_prototypes`` and ``l2``.

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        check.check_table(self, self.PARAMETER_RULES)

    def _fit_preprocess(self, sets: RaggedSets) -> None:
        del sets  # the prior does not depend on the vectors: nothing to preprocess
        return None

    def _seed(self) -> int:
        return 0  # nothing is drawn

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        del seed
        centre = np.asarray(sets.vectors, np.float64).mean(axis=0, keepdims=True)
        return fit_class_prior(sets, np.repeat(centre, self.n_prototypes, axis=0))
