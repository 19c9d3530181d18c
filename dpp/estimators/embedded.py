"""DPP on a learned embedding: an MLP before the soft assignment, trained with it by Adam.

:class:`EmbeddedDPPClassifier` is a neural set classifier built from the networks' layers
(:mod:`dpp.networks`): every vector passes through the networks' MLP, is softly assigned
to ``K`` prototypes in the embedding space (eq. 3), the codes are pooled (:mod:`dpp.pooling`)
and classified by eq. (16). The MLP, ``mu``, ``beta``, ``Theta`` (and a generalised mean's
exponent) are trained jointly by Adam epochs with the networks' early stopping
(:func:`~dpp.estimators.adam.train_with_early_stopping`). It is a prototype estimator as
well: ``transform`` gives the codes ``z``, ``soft_assignments`` and ``instance_scores`` the
per-vector evidence, ``prototypes_`` lie in the embedding space.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_is_fitted

from dpp import params as check
from dpp.estimators.adam import (
    AdamTrained,
    Member,
    best_held_out,
    held_out_score,
    network_leaves,
    restore_network,
    train_with_early_stopping,
)
from dpp.estimators.base import PrototypeClassifier
from dpp.estimators.saving import write_model_file
from dpp.init import (
    KMEANS_MAX_ITER,
    KMEANS_N_INIT,
    KMEANS_SOLVER,
    init_log_beta,
    kmeans_centres,
)
from dpp.model.report import FitReport, PrototypeFacts
from dpp.networks import layers, readout, training
from dpp.pooling import POOLINGS, exponent, make_pooling
from dpp.sets import RaggedSets
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import FitSettings, fit_classifier

_FIT = FitSettings()
_TRAIN = training.TrainSettings()
#: The default candidate weight decays on the embedding: the networks' 5e-3 and 40 times it,
#: the one its own early stopping holds out best kept (``docs/benchmarks.md``).
EMBEDDED_DECAYS = (_TRAIN.weight_decay, 0.2)
#: The default embedding: ReLU layers of these widths (the neural baselines' 256-128-64).
WIDTHS = (256, 128, 64)
#: The parameters a prototype estimator shares with this one, with the same meaning.
_SHARED_MEANING = (
    "n_prototypes", "l2", "pooling", "validation_fraction", "beta_scale", "standardize",
    "pca_components", "preprocess", "kmeans_n_init", "kmeans_max_iter", "kmeans_solver",
    "random_state", "verbose",
)  # fmt: skip


class EmbeddedDPPClassifier(AdamTrained, PrototypeClassifier):
    r"""DPP on a learned embedding: an MLP, soft assignment, pooling and softmax, by Adam.

    Every vector ``x`` passes through an MLP ``h`` (Equinox ReLU layers of widths
    ``embedding``, dropout after the last: the networks' :class:`~dpp.networks.layers.Embedding`),
    is softly assigned to ``K`` prototypes ``mu`` in the embedding space with inverse
    temperature ``beta`` (eq. 3 on ``h(x)``), the set's codes are pooled into ``z``
    (:mod:`dpp.pooling`) and a softmax classifier ``Theta`` predicts its class (eq. 16). ``mu``
    starts at k-means of the embedded training vectors, ``beta`` at the inverse median
    squared distance to the nearest centre there (times ``beta_scale``), and ``Theta`` at the
    maximiser on those codes (the paper's first Theta-step); then everything is trained by
    Adam epochs on the soft-label log-likelihood (eq. 17) less ``l2 * tr(Theta^T Theta)`` and
    ``weight_decay`` on the MLP, with early stopping on ``validation_fraction`` of the
    training sets and a refit on all of them for the best number of epochs (the networks'
    procedure, :func:`~dpp.estimators.adam.train_with_early_stopping`).

    The defaults (``K = 16``, the generalised mean, dropout 0.5, two weight decays, the
    moving average of the parameters) are decided on the suite's paired differences; their
    statistics are on the benchmark page (``docs/benchmarks.md``, ``docs/defaults.md``). Why:
    with mean pooling and no dropout the fit memorises its training bags from the first epoch
    (``benchmarks/embedded_diagnosis.py``); the networks' weight decay of 5e-3 barely regularises
    this model (eq. 3's ``beta`` makes its gradients 10-20 times theirs, and the coupled decay
    weighs against the gradient), while a strong one helps some tasks and hurts others, so the
    better held out of both is kept (``docs/model.md``).

    Args:
        n_prototypes: ``K``.
        l2: ridge ``lambda`` on ``Theta`` (on the summed log-likelihood; >= 0).
        pooling: ``gem`` (a generalised mean whose exponent is learned), ``mean`` (eq. 2) or
            ``max`` (:mod:`dpp.pooling`).
        embedding: widths of the MLP's ReLU layers (the networks' 256-128-64 by default).
        dropout: dropout after the last embedding layer (0.5, the networks' own; 0: none, as
            DPP on an embedding was introduced).
        learning_rate: Adam's step size.
        weight_decay: coupled L2 weight decay on the MLP's weights (PyTorch's
            ``Adam(weight_decay)``; ``Theta`` is regularised by ``l2`` instead): a number, or
            several candidates (default the networks' 5e-3 and 0.2), each trained on the same
            split and start, the one whose early stopping held out the best log-likelihood per
            set kept (``fit_report_.prototypes.weight_decay``; every candidate's score in
            ``weight_decay_held_out``). Twice the fits for two; where early stopping is
            skipped (nothing held out), the first alone.
        batch_size: sets per mini-batch (1: one set a step).
        max_epochs: epochs at most.
        patience: early stopping: epochs without a better held-out log-likelihood.
        validation_fraction: held-out share of the training sets for early stopping (0.2,
            stratified); 0 turns it off.
        widen_validation: where that share would hold out fewer than 10 sets, hold out 10
            (given 20 or more; under 20 early stopping is skipped); ``False``: skipped below 10
            held-out sets, the fit trained ``max_epochs`` epochs unmonitored (the networks'
            default).
            On by default: early stopping on a few held-out sets is noise, and unmonitored
            epochs overfit (``docs/model.md``, "Early stopping on small data").
        beta_scale: ``beta_0 = beta_scale / median squared distance to the nearest centre``.
        normalize: L2-normalise the embedded vectors and the prototypes before eq. (3)
            (NetVLAD's normalisation): distances in ``[0, 4]``, so only ``beta`` sets how hard
            the codes are, not the embedding's scale.
        weight_average: keep a moving average of the parameters over the epochs instead of
            the last epoch's (its decay per epoch, in ``[0, 1)``; 0: none, the default before):
            :class:`~dpp.networks.training.TrainSettings`' ``weight_average``. Early stopping
            scores the average, and the refit returns it. 0.5 by default: the average of the
            last epochs is steadier than the last epoch (``docs/model.md``).

    Other Parameters:
        standardize: scale every feature to zero mean and unit variance first.
        pca_components: project on this many principal components (after standardising).
        preprocess: a prefit :class:`~dpp.units.Affine` used instead of fitting the two above.
        kmeans_n_init: k-means restarts of the start's prototypes.
        kmeans_max_iter: Lloyd iterations per restart.
        kmeans_solver: which k-means starts the prototypes: ``auto`` (the default: JAX's on
            the device for large problems, scikit-learn's otherwise), ``scikit-learn`` or ``jax``
            (:data:`dpp.init.KMEANS_SOLVERS`).
        random_state: seed of the split, the start, the order of the sets and dropout
            (``None``: a fresh one).
        verbose: a progress line after the early-stopping fit and after the refit (best epoch,
            held-out log-likelihood, status, seconds), to stderr where logging is not
            configured.
        theta_options: options of the start's Theta-step (optax L-BFGS; the keys of
            :func:`dpp.solvers.options.optimizer_options` for ``"adam"``, e.g.
            ``theta_max_iter``); ``None``: their defaults. :meth:`like` takes them over from a
            prototype estimator fitted by ``optimizer="adam"``.

    Fitted attributes are :class:`~dpp.estimators.base.PrototypeClassifier`'s: ``model_`` (an
    :class:`~dpp.networks.readout.EmbeddedFit` holding the network), ``prototypes_``
    ``[K, H]`` in the embedding space, ``beta_``, ``theta_``, ``fit_report_`` (``rounds`` in
    epochs, ``early_stopping`` with the held-out log-likelihood per epoch).

    Raises (from ``fit``):
        ValueError: bad parameters or inputs (naming which), more prototypes than training
            vectors.
    """

    method = "embedded_dpp"
    fold_fits = "adam"
    uses_centres: ClassVar[bool] = False  # its k-means runs in the embedding space

    def __init__(
        self,
        n_prototypes: int = 16,
        l2: float = _FIT.l2,
        pooling: str = "gem",
        embedding=WIDTHS,
        dropout: float = 0.5,
        learning_rate: float = _TRAIN.learning_rate,
        weight_decay=EMBEDDED_DECAYS,
        batch_size: int = _TRAIN.batch_size,
        max_epochs: int = _TRAIN.max_epochs,
        patience: int = _TRAIN.patience,
        validation_fraction: float = 0.2,
        widen_validation: bool = True,
        beta_scale: float = 1.0,
        normalize: bool = False,
        weight_average: float = 0.5,
        *,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess=None,
        kmeans_n_init: int = KMEANS_N_INIT,
        kmeans_max_iter: int = KMEANS_MAX_ITER,
        kmeans_solver: str = KMEANS_SOLVER,
        random_state: int | None = 0,
        verbose: bool = False,
        theta_options: dict | None = None,
    ):
        self.n_prototypes = n_prototypes
        self.l2 = l2
        self.pooling = pooling
        self.embedding = embedding
        self.dropout = dropout
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.widen_validation = widen_validation
        self.beta_scale = beta_scale
        self.normalize = normalize
        self.weight_average = weight_average
        self.standardize = standardize
        self.pca_components = pca_components
        self.preprocess = preprocess
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_max_iter = kmeans_max_iter
        self.kmeans_solver = kmeans_solver
        self.random_state = random_state
        self.verbose = verbose
        self.theta_options = theta_options

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **{k: v for k, v in PrototypeClassifier.PARAMETER_RULES.items()
           if k != "warm_start"},
        **AdamTrained.TRAIN_RULES,
        "weight_decay": check.Reals(low=0),
        "pooling": check.Choice(POOLINGS),
        "beta_scale": check.Real(low=0, low_open=True),
        "normalize": check.Bool(),
        "weight_average": check.Real(low=0, high=1, high_open=True),
        "widen_validation": check.Bool(),
    }  # fmt: skip

    def check_params(self) -> None:
        """Checks every parameter by the class's table, and ``theta_options``.

        Raises:
            ValueError: naming the parameter, the rule and the value, or the unknown option.
        """
        super().check_params()
        solver_options.theta_solver("adam", self.theta_options)

    @classmethod
    def like(cls, estimator, **params) -> EmbeddedDPPClassifier:
        """The embedded DPP with ``estimator``'s shared parameters, updated by ``params``.

        What :class:`DPPClassifierCV` fits for an embedding candidate over a
        :class:`~dpp.DPPClassifier`, and what the model files of dpp 0.1's
        ``DPPClassifier(embedding=...)`` load as (:mod:`dpp.estimators.io`):
        ``n_prototypes``, ``l2``, ``pooling``, ``validation_fraction``, ``beta_scale``, the
        preprocessing, k-means, ``random_state`` and ``verbose`` are ``estimator``'s where it
        has them; with ``optimizer="adam"``, its ``optimizer_options`` ``learning_rate`` and
        ``batch_size`` are taken as well (and its Theta-step options for the start's
        Theta-step); another optimizer's options are not.

        Args:
            estimator: a prototype estimator (e.g. a :class:`~dpp.DPPClassifier`).
            **params: parameters of this class that override those.

        Returns:
            An unfitted estimator.
        """
        shared = {
            k: v for k, v in estimator.get_params(deep=False).items() if k in _SHARED_MEANING
        }  # not patience: a prototype fit's counts rounds, this one's epochs
        options = dict(getattr(estimator, "optimizer_options", None) or {})
        adam = getattr(estimator, "optimizer", None) == "adam"  # another's options are not ours
        if adam:
            shared.update({k: options[k] for k in ("learning_rate", "batch_size") if k in options})
        if adam and options:
            shared["theta_options"] = options
        return cls(**{**shared, **params})

    def _train_settings(self, weight_decay: float) -> training.TrainSettings:
        settings = super()._train_settings(weight_decay)
        return dataclasses.replace(settings, weight_average=float(self.weight_average))

    def _network(self, dim, num_classes, key, vectors=None, weight=1.0, seed=0):
        """The initial network: k-means of the embedded ``vectors`` (zeros without them).

        ``Theta`` is 0 here; :meth:`_member` starts it with a Theta-step.

        Raises:
            ValueError: fewer training vectors than ``n_prototypes``.
        """
        embedding = layers.initialised(
            layers.Embedding, dim, self._widths(), float(self.dropout), key=key
        )
        k = int(self.n_prototypes)
        if vectors is None:  # a skeleton, whose arrays a model file replaces
            centres, log_beta = np.zeros((k, embedding.layers[-1].out_features)), 0.0
        else:
            embedded = readout.embed(embedding, vectors)
            if self.normalize:  # k-means and the beta heuristic where eq. (3) measures
                embedded = np.asarray(layers.unit_rows(jnp.asarray(embedded)))
            if embedded.shape[0] < k:
                raise ValueError(
                    f"n_prototypes = {k} exceeds the {embedded.shape[0]} training vectors"
                )
            centres = kmeans_centres(
                embedded,
                k,
                seed,
                self.kmeans_n_init,
                self.kmeans_max_iter,
                self.kmeans_solver,
            )
            log_beta = float(init_log_beta(embedded, centres, float(self.beta_scale)))
        return readout.initial_embedded_dpp(
            embedding, centres, log_beta, num_classes, make_pooling(self.pooling),
            float(self.l2) / weight, bool(self.normalize),
        )  # fmt: skip

    def _fit_model(self, sets: RaggedSets, seed: int) -> readout.EmbeddedFit:
        decays, fits = self.decay_candidates(), []
        for decay in decays:  # a loop over 1-2 candidates
            fits.append(train_with_early_stopping(*self._member(sets, seed, decay)))
            if not math.isfinite(held_out_score(fits[0][1])):
                break  # nothing held out tells candidates apart: the first is kept, unscored
        best = best_held_out([report for _, report, _ in fits])
        scores = tuple((d, held_out_score(f[1])) for d, f in zip(decays, fits, strict=False))
        network, report, _ = fits[best]
        return self._embedded_fit(network, report, decays[best], scores)

    def _embedded_fit(
        self, network: layers.EmbeddedDPP, report: FitReport, weight_decay: float, held_out=None
    ) -> readout.EmbeddedFit:
        """The fitted model of a trained network, with the embedding's facts in its report."""
        facts = PrototypeFacts(
            embedding=self._widths(),
            pooling_p=exponent(network.pooling),
            weight_decay=float(weight_decay),
            weight_decay_held_out=held_out if held_out and len(held_out) > 1 else None,
        )
        return readout.EmbeddedFit(
            network, np.zeros(0), dataclasses.replace(report, prototypes=facts)
        )

    def finish_training(
        self, network: layers.EmbeddedDPP, report: FitReport, weight_decay=None, held_out=None
    ):
        """Sets the fitted attributes from a network trained by ``fit_together``.

        Args:
            network: the trained network.
            report: its fit's report.
            weight_decay: the candidate decay it was trained with (``None``: the only one).
            held_out: ``((decay, held-out log-likelihood), ...)`` of every candidate trained.
        """
        decay = self._one_decay(weight_decay)
        self.set_fitted(self._embedded_fit(network, report, decay, held_out))
        self._warn_status()
        return self

    def _member(self, sets: RaggedSets, seed: int, weight_decay: float) -> Member:
        """The fit as a :class:`~dpp.estimators.adam.Member` (what ``fit_together`` batches)."""
        solver = solver_options.theta_solver("adam", self.theta_options)

        def make(part: RaggedSets, key):
            vectors = np.asarray(part.vectors, np.float32)
            weight = float(np.sum(np.asarray(part.weights)))
            network = self._network(part.dim, part.num_classes, key, vectors, weight, seed)
            # the paper's first step: Theta fitted on the start's codes (a convex problem), so
            # that Adam refines a classifier rather than grows one from 0
            z = readout.EmbeddedFit(network, np.zeros(0), FitReport(self.method)).encode(part)
            theta = fit_classifier(
                z, np.asarray(part.labels), np.asarray(part.weights), network.theta,
                float(self.l2), solver,
            )  # fmt: skip
            return dataclasses.replace(network, theta=jnp.asarray(theta, network.theta.dtype))

        fraction = float(self.validation_fraction)
        return Member(
            make,
            sets,
            self._train_settings(weight_decay),
            fraction,
            seed,
            self.method,
            bool(self.verbose),
            fitted_start=True,  # k-means prototypes and a Theta-step: a model, not a random one
            widen=bool(self.widen_validation),
        )

    # ------------------------------------------------------------------ model file
    def save(self, path):
        """Writes the fitted estimator to one ``.npz`` model file (:mod:`dpp.model_file`).

        The network's arrays (``net_000`` ...), the preprocessing and every constructor
        parameter; :func:`dpp.load` rebuilds the network from the parameters and checks every
        array's shape against it.

        Raises:
            sklearn.exceptions.NotFittedError: for an unfitted estimator.
        """
        check_is_fitted(self, "model_")
        leaves = network_leaves(self.model_.network)
        return write_model_file(self, path, self.method, leaves, self.fit_report_.to_dict())

    def restore_arrays(self, path, header: dict, arrays: dict, dim: int) -> None:
        """Sets the fitted network from a model file's ``net_*`` arrays (:func:`dpp.load`)."""
        skeleton = self._network(dim, len(header["classes"]), jax.random.key(0))
        network = restore_network(path, skeleton, arrays)
        report = FitReport.from_dict(self.method, header["info"])
        self.set_fitted(readout.EmbeddedFit(network, np.zeros(0), report))
