"""The DPP estimator (Bonilla & Robles-Kelly 2012): soft assignment, pooling, softmax, learned."""

from __future__ import annotations

from typing import ClassVar

import jax
import numpy as np

from dpp import params as check
from dpp.estimators.base import PrototypeClassifier
from dpp.init import KMEANS_MAX_ITER, KMEANS_N_INIT, KMEANS_SOLVER
from dpp.likelihood import BetaPrior
from dpp.model import FittedModel, fit_dpp
from dpp.model.fit import FIT_RULES
from dpp.pooling import POOLINGS
from dpp.sets import RaggedSets
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import FitSettings

_FIT = FitSettings()


class DPPClassifier(PrototypeClassifier):
    r"""Discriminative probabilistic prototypes (Bonilla & Robles-Kelly 2012).

    Vectors are softly assigned to ``K`` prototypes ``mu`` with inverse temperature ``beta``
    (eq. 3), a set's representation ``z`` is the mean of its assignments (eq. 2), and a softmax
    classifier ``Theta`` (eq. 16) predicts its class. ``mu``, ``beta`` and ``Theta`` maximise the
    (weighted, possibly soft-label) log-likelihood of eqs. (5, 6, 17) minus
    ``l2 * tr(Theta^T Theta)``, by coordinate ascent (section 4) from k-means centres; the
    fit's status tells the truth (:func:`dpp.model.fit_status`).

    Args:
        n_prototypes: ``K``.
        l2: ridge ``lambda`` on ``Theta`` (on the summed log-likelihood; >= 0).
        mode: ``coordinate_ascent`` (section 4) or ``joint`` (rounds of one solver run over
            all parameters).
        max_rounds: coordinate-ascent rounds at most.
        tol: stop when a round raises ``L`` by less than ``tol * |L|``.
        beta_step_limit: a (mu, beta)-step changes ``beta`` by at most this factor (> 1).
        validation_fraction: early stopping: this fraction of the training sets is held out
            (stratified), the fit stops once ``patience`` rounds have not raised their
            log-likelihood, and the model is refitted on all training sets for the best number
            of rounds (status ``early_stopped``). Where that would hold out fewer than 10 sets
            (fewer than 46 training sets at 0.2), every set is held out once instead, in
            ``round(1 / validation_fraction)`` stratified folds, and the best round of their
            pooled validation curve caps the refit (``fit_report_.early_stopping.source``
            ``cross_validation``; :func:`dpp.selection.round_folds`); under 10 sets in all it
            is skipped (stopping by ``tol`` or ``max_rounds``). 0 turns it off. The default 0.2
            keeps a plain fit out of saturated codes on data nobody tuned for, where rounds
            run to ``tol`` overfit (the measurement: docs/defaults.md and the benchmark page's
            "a plain fit on small data").
        patience: early stopping: rounds without a better validation log-likelihood.
        beta_scale: ``beta_0 = beta_scale / median squared distance to the nearest centre``.
        per_prototype_beta: one ``beta`` per prototype instead of one shared.
        pooling: how a set's codes become its representation ``z`` (:mod:`dpp.pooling`):
            ``mean`` (eq. 2, the paper's, the default), ``max`` (per prototype, the largest
            code over the set's vectors: whether a set holds one vector near a prototype, the
            multiple-instance assumption) or ``gem`` (a generalised mean whose exponent
            ``p = 1 + softplus(rho)`` in ``[1, 64]`` is learned with the prototypes from
            ``p = 3``; mean and max are its limits). ``DPPClassifierCV`` can choose it.
        beta_prior: prior on ``log beta``: ``none``, ``lognormal`` (Gaussian on ``log beta``
            with mean ``beta_prior_loc`` and s.d. ``beta_prior_scale``) or ``gamma`` (shape
            ``beta_prior_loc``, rate ``beta_prior_scale``), in the units of the preprocessed
            features.
        beta_prior_loc: first parameter of the prior.
        beta_prior_scale: second parameter of the prior (> 0).
        devices: devices the fit runs on, a positive number or ``"all"`` (:mod:`dpp.sharding`:
            whole sets per device, the likelihood's sums reduced across devices; full-batch
            optimizers only). Same fit as one device up to float rounding.
        round_cap: a number of coordinate-ascent rounds chosen on held-out sets (what
            :class:`DPPClassifierCV` chooses with ``select_rounds`` and puts in its
            ``best_params_``): at most this many rounds, and a fit that stops there is
            ``early_stopped`` (``fit_report_.early_stopping.source`` ``round_cap``), not
            ``max_rounds``. ``None`` (the default): the rounds end by ``tol``, ``max_rounds``
            or early stopping. Needs ``validation_fraction=0`` (the rounds are chosen already)
            and at most ``max_rounds``.
        mu_prior_scale: ``None`` (the paper's model, the default) or ``s > 0``: a Gaussian prior
            on the prototypes around their k-means start, of standard deviation ``s`` per
            coordinate in units of the data's spread (the fit's internal units: the training
            vectors scaled to unit root mean square deviation), maximised with the likelihood
            (:func:`~dpp.solvers.coordinate_ascent.prototype_log_prior`). Small ``s`` keeps the
            prototypes near k-means, where a small training set's whole solve would overfit.

    The other parameters are the prototype estimators' shared block
    (:data:`dpp.estimators.base.SHARED_PARAMETERS`), keyword-only.

    Other Parameters:
        standardize: scale every feature to zero mean and unit variance (fitted on the
            training vectors; the default, since features of real data rarely share a scale;
            the experiments preprocess by their dataset config instead).
        pca_components: project on this many principal components (after standardising).
        preprocess: a prefit :class:`~dpp.units.Affine` used instead of fitting
            ``standardize`` and ``pca_components`` on the training vectors (which must then
            describe it: the experiments fit one map per trial and hand it over where the
            dataset chooses the vectors it is fitted on); ``None``: fit them. A saved model keeps
            the map and loads with ``preprocess=None``.
        init: ``"k-means"`` or ``[K, D']`` initial centres (units after preprocessing).
        warm_start: start from the previous fit's ``mu``, ``beta`` and ``Theta`` when the
            shapes agree (for a path of ``l2`` on the same sets).
        optimizer: a name of :data:`dpp.solvers.options.OPTIMIZERS`.
        optimizer_options: overrides of that optimizer's default options (dict).
        kmeans_n_init: k-means restarts.
        kmeans_max_iter: Lloyd iterations per restart.
        kmeans_solver: which k-means starts the prototypes: ``auto`` (the default: JAX's on
            the device for large problems, scikit-learn's otherwise), ``scikit-learn`` or ``jax``
            (:data:`dpp.init.KMEANS_SOLVERS`).
        random_state: seed of k-means, of the early-stopping split and of mini-batch order
            (``None``: a fresh one).
        verbose: log ``L`` and ``beta`` after every round.

    Raises (from ``fit``):
        ValueError: bad parameters or inputs, naming which.
        NonFiniteResultError: non-finite parameters after the fit.
    """

    method = "dpp"
    fold_fits = "rounds"

    def __init__(
        self,
        n_prototypes: int = 10,
        l2: float = _FIT.l2,
        mode: str = "coordinate_ascent",
        max_rounds: int = _FIT.max_rounds,
        tol: float = _FIT.tol,
        beta_step_limit: float = _FIT.beta_step_limit,
        validation_fraction: float = 0.2,
        patience: int = _FIT.patience,
        beta_scale: float = 1.0,
        per_prototype_beta: bool = False,
        pooling: str = "mean",
        beta_prior: str = _FIT.prior.kind,
        beta_prior_loc: float = _FIT.prior.loc,
        beta_prior_scale: float = _FIT.prior.scale,
        devices: int | str = 1,
        round_cap: int | None = None,
        mu_prior_scale: float | None = None,
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
        self.mode = mode
        self.max_rounds = max_rounds
        self.tol = tol
        self.beta_step_limit = beta_step_limit
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.beta_scale = beta_scale
        self.per_prototype_beta = per_prototype_beta
        self.pooling = pooling
        self.beta_prior = beta_prior
        self.beta_prior_loc = beta_prior_loc
        self.beta_prior_scale = beta_prior_scale
        self.devices = devices
        self.round_cap = round_cap
        self.mu_prior_scale = mu_prior_scale
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
        "devices": check.Literal("all", check.Int(1)),
        **FitSettings.RULES,
        **FIT_RULES,
        "beta_scale": check.Real(low=0, low_open=True),
        "per_prototype_beta": check.Bool(),
        "pooling": check.Choice(POOLINGS),
        "beta_prior": check.Choice(("none", "lognormal", "gamma")),
        "beta_prior_loc": check.Real(),
        "beta_prior_scale": check.Real(low=0, low_open=True),
        "round_cap": check.Optional(check.Int(0)),
    }

    def check_params(self) -> None:
        """Checks every parameter (raises ``ValueError`` naming the first bad one)."""
        super().check_params()
        self._prior()
        if self.round_cap is not None:
            if float(self.validation_fraction) > 0:
                raise ValueError(
                    f"round_cap={self.round_cap} fixes the number of rounds, which early "
                    f"stopping (validation_fraction={self.validation_fraction}) would choose: "
                    "set validation_fraction=0"
                )
            if int(self.round_cap) > int(self.max_rounds):
                raise ValueError(
                    f"round_cap={self.round_cap} must be at most max_rounds={self.max_rounds}"
                )

    def _prior(self) -> BetaPrior:
        try:
            return BetaPrior(
                self.beta_prior, float(self.beta_prior_loc), float(self.beta_prior_scale)
            )
        except ValueError as err:
            raise ValueError(f"beta_prior: {err}") from None

    def fit_settings(self) -> FitSettings:
        """The :class:`~dpp.solvers.coordinate_ascent.FitSettings` these parameters give."""
        return FitSettings(
            l2=float(self.l2),
            prior=self._prior(),
            mu_prior_scale=None if self.mu_prior_scale is None else float(self.mu_prior_scale),
            max_rounds=int(self.max_rounds),
            tol=float(self.tol),
            beta_step_limit=float(self.beta_step_limit),
            patience=int(self.patience),
            theta_solver=solver_options.theta_solver(self.optimizer, self.optimizer_options),
            prototype_solver=solver_options.prototype_solver(
                self.optimizer, self.optimizer_options
            ),
            verbose=bool(self.verbose),
        )

    def fit_fold(self, sets: RaggedSets, validation_sets=None, layout=None, any_pooling=False):
        """Fits on labelled ``sets`` as a selection fits a candidate on one of its folds.

        :meth:`PrototypeClassifier.fit` (``fit(X, y, sample_weight)``) with what a
        :class:`DPPClassifierCV` gives every fit of its search, none of which changes the fit
        but ``validation_sets``:

        Args:
            sets: labelled training sets (:class:`~dpp.sets.RaggedSets`).
            validation_sets: early stopping on given held-out sets, e.g. the fold's held-out
                part: a labelled :class:`~dpp.sets.RaggedSets` in the raw feature units, its
                ``[M, C]`` label rows in the columns of ``classes_`` (what a ``subset`` of the
                labelled training sets gives). Their weighted log-likelihood per set is
                recorded after every round (``fit_report_.early_stopping``), the fit stops once
                ``patience`` rounds have not raised it, and the best round's parameters are
                kept. Not with ``validation_fraction > 0`` or ``round_cap``.
            layout: a :class:`~dpp.sets.Layout` the padded sets are at least as large as
                (:meth:`~dpp.sets.Layout.covering` of every set that several fits hold), so
                that the folds and the refit run one compiled program: shapes only.
            any_pooling: compile the fit as one program for every pooling, the kind as data
                (:class:`dpp.pooling.PoolingChoice`), when the search selects among poolings:
                the same fit as without it, to the bit.

        Returns:
            ``self``.

        Raises:
            ValueError: as :meth:`PrototypeClassifier.fit`; ``validation_sets`` that are not
                labelled ``RaggedSets`` of the training sets' ``D`` and ``C``, or given with
                early stopping or a ``round_cap``.
        """
        if validation_sets is not None and not isinstance(validation_sets, RaggedSets):
            raise ValueError(
                "validation_sets must be a labelled RaggedSets (e.g. sets.subset(indices)), got "
                f"{type(validation_sets).__name__}"
            )
        return self._fit(
            sets,
            None,
            None,
            validation_sets=validation_sets,
            layout=layout,
            any_pooling=any_pooling,
        )

    def _fit_model(
        self,
        sets: RaggedSets,
        seed: int,
        validation_sets=None,
        layout=None,
        any_pooling=False,
    ) -> FittedModel:
        start = self._warm_model(sets)
        if start is not None and (
            np.ndim(start.log_beta) != int(bool(self.per_prototype_beta))
            or start.pooling.kind != self.pooling
        ):
            start = None  # a shared beta cannot warm-start per-prototype ones, nor a pooling
            # another one
        centres = start.prototypes if start is not None else self.initial_centres(sets, seed)
        if validation_sets is not None:
            validation_sets = self._preprocessed(validation_sets)
        return fit_dpp(
            sets,
            centres,
            self.fit_settings(),
            jax.random.key(seed),
            mode=self.mode,
            beta_scale=float(self.beta_scale),
            per_prototype_beta=bool(self.per_prototype_beta),
            validation_fraction=float(self.validation_fraction),
            start=start,
            devices=self.devices if self.devices == "all" else int(self.devices),
            validation_sets=validation_sets,
            round_cap=None if self.round_cap is None else int(self.round_cap),
            pooling=self.pooling,
            layout=layout,
            any_pooling=bool(any_pooling),
        )
