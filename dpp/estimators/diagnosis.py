"""An Adam-trained estimator's fit, epoch by epoch: why it stops improving.

:func:`trace_training` runs the monitored fit of an estimator trained by Adam epochs
(:class:`~dpp.EmbeddedDPPClassifier`, :class:`~dpp.AttentionMILClassifier`,
:class:`~dpp.DeepSetsClassifier`) from the same split, start and keys as its ``fit``, one epoch
at a time, and records :func:`dpp.networks.diagnostics.network_state` after each: training and
held-out log-likelihood, gradient norms per parameter and, for the embedded DPP, ``beta``, the
embedding's scale, the distances to the prototypes and the share of one-hot codes. With a
moving average of the parameters (``weight_average``, the embedded DPP's default), the state
recorded is the averaged network's, the one the fit scores and keeps.
``python benchmarks/embedded_diagnosis.py`` prints and plots it.
"""

from __future__ import annotations

import time

from dpp.estimators.adam import plan_member
from dpp.networks import diagnostics


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
        :func:`~dpp.networks.diagnostics.network_state` with ``epoch`` and ``seconds``
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
    stepper = diagnostics.EpochStepper(plan.start, plan.buckets, plan.train_key, member.settings)
    t0 = time.perf_counter()
    trace = []
    for epoch in range(epochs + 1):  # epochs of training: each one compiled program's call
        if epoch:
            stepper.step()
        state = diagnostics.network_state(stepper.model, plan.buckets, plan.validation)
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
