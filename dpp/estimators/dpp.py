"""The DPP estimator (Bonilla & Robles-Kelly 2012): soft assignment, pooling, softmax, learned."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_is_fitted

from dpp import params as check
from dpp.baselines import neural
from dpp.baselines.infoloss import InfoLossSettings
from dpp.estimators.base import PrototypeClassifier, write_model_file
from dpp.estimators.neural import (
    Member,
    network_leaves,
    restore_network,
    train_with_early_stopping,
)
from dpp.init import KMEANS_MAX_ITER, KMEANS_N_INIT, init_log_beta, kmeans_centres
from dpp.likelihood import BetaPrior
from dpp.model import FittedModel, fit_dpp
from dpp.model.fit import FIT_RULES
from dpp.model.report import FitReport, PrototypeFacts
from dpp.pooling import POOLINGS, exponent, make_pooling
from dpp.sets import RaggedSets
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import FitSettings, fit_classifier

_FIT = FitSettings()
_INFOLOSS = InfoLossSettings()


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
            of rounds (status ``early_stopped``). Skipped, stopping by ``tol`` or
            ``max_rounds``, when it would hold out fewer than 10 sets (fewer than 46 training
            sets at 0.2); 0 turns it off. The default 0.2 keeps a plain fit out of saturated
            codes on data nobody tuned for: over the suite's tasks and a generated
            multiple-instance problem, 0 of 30 fits saturated against 16 of 30 by ``tol`` alone,
            at 85.5 % against 79.5 % accuracy (``python scripts/defaults_probe.py``).
        patience: early stopping: rounds without a better validation log-likelihood.
        beta_scale: ``beta_0 = beta_scale / median squared distance to the nearest centre``.
        per_prototype_beta: one ``beta`` per prototype instead of one shared.
        pooling: how a set's codes become its representation ``z`` (:mod:`dpp.pooling`):
            ``mean`` (eq. 2, the paper's, the default), ``max`` (per prototype, the largest
            code over the set's vectors: whether a set holds one vector near a prototype, the
            multiple-instance assumption) or ``gem`` (a generalised mean whose exponent
            ``p = 1 + softplus(rho)`` in ``[1, 64]`` is learned with the prototypes from
            ``p = 3``; mean and max are its limits). ``DPPClassifierCV`` can choose it.
        embedding: ``None`` (the paper's model, the default), or the widths of an MLP
            (Equinox, ReLU layers, e.g. ``(256, 128, 64)``) applied to every vector before the
            soft assignment: DPP on a learned embedding. The MLP, ``mu``, ``beta``, ``Theta``
            (and the pooling's ``p``) are then trained jointly by Adam epochs, with early
            stopping on ``validation_fraction`` of the training sets and a refit on all of
            them (:mod:`dpp.baselines.neural`): learning rate 5e-4, weight decay 5e-3 on the
            MLP, ``l2`` on ``Theta`` as always, at most 100 epochs, patience 20, one set a
            step (``optimizer_options`` ``learning_rate`` and ``batch_size`` override them).
            ``mu`` starts at k-means of the embedded training vectors and ``beta`` at the
            median nearest squared distance there. Needs ``optimizer="adam"``; one shared
            ``beta``; one device. ``prototypes_`` are then in the embedding space.
        beta_prior: prior on ``log beta``: ``none``, ``lognormal`` (Gaussian on ``log beta``
            with mean ``beta_prior_loc`` and s.d. ``beta_prior_scale``) or ``gamma`` (shape
            ``beta_prior_loc``, rate ``beta_prior_scale``), in the units of the preprocessed
            features.
        beta_prior_loc: first parameter of the prior.
        beta_prior_scale: second parameter of the prior (> 0).
        devices: devices the fit runs on, a positive number or ``"all"`` (:mod:`dpp.sharding`:
            whole sets per device, the likelihood's sums reduced across devices; full-batch
            optimizers only). Same fit as one device up to float rounding.

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
        random_state: seed of k-means, of the early-stopping split and of mini-batch order
            (``None``: a fresh one).
        verbose: log ``L`` and ``beta`` after every round.

    Raises (from ``fit``):
        ValueError: bad parameters or inputs, naming which.
        NonFiniteResultError: non-finite parameters after the fit.
    """

    method = "dpp"

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
        embedding=None,
        beta_prior: str = _FIT.prior.kind,
        beta_prior_loc: float = _FIT.prior.loc,
        beta_prior_scale: float = _FIT.prior.scale,
        devices: int | str = 1,
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
        self.embedding = embedding
        self.beta_prior = beta_prior
        self.beta_prior_loc = beta_prior_loc
        self.beta_prior_scale = beta_prior_scale
        self.devices = devices
        self.standardize = standardize
        self.pca_components = pca_components
        self.preprocess = preprocess
        self.init = init
        self.warm_start = warm_start
        self.optimizer = optimizer
        self.optimizer_options = optimizer_options
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_max_iter = kmeans_max_iter
        self.random_state = random_state
        self.verbose = verbose

    _parameter_constraints: ClassVar[dict[str, check.Rule]] = {
        **PrototypeClassifier._parameter_constraints,
        "devices": check.Literal("all", check.Int(1)),
        **FitSettings.RULES,
        **FIT_RULES,
        "beta_scale": check.Real(low=0, low_open=True),
        "per_prototype_beta": check.Bool(),
        "pooling": check.Choice(POOLINGS),
        "embedding": check.Optional(check.Widths()),
        "beta_prior": check.Choice(("none", "lognormal", "gamma")),
        "beta_prior_loc": check.Real(),
        "beta_prior_scale": check.Real(low=0, low_open=True),
    }

    def check_params(self) -> None:
        """Checks every parameter (raises ``ValueError`` naming the first bad one)."""
        super().check_params()
        self._prior()
        if self.embedding is None:
            return
        widths = tuple(self.embedding)
        if self.optimizer != "adam":
            raise ValueError(
                f"embedding={widths} is trained with mu, beta and Theta by Adam epochs: "
                f"optimizer={self.optimizer!r} cannot train it; the choices with an embedding: "
                "'adam'"
            )
        if self.per_prototype_beta:
            raise ValueError(f"embedding={widths} takes one shared beta: per_prototype_beta=False")
        if self.devices != 1:
            raise ValueError(f"embedding={widths} fits on one device: devices=1")

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

    def fit(
        self,
        X,
        y=None,
        sample_weight=None,
        validation_sets=None,
        round_cap=None,
        layout=None,
        any_pooling=False,
    ):
        """Fits the model on training sets (see :meth:`PrototypeClassifier.fit`).

        Args:
            X: training sets, as :meth:`PrototypeClassifier.fit`.
            y: labels, as :meth:`PrototypeClassifier.fit`.
            sample_weight: per-set weights, as :meth:`PrototypeClassifier.fit`.
            validation_sets: early stopping on given held-out sets, e.g. a cross-validation's
                held-out fold: a labelled :class:`~dpp.sets.RaggedSets` in the raw feature
                units, its ``[M, C]`` label rows in the columns of ``classes_`` (what a
                ``subset`` of the labelled training sets gives). Their weighted log-likelihood
                per set is recorded after every round (``fit_report_.early_stopping``), the
                fit stops once ``patience`` rounds have not raised it, and the best round's
                parameters are kept. Not with ``validation_fraction > 0``.
            round_cap: a number of rounds chosen on held-out sets (what
                :class:`DPPClassifierCV` passes): at most this many rounds, and a fit that
                stops there is ``early_stopped``. At most ``max_rounds``.
            layout: a :class:`~dpp.sets.Layout` the padded sets are at least as large as
                (:meth:`~dpp.sets.Layout.covering` of every set that several fits hold), so
                that those fits run one compiled program: :class:`DPPClassifierCV` gives its
                folds and refit one, and an experiment its trials. It changes shapes only, not
                the fit (ignored with an ``embedding``).
            any_pooling: compile the fit as one program for every pooling, the kind as data
                (:class:`dpp.pooling.PoolingChoice`): what :class:`DPPClassifierCV` passes
                when it selects among poolings. The same fit as without it, to the bit
                (ignored with an ``embedding``).

        Returns:
            ``self``.

        Raises:
            ValueError: as :meth:`PrototypeClassifier.fit`; ``validation_sets`` that are not
                labelled ``RaggedSets`` of the training sets' ``D`` and ``C``; a ``round_cap``
                outside ``[0, max_rounds]``; either with early stopping.
        """
        if validation_sets is not None and not isinstance(validation_sets, RaggedSets):
            raise ValueError(
                "validation_sets must be a labelled RaggedSets (e.g. sets.subset(indices)), got "
                f"{type(validation_sets).__name__}"
            )
        return self._fit(
            X,
            y,
            sample_weight,
            validation_sets=validation_sets,
            round_cap=round_cap,
            layout=layout,
            any_pooling=any_pooling,
        )

    def _fit_model(
        self,
        sets: RaggedSets,
        seed: int,
        validation_sets=None,
        round_cap=None,
        layout=None,
        any_pooling=False,
    ) -> FittedModel:
        if self.embedding is not None:
            if validation_sets is not None or round_cap is not None:
                raise ValueError(
                    "validation_sets and round_cap choose coordinate-ascent rounds; with an "
                    "embedding, early stopping holds out validation_fraction of the sets"
                )
            return self._fit_embedded(sets, seed)
        start = self._warm_model(sets)
        if start is not None and (
            np.ndim(start.log_beta) != int(bool(self.per_prototype_beta))
            or start.pooling.kind != self.pooling
        ):
            start = None  # a shared beta cannot warm-start per-prototype ones, nor a pooling
            # another one
        centres = start.prototypes if start is not None else self._initial_centres(sets, seed)
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
            round_cap=None if round_cap is None else int(round_cap),
            pooling=self.pooling,
            layout=layout,
            any_pooling=bool(any_pooling),
        )

    # ------------------------------------------------------------------ DPP on an embedding
    def _train_settings(self):
        """Adam and early stopping of the embedded fit (the neural baselines' defaults)."""
        options = self.optimizer_options or {}
        defaults = neural.TrainSettings()
        return dataclasses.replace(
            defaults,
            learning_rate=float(options.get("learning_rate", defaults.learning_rate)),
            batch_size=int(options.get("batch_size", defaults.batch_size)),
        )

    def _embedded_network(self, dim, num_classes, key, vectors=None, weight=1.0, seed=0):
        """The initial network: k-means of the embedded ``vectors`` (zeros without them).

        ``Theta`` is 0 here; :meth:`_fit_embedded` starts it with a Theta-step.
        """
        embedding = neural.Embedding(dim, tuple(self.embedding), 0.0, key=key)
        k = int(self.n_prototypes)
        if vectors is None:  # a skeleton, whose arrays a model file replaces
            centres, log_beta = np.zeros((k, embedding.layers[-1].out_features)), 0.0
        else:
            embedded = neural.embed(embedding, vectors)
            if embedded.shape[0] < k:
                raise ValueError(
                    f"n_prototypes = {k} exceeds the {embedded.shape[0]} training vectors"
                )
            centres = kmeans_centres(embedded, k, seed, self.kmeans_n_init, self.kmeans_max_iter)
            log_beta = float(init_log_beta(embedded, centres, float(self.beta_scale)))
        return neural.initial_embedded_dpp(
            embedding, centres, log_beta, num_classes, make_pooling(self.pooling),
            float(self.l2) / weight,
        )  # fmt: skip

    def _fit_embedded(self, sets: RaggedSets, seed: int) -> neural.EmbeddedFit:
        """DPP on a learned embedding: trained jointly by Adam with early stopping."""
        network, report, _ = train_with_early_stopping(*self._member(sets, seed))
        return self._embedded_fit(network, report)

    def _embedded_fit(self, network: neural.EmbeddedDPP, report: FitReport) -> neural.EmbeddedFit:
        """The fitted model of a trained network, with the embedding's facts in its report."""
        facts = PrototypeFacts(
            embedding=tuple(int(w) for w in self.embedding), pooling_p=exponent(network.pooling)
        )
        return neural.EmbeddedFit(
            network, np.zeros(0), dataclasses.replace(report, prototypes=facts)
        )

    def _finish(self, network: neural.EmbeddedDPP, report: FitReport):
        """Sets the fitted attributes from a network trained by :func:`fit_together`."""
        self._set_fitted(self._embedded_fit(network, report))
        self._warn_status()
        return self

    def _member(self, sets: RaggedSets, seed: int) -> Member:
        """The embedded fit as a :class:`~dpp.estimators.neural.Member`.

        What :func:`~dpp.estimators.neural.fit_together` batches.

        Raises:
            ValueError: without an ``embedding`` (coordinate ascent is not batched).
        """
        if self.embedding is None:
            raise ValueError("only DPP on an embedding is trained by Adam epochs that batch")
        solver = solver_options.theta_solver(self.optimizer, self.optimizer_options)

        def make(part: RaggedSets, key):
            vectors = np.asarray(part.vectors, np.float32)
            weight = float(np.sum(np.asarray(part.weights)))
            network = self._embedded_network(part.dim, part.num_classes, key, vectors, weight, seed)
            # the paper's first step: Theta fitted on the start's codes (a convex problem), so
            # that Adam refines a classifier rather than grows one from 0
            z = neural.EmbeddedFit(network, np.zeros(0), FitReport("dpp")).encode(part)
            theta = fit_classifier(
                z, np.asarray(part.labels), np.asarray(part.weights), network.theta,
                float(self.l2), solver,
            )  # fmt: skip
            return dataclasses.replace(network, theta=jnp.asarray(theta, network.theta.dtype))

        fraction = float(self.validation_fraction)
        return Member(make, sets, self._train_settings(), fraction, seed, "dpp")

    def _file_arrays(self) -> tuple[frozenset, frozenset, str | None]:
        """The paper's model's arrays, or an embedded network's ``net_*``."""
        if self.embedding is not None:
            return frozenset(), frozenset(), "net_"
        return super()._file_arrays()

    def save(self, path):
        """Writes the fitted estimator to one ``.npz`` model file (:mod:`dpp.model_file`).

        See :meth:`PrototypeClassifier.save`; with an embedding the file holds the network's
        arrays (``net_000`` ...), rebuilt from the parameters when loaded.
        """
        if self.embedding is None:
            return super().save(path)
        check_is_fitted(self, "model_")
        leaves = network_leaves(self.model_.network)
        return write_model_file(self, path, "dpp", leaves, self.fit_report_.to_dict())

    def _restore(self, path, header: dict, arrays: dict, dim: int) -> None:
        if self.embedding is None:
            return super()._restore(path, header, arrays, dim)
        skeleton = self._embedded_network(dim, len(header["classes"]), jax.random.key(0))
        network = restore_network(path, skeleton, arrays)
        report = FitReport.from_dict("dpp", header["info"])
        self._set_fitted(neural.EmbeddedFit(network, np.zeros(0), report))
        return None
