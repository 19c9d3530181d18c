r"""An Adam-trained set model epoch by epoch: why its fit stops improving (a laboratory tool).

The networks and the embedded DPP train in one compiled ``lax.while_loop``
(:func:`dpp.networks.training.train`), which keeps only the held-out log-likelihood per epoch.
:func:`trace_training` runs an estimator's monitored fit (:class:`~dpp.EmbeddedDPPClassifier`,
:class:`~dpp.AttentionMILClassifier`, :class:`~dpp.DeepSetsClassifier`) from the same split,
start and keys as its ``fit``, one epoch at a time (:class:`EpochStepper`, the same
:func:`~dpp.networks.training.run_epoch`, optimizer and keys), and records
:func:`network_state` after each:

* the weighted mean log-likelihood per set (nats) of the training and held-out sets;
* the gradient norm of the training loss per parameter (each layer's weight and bias, ``mu``,
  ``log_beta``, ``Theta``, the attention's layers), and the norm of the embedding's arrays (the
  coupled weight decay adds ``weight_decay`` times them to the embedding's gradient before Adam
  scales it: how much the decay weighs against the loss is the ratio of the two);
* for an :class:`~dpp.networks.layers.EmbeddedDPP`: ``beta``, the scale of the embedded
  vectors (root mean square norm), the squared distance of each to its nearest prototype
  (median), ``beta`` times the gap between its nearest and second-nearest prototype (the
  exponent that decides whether its code is one-hot), the share of one-hot codes (largest
  code above ``ONE_HOT``: saturation), and the prototypes that are nobody's nearest (dead).

With a moving average of the parameters (``weight_average``, the embedded DPP's default), the
state recorded is the averaged network's, the one the fit scores and keeps. Nothing here
changes a fit: the model at epoch ``t`` is bit for bit :func:`~dpp.networks.training.train`'s
after ``t`` epochs without early stopping. ``python benchmarks/embedded_diagnosis.py`` prints
and plots it.
"""

from __future__ import annotations

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpp.encoding import LOG_BETA_MAX
from dpp.estimators.adam import plan_member
from dpp.networks import layers, readout, training

#: A code whose largest entry exceeds this is counted one-hot (saturated).
ONE_HOT = 0.99


class EpochStepper:
    """Adam epochs of one model, one call at a time (:func:`~dpp.networks.training.run_epoch`).

    Args:
        model: the initial network.
        buckets: the training sets (:func:`~dpp.networks.training.bucketize`).
        key: PRNG key (the order of the sets and dropout): :func:`~dpp.networks.training.train`'s.
        settings: Adam's settings (:class:`~dpp.networks.training.TrainSettings`).

    Attributes:
        model: the network after the epochs run so far: with ``settings.weight_average``, the
            debiased moving average of their parameters, as :func:`~dpp.networks.training.train`
            scores and keeps it (``trained``: the last epoch's own).
        epochs: the epochs run so far.
    """

    def __init__(self, model: eqx.Module, buckets, key, settings: training.TrainSettings):
        self._params, self._static = eqx.partition(model, eqx.is_inexact_array)
        trained = jax.tree.map(eqx.is_inexact_array, model)
        self._optimizer = settings.optimizer(eqx.filter(model.decay_mask(), trained))
        self._state = self._optimizer.init(self._params)
        self._key, self._buckets, self._settings = key, buckets, settings
        self._average = optax.ema(settings.weight_average) if settings.weight_average else None
        self._moment = None if self._average is None else self._average.init(self._params)
        self._kept = self._params
        self.epochs = 0
        static, optimizer = self._static, self._optimizer

        @jax.jit
        def step(params, state, key, buckets):
            return training.run_epoch(params, static, state, key, buckets, settings, optimizer)

        self._step = step

    @property
    def model(self) -> eqx.Module:
        """The network after :attr:`epochs` epochs (averaged where the settings ask)."""
        return eqx.combine(self._kept, self._static)

    @property
    def trained(self) -> eqx.Module:
        """The last epoch's own network (:attr:`model` without a moving average)."""
        return eqx.combine(self._params, self._static)

    def step(self) -> eqx.Module:
        """Runs one epoch; returns the network after it (:attr:`model`)."""
        self._params, self._state, self._key = self._step(
            self._params, self._state, self._key, self._buckets
        )
        self._kept = self._params
        if self._average is not None:  # training.train's averaged(): the same optax update
            self._kept, self._moment = self._average.update(self._params, self._moment)
        self.epochs += 1
        return self.model


def _loss(params, static, buckets) -> jax.Array:
    """The training loss of a whole epoch's sets at once (inference mode: no dropout)."""
    model = eqx.combine(params, static)
    return -training.mean_log_likelihood(model, buckets) + model.penalty()


_loss_grad = eqx.filter_jit(jax.grad(_loss))


def gradient_norms(model: eqx.Module, buckets) -> dict[str, float]:
    """The Euclidean norm of the training loss's gradient, per parameter array.

    The loss is the weighted mean negative log-likelihood per set over all ``buckets`` plus the
    model's penalty (inference mode), the full-batch form of what each Adam step follows.

    Args:
        model: a network (:mod:`dpp.networks`).
        buckets: training sets (:func:`~dpp.networks.training.bucketize`).

    Returns:
        ``{name: norm}``, names from the model's attributes (``embedding.layers[0].weight``,
        ``mu``, ``log_beta``, ``theta`` ...), float nats per unit of the parameter.
    """
    params, static = eqx.partition(model, eqx.is_inexact_array)
    grads = _loss_grad(params, static, buckets)
    flat, _ = jax.tree_util.tree_flatten_with_path(grads)
    out = {}
    for path, leaf in flat:
        if leaf is None or getattr(leaf, "size", 0) == 0:
            continue
        name = jax.tree_util.keystr(path).lstrip(".")
        if name == "ridge":  # a constant leaf (stop_gradient): no parameter
            continue
        out[name] = float(jnp.linalg.norm(jnp.ravel(leaf)))
    return out


def real_rows(buckets) -> np.ndarray:
    """``[T, D]`` float32 the real vectors of real sets of ``buckets`` (padding dropped)."""
    rows = [
        np.asarray(b.x)[np.asarray(b.mask) & (np.asarray(b.weights) > 0)[:, None]] for b in buckets
    ]
    return np.concatenate(rows)


def embedded_geometry(model: layers.EmbeddedDPP, vectors: np.ndarray) -> dict[str, float]:
    """Where the embedded vectors lie against the prototypes, and how hard their codes are.

    Args:
        model: an :class:`~dpp.networks.layers.EmbeddedDPP`.
        vectors: ``[T, D]`` preprocessed input vectors (:func:`real_rows`).

    Returns:
        ``beta`` (1 / squared embedding units), ``embedding_rms`` (root mean square norm of
        the embedded vectors, before any normalisation), ``prototype_rms`` (of ``mu`` as
        eq. 3 sees it), ``nearest_d2`` (median squared
        distance to the nearest prototype), ``beta_gap`` (median of ``beta`` times the gap
        between the second-nearest and the nearest squared distance: a code is one-hot from
        about 5), ``one_hot`` (share of vectors whose largest eq. 3 code exceeds
        :data:`ONE_HOT`), ``dead`` (share of prototypes that are no vector's nearest).
    """
    h = readout.embed(model.embedding, np.asarray(vectors, np.float32)).astype(np.float64)
    rms = float(np.sqrt((h * h).sum(1).mean()))
    if model.normalize:
        h = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-300)
    mu = np.asarray(model.centres(), np.float64)
    beta = float(np.exp(min(float(model.log_beta), float(LOG_BETA_MAX))))
    d2 = np.maximum((h * h).sum(1)[:, None] - 2 * h @ mu.T + (mu * mu).sum(1)[None, :], 0.0)
    part = np.partition(d2, 1, axis=1)[:, :2] if mu.shape[0] > 1 else np.repeat(d2, 2, 1)
    logits = -beta * (d2 - d2.min(1, keepdims=True))
    codes = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    nearest = np.bincount(d2.argmin(1), minlength=mu.shape[0])
    return {
        "beta": beta,
        "embedding_rms": rms,
        "prototype_rms": float(np.sqrt((mu * mu).sum(1).mean())),
        "nearest_d2": float(np.median(part[:, 0])),
        "beta_gap": float(np.median(beta * (part[:, 1] - part[:, 0]))),
        "one_hot": float(np.mean(codes.max(1) > ONE_HOT)),
        "dead": float(np.mean(nearest == 0)),
    }


def network_state(model: eqx.Module, buckets, validation) -> dict:
    """Everything :mod:`this module <dpp.networks.diagnostics>` reads off a network.

    Args:
        model: a network.
        buckets: its training sets.
        validation: held-out sets.

    Returns:
        ``{"train_ll", "validation_ll", "grad": {name: norm}, "embedding_norm", **geometry}``
        (``embedding_norm``: the Euclidean norm of all the embedding's weights and biases, for
        a model with an ``embedding``; the geometry of :func:`embedded_geometry` for an
        embedded DPP only), floats.
    """
    out = {
        "train_ll": float(training.mean_log_likelihood(model, buckets)),
        "validation_ll": float(training.mean_log_likelihood(model, validation)),
        "grad": gradient_norms(model, buckets),
    }
    embedding = getattr(model, "embedding", None)
    if embedding is not None:
        leaves = jax.tree.leaves(eqx.filter(embedding, eqx.is_inexact_array))
        out["embedding_norm"] = float(jnp.sqrt(sum(jnp.sum(leaf * leaf) for leaf in leaves)))
    if isinstance(model, layers.EmbeddedDPP):
        out.update(embedded_geometry(model, real_rows(buckets)))
    return out


def trace_training(
    estimator, X, y=None, epochs: int | None = None, verbose: bool = False, weight_decay=None
):
    """The monitored fit of ``estimator`` on ``(X, y)``, recorded after every epoch.

    The same held-out split (``validation_fraction``), start and PRNG keys as
    ``estimator.fit(X, y)``'s monitored fit; it runs ``epochs`` epochs whatever the held-out
    log-likelihood does (no early stopping), so what happens after the best epoch is seen.

    Args:
        estimator: an unfitted estimator trained by Adam epochs (with ``training_member``).
        X: training sets (as ``fit`` takes them).
        y: their labels.
        epochs: epochs to run (default: the estimator's ``max_epochs``).
        verbose: print one line per epoch.
        weight_decay: which of the estimator's candidate weight decays to trace
            (``decay_candidates()``; ``None``: its only one).

    Returns:
        A list of ``epochs + 1`` dicts (epoch 0: the start), each
        :func:`network_state` with ``epoch`` and ``seconds``
        (wall time since the start, compilation included).

    Raises:
        ValueError: an estimator not trained by Adam epochs, too few sets to hold out (early
            stopping skipped: there is no held-out part to record), or several candidate
            weight decays and none named.
    """
    if not hasattr(estimator, "training_member"):
        raise ValueError(f"{type(estimator).__name__} is not trained by Adam epochs")
    member = estimator.training_member(X, y, weight_decay=weight_decay)
    plan = plan_member(member)
    if not plan.monitored:
        raise ValueError(f"no held-out sets to trace: {plan.skipped}")
    epochs = member.settings.max_epochs if epochs is None else int(epochs)
    stepper = EpochStepper(plan.start, plan.buckets, plan.train_key, member.settings)
    t0 = time.perf_counter()
    trace = []
    for epoch in range(epochs + 1):  # epochs of training: each one compiled program's call
        if epoch:
            stepper.step()
        state = network_state(stepper.model, plan.buckets, plan.validation)
        state.update(epoch=epoch, seconds=time.perf_counter() - t0)
        trace.append(state)
        if verbose:
            extra = "" if "one_hot" not in state else (
                f" beta {state['beta']:.3g} one-hot {state['one_hot']:.2f}"
                f" rms {state['embedding_rms']:.3g}"
            )  # fmt: skip
            print(
                f"epoch {epoch:3d}: train {state['train_ll']:.4f} "
                f"held-out {state['validation_ll']:.4f}{extra}",
                flush=True,
            )
    return trace
