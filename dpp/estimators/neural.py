"""Neural set classifiers as dpp estimators: attention MIL pooling and Deep Sets / MI-Net.

What a practitioner tries beside DPP, with the interface of every dpp estimator:
``fit(sets, y, sample_weight=None)``, ``predict_proba``, class labels of any type and soft
labels (the loss is eq. 17's soft-label log-likelihood), multi-class softmax, ``random_state``,
``save``/:func:`dpp.load`, a :class:`~dpp.errors.FitWarning` for a fit that does not end clean,
``NotFittedError`` before ``fit``, and the input checks of :mod:`dpp.estimators.base` (empty
sets, NaN, mixed dimensions).

A fit: the features are standardised (fitted on the training vectors), 20 % of the training
sets are held out (stratified) for early stopping, the network is trained by Adam until
``patience`` epochs have not raised the held-out log-likelihood (at most ``max_epochs``), and
then refitted from the same start on all training sets for the best number of epochs (status
``early_stopped``). The numerics are :mod:`dpp.networks`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import equinox as eqx
import jax
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpp import params as check
from dpp.estimators.adam import (
    AdamTrained,
    Member,
    network_leaves,
    restore_network,
    train_with_early_stopping,
)
from dpp.estimators.base import PreprocessedFit, SetClassifierMixin, warn_unclean
from dpp.estimators.inputs import per_set, prediction_sets
from dpp.estimators.saving import write_model_file
from dpp.model import FitReport
from dpp.networks import layers, readout, training
from dpp.pooling import REGISTRY as POOLING_REGISTRY
from dpp.sets import RaggedSets
from dpp.units import Affine

_TRAIN = training.TrainSettings()


#: The poolings Deep Sets takes: the registry's with a dense (padded-set) form, mean and max.
DENSE_POOLINGS = tuple(kind for kind, cls in POOLING_REGISTRY.items() if hasattr(cls, "dense"))


class NeuralSetClassifier(
    AdamTrained, SetClassifierMixin, PreprocessedFit, ClassifierMixin, BaseEstimator
):
    """Shared machinery of the neural set classifiers (not used directly).

    Subclasses set :attr:`method` and implement ``_make`` (the initial network). Fitted
    attributes: ``network_`` (the Equinox module), ``classes_``, ``n_features_in_``,
    ``preprocess_``, ``history_`` (empty: no objective is recorded per epoch), ``n_iter_``
    (epochs of the refit), ``fit_report_`` (:class:`dpp.FitReport`: ``status``, ``reason``,
    ``rounds`` in epochs, ``seconds``, ``early_stopping`` with the held-out log-likelihood per
    epoch).
    """

    method: ClassVar[str] = ""
    uses_centres: ClassVar[bool] = False
    #: Standardises its inputs by its own ``standardize``, not by a dataset's flag: a dataset's
    #: units (MPEG-7's frequencies, std 0.03-0.07) are the prototype models', and an MLP barely
    #: moves from its random start on them (Table 1: chance accuracy, best epoch 0).
    own_units: ClassVar[bool] = True
    #: The rules of the shared parameters; subclasses extend them.
    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **AdamTrained.TRAIN_RULES,
        "standardize": check.Bool(),
        "random_state": check.Optional(check.Int(0)),
    }

    def fit(self, X, y=None, sample_weight=None):
        """Fits the network on training sets (early stopping on 20 %, then a refit on all).

        Args:
            X: ``N`` training sets (list of ``[M_n, D]`` arrays, ``RaggedSets`` or a
                ``(vectors, set_ids)`` pair).
            y: ``[N]`` class labels or ``[N, C]`` soft labels; ``None`` for labelled
                ``RaggedSets``.
            sample_weight: optional ``[N]`` non-negative per-set weights of the loss.

        Returns:
            ``self``.

        Raises:
            ValueError: bad parameters or inputs (naming which): empty sets, NaN, mixed
                dimensions, labels off the simplex, fewer than 2 classes.
        """
        network, report, _ = train_with_early_stopping(*self.training_member(X, y, sample_weight))
        return self.finish_training(network, report)

    def _member(self, sets: RaggedSets, seed: int, weight_decay: float) -> Member:
        """The fit's :class:`Member` (what :func:`fit_together` batches)."""
        settings = self._train_settings(weight_decay)
        return Member(
            self._make, sets, settings, float(self.validation_fraction), seed, self.method,
            bool(self.verbose),
        )  # fmt: skip

    def finish_training(self, network: eqx.Module, report: FitReport, **chosen):
        """Sets the fitted attributes from a trained network; returns ``self``.

        ``chosen``: what :func:`fit_together` chose among candidate weight decays (unused here:
        the networks take one).

        Raises:
            ValueError: the network's parameters are not finite.
        """
        for leaf in jax.tree.leaves(eqx.filter(network, eqx.is_array)):
            if not np.all(np.isfinite(np.asarray(leaf))):
                raise ValueError(f"{type(self).__name__} fit produced non-finite parameters")
        self.network_ = network
        self.fit_report_ = report
        # no objective is recorded per epoch (the held-out log-likelihood per epoch is in
        # fit_report_.early_stopping.validation_history)
        self.history_, self.n_iter_ = np.zeros(0), self.fit_report_.rounds
        warn_unclean(self)
        return self

    def describe(self) -> str:
        """``Name(param=value, ...)`` with the parameters that differ from the defaults."""
        changed = {k: v for k, v in self.get_params(deep=False).items() if k != "preprocess"}
        defaults = type(self)().get_params(deep=False)
        parts = [f"{k}={v!r}" for k, v in changed.items() if v != defaults.get(k)]
        return f"{type(self).__name__}({', '.join(parts)})"

    def _fit_preprocess(self, sets: RaggedSets) -> Affine | None:
        if self.preprocess is not None:
            return Affine.prefit(self.preprocess, sets.dim)
        return Affine.fit(np.asarray(sets.vectors), self.standardize, None)

    def _make(self, sets: RaggedSets, key) -> eqx.Module:
        raise NotImplementedError

    # ------------------------------------------------------------------ predict
    def predict_log_proba(self, X) -> np.ndarray:
        """``[N, C]`` float64 log class probabilities, columns in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets whose dimension differs from the training sets'.
        """
        check_is_fitted(self, "network_")
        sets = self._preprocessed(prediction_sets(X, self))
        buckets, index = training.bucketize(sets, 1, len(self.classes_))
        out = np.zeros((sets.num_sets, len(self.classes_)))
        for bucket, rows in zip(buckets, index, strict=True):
            out[rows] = np.asarray(readout.log_proba(self.network_, bucket))[: rows.size]
        return out

    def transform(self, X) -> np.ndarray:
        """``[N, H]`` float64 pooled set representations ``z``, the linear head's input.

        Attention MIL's ``sum_k a_k h_k``, MI-Net's max and Deep Sets' mean of the embedded
        vectors (inference mode): the logits are ``z W^T + intercept_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets whose dimension differs from the training sets'.
        """
        check_is_fitted(self, "network_")
        sets = self._preprocessed(prediction_sets(X, self))
        buckets, index = training.bucketize(sets, 1, len(self.classes_))
        out = np.zeros((sets.num_sets, int(self.network_.classifier.weight.shape[1])))
        for bucket, rows in zip(buckets, index, strict=True):
            out[rows] = np.asarray(readout.pooled(self.network_, bucket))[: rows.size]
        return out

    # ------------------------------------------------------------------ instance evidence
    def instance_scores(self, X) -> list[np.ndarray]:
        """Each vector's contribution to its set's logits: one ``[M_n, C]`` array per set.

        The head is linear, so the logits ``W z + b`` split exactly over the vectors through
        the pooled representation ``z``: attention MIL's ``a_k W h_k`` (its attention weight
        times the vector's embedding through the head), Deep Sets' ``h_k / M`` and MI-Net's
        share of each max-pooled unit (the unit's value, split equally among the vectors that
        hold it) through ``W``. ``instance_scores(X)[n].sum(0) + intercept_`` are set ``n``'s
        logits, whose log-softmax is ``predict_log_proba(X)[n]`` (to float32 rounding).
        Inference mode (no dropout). A network with a non-linear head would have no such split
        and would raise ``NotImplementedError``; both networks here have a linear one.

        Args:
            X: ``N`` sets (as :meth:`fit` takes them).

        Returns:
            ``N`` float64 arrays ``[M_n, C]`` (logit units), columns in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets that :func:`~dpp.estimators.base.prediction_sets` refuses.
        """
        check_is_fitted(self, "network_")
        sets = self._preprocessed(prediction_sets(X, self))
        flat = readout.per_vector(self.network_, sets, readout.instance_scores, len(self.classes_))
        return per_set(flat, sets)

    @property
    def intercept_(self) -> np.ndarray:
        """``[C]`` float64, the head's bias: the part of the logits no vector carries.

        Raises:
            AttributeError: before ``fit``.
        """
        network = self.__dict__.get("network_")
        if network is None:
            raise AttributeError(f"{type(self).__name__} is not fitted: no intercept_")
        return np.asarray(network.intercept(), np.float64)

    # ------------------------------------------------------------------ model file
    def save(self, path) -> Path:
        """Writes the fitted estimator to one ``.npz`` model file (:mod:`dpp.model_file`).

        The network's arrays (``net_000`` ...), the preprocessing and every constructor
        parameter; :func:`dpp.load` rebuilds the network from the parameters and checks every
        array's shape against it.

        Raises:
            sklearn.exceptions.NotFittedError: for an unfitted estimator.
        """
        check_is_fitted(self, "network_")
        return write_model_file(self, path, self.method, network_leaves(self.network_),
                                self.fit_report_.to_dict())  # fmt: skip

    def restore_arrays(self, path: Path, header: dict, arrays: dict, dim: int) -> None:
        """Sets the fitted network from a model file's ``net_*`` arrays (:func:`dpp.load`)."""
        skeleton = self._skeleton(dim, len(header["classes"]))
        self.network_ = restore_network(path, skeleton, arrays)
        self.fit_report_ = FitReport.from_dict(self.method, header["info"])
        self.history_ = np.zeros(0)
        self.n_iter_ = self.fit_report_.rounds

    def _skeleton(self, dim: int, num_classes: int) -> eqx.Module:
        """A network of the parameters' shapes (its values are replaced when loaded)."""
        raise NotImplementedError


class AttentionMILClassifier(NeuralSetClassifier):
    r"""Attention-based deep multiple-instance pooling (Ilse, Tomczak & Welling, ICML 2018).

    An embedding network ``h_k`` of every vector, attention weights
    :math:`a_k = \mathrm{softmax}_k(w^T \tanh(V h_k))` (``gated``: times
    :math:`\mathrm{sigm}(U h_k)`), the set's representation :math:`z = \sum_k a_k h_k`, and a
    linear softmax classifier (multi-class; the paper's binary sigmoid for ``C = 2``).

    Args:
        gated: the gated attention of the paper's section 2.4.
        attention_size: width of ``V`` (and ``U``): 64 in the paper's MIL experiments.
        embedding: widths of the embedding's ReLU layers: 256-128-64, the MIL benchmarks'
            network of Wang et al. (2018) that Ilse et al. used.
        dropout: dropout after the last embedding layer (0.5, both papers).
        learning_rate: Adam's step size (5e-4, Ilse et al. on the MIL benchmarks).
        weight_decay: coupled L2 weight decay (5e-3, idem; PyTorch's ``Adam(weight_decay)``).
        batch_size: sets per mini-batch (1: one bag a step, as in both papers).
        max_epochs: epochs at most (100).
        patience: early stopping: epochs without a better held-out log-likelihood (20).
        validation_fraction: held-out share of the training sets for early stopping (0.2,
            stratified); skipped below 10 sets, 0 turns it off.
        standardize: standardise the features on the training vectors first.
        preprocess: a prefit :class:`~dpp.units.Affine` used instead of ``standardize``.
        random_state: seed of the split, the start, the order of the sets and dropout
            (``None``: a fresh one, as every estimator here).
        verbose: a progress line after the early-stopping fit and after the refit (best
            epoch, held-out log-likelihood, status, seconds), to stderr where logging is not
            configured.
    """

    method = "attention_mil"

    def __init__(
        self,
        gated: bool = False,
        attention_size: int = 64,
        embedding=(256, 128, 64),
        dropout: float = 0.5,
        learning_rate: float = _TRAIN.learning_rate,
        weight_decay: float = _TRAIN.weight_decay,
        batch_size: int = _TRAIN.batch_size,
        max_epochs: int = _TRAIN.max_epochs,
        patience: int = _TRAIN.patience,
        validation_fraction: float = 0.2,
        standardize: bool = True,
        preprocess: Affine | None = None,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        self.gated = gated
        self.attention_size = attention_size
        self.embedding = embedding
        self.dropout = dropout
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.standardize = standardize
        self.preprocess = preprocess
        self.random_state = random_state
        self.verbose = verbose

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **NeuralSetClassifier.PARAMETER_RULES,
        "gated": check.Bool(),
        "attention_size": check.Int(1),
    }

    def _make(self, sets: RaggedSets, key) -> eqx.Module:
        return self._skeleton(sets.dim, sets.num_classes, key)

    def attention_weights(self, X) -> list[np.ndarray]:
        """The attention weights ``a_k``: one ``[M_n]`` float64 array per set, summing to 1.

        What attention MIL is read by (Ilse et al. 2018, section 2.4): how much each vector
        weighs in the set's representation. It says nothing of which class a vector supports;
        :meth:`instance_scores` does (``a_k W h_k``).

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets that :func:`~dpp.estimators.base.prediction_sets` refuses.
        """
        check_is_fitted(self, "network_")
        sets = self._preprocessed(prediction_sets(X, self))
        flat = readout.per_vector(self.network_, sets, readout.attention, 1)[:, 0]
        return per_set(flat, sets)

    def _skeleton(self, dim: int, num_classes: int, key=None) -> eqx.Module:
        key = jax.random.key(0) if key is None else key
        return layers.initialised(
            layers.AttentionMIL, dim, num_classes, self._widths(), float(self.dropout),
            int(self.attention_size), bool(self.gated), key=key,
        )  # fmt: skip


class DeepSetsClassifier(NeuralSetClassifier):
    """An embedding network pooled by max or mean, then classified: MI-Net or Deep Sets.

    With ``pooling="max"`` this is MI-Net (Wang, Yan, Tang, Bai & Liu, *Revisiting multiple
    instance neural networks*, Pattern Recognition 2018): the embedding of every vector, the
    largest value of each feature over the set, a linear softmax classifier. With ``"mean"`` it
    is Deep Sets' permutation-invariant sum decomposition (Zaheer et al., NeurIPS 2017) with a
    linear readout.

    Args:
        pooling: ``max`` (MI-Net, the default) or ``mean`` (Deep Sets): a pooling of
            :data:`dpp.pooling.REGISTRY` with a dense (padded-set) form.

    The other parameters (``embedding``, ``dropout``, ``learning_rate``, ``weight_decay``,
    ``batch_size``, ``max_epochs``, ``patience``, ``validation_fraction``, ``standardize``,
    ``preprocess``, ``random_state``, ``verbose``) are as :class:`AttentionMILClassifier`'s
    (256-128-64 and dropout 0.5 are MI-Net's).
    """

    method = "deep_sets"

    def __init__(
        self,
        pooling: str = "max",
        embedding=(256, 128, 64),
        dropout: float = 0.5,
        learning_rate: float = _TRAIN.learning_rate,
        weight_decay: float = _TRAIN.weight_decay,
        batch_size: int = _TRAIN.batch_size,
        max_epochs: int = _TRAIN.max_epochs,
        patience: int = _TRAIN.patience,
        validation_fraction: float = 0.2,
        standardize: bool = True,
        preprocess: Affine | None = None,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        self.pooling = pooling
        self.embedding = embedding
        self.dropout = dropout
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.standardize = standardize
        self.preprocess = preprocess
        self.random_state = random_state
        self.verbose = verbose

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **NeuralSetClassifier.PARAMETER_RULES,
        "pooling": check.Choice(DENSE_POOLINGS),
    }

    def _make(self, sets: RaggedSets, key) -> eqx.Module:
        return self._skeleton(sets.dim, sets.num_classes, key)

    def _skeleton(self, dim: int, num_classes: int, key=None) -> eqx.Module:
        key = jax.random.key(0) if key is None else key
        return layers.initialised(
            layers.DeepSets, dim, num_classes, self._widths(), float(self.dropout),
            str(self.pooling), key=key,
        )  # fmt: skip
