"""Why the embedded DPP stops learning: an embedded fit and an attention-MIL fit, epoch by epoch.

Both are traced on the same digit bags (draw 0 of a suite task, its training bags) from the
same split, start and keys as their ``fit`` (:func:`lab.diagnosis.trace_training`),
for a fixed number of epochs without early stopping: training and held-out log-likelihood per
set, gradient norms per parameter, and for the embedded DPP ``beta``, the embedded vectors'
scale, the squared distance to the nearest prototype, the share of one-hot codes and the dead
prototypes, and what the coupled weight decay adds to the embedding's gradient against the
gradient itself (``decay/grad``: ``weight_decay`` x the embedding's norm / its gradient's norm,
for both models). Prints a table every few epochs and writes ``trace.json`` and ``trace.png``.

    python benchmarks/embedded_diagnosis.py              # today's defaults: each candidate decay
    # before issue 52, and a remedy's fit:
    python benchmarks/embedded_diagnosis.py --embedded pooling=mean dropout=0.0 weight_decay=0.005
    python benchmarks/embedded_diagnosis.py --epochs 40 --out outputs/diagnosis
    python benchmarks/embedded_diagnosis.py --embedded pooling=max dropout=0.5 weight_decay=0.005

About 1-2 minutes on 2 CPU cores for 40 epochs of each model on digit_bags_m10_n100.
"""

import argparse
import ast
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from lab import EMBEDDED_K, EMBEDDING, TASKS  # noqa: E402
from lab.diagnosis import trace_training  # noqa: E402

import dpp  # noqa: E402


def _params(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def _grad_groups(grad: dict) -> dict:
    """Gradient norms summed (in quadrature) into embedding, prototypes, beta, classifier."""
    groups: dict[str, float] = {}
    for name, value in grad.items():
        head = name.split(".")[0].split("[")[0]
        label = {"mu": "mu", "log_beta": "log_beta", "theta": "Theta"}.get(head)
        if label is None:
            label = "embedding" if head == "embedding" else head
        groups[label] = groups.get(label, 0.0) + value * value
    return {k: float(np.sqrt(v)) for k, v in groups.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="digit_bags_m10_n100", choices=list(TASKS))
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=5, help="print every this many epochs")
    parser.add_argument(
        "--embedded", nargs="*", default=[], metavar="KEY=VALUE",
        help="EmbeddedDPPClassifier parameters over the suite's (K = 16, 256-128-64)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("outputs/diagnosis"))
    args = parser.parse_args(argv)

    dataset = TASKS[args.task][0](0)
    sets = dataset.sets
    train = np.asarray(dataset.info.get("train_sets", np.arange(sets.num_sets)))
    X = np.split(np.asarray(sets.member_vectors()), np.cumsum(sets.set_sizes())[:-1])
    y = np.asarray(sets.labels).argmax(1)
    X_train, y_train = [X[i] for i in train], y[train]
    params = {"n_prototypes": EMBEDDED_K, "embedding": EMBEDDING, "random_state": args.seed}
    embedded = dpp.EmbeddedDPPClassifier(**{**params, **_params(args.embedded)})
    decays = embedded.decay_candidates()  # the default's candidates: one trace each
    models = {
        **{
            f"embedded DPP{'' if len(decays) == 1 else f', weight decay {d:g}'}": (embedded, d)
            for d in decays
        },
        "attention MIL": (dpp.AttentionMILClassifier(random_state=args.seed), None),
    }
    traces = {}
    for name, (estimator, decay) in models.items():
        print(f"# {name}: {estimator}", flush=True)
        trace = trace_training(estimator, X_train, y_train, epochs=args.epochs, weight_decay=decay)
        traces[name] = trace
        for state in trace:
            if state["epoch"] % args.every and state["epoch"] != args.epochs:
                continue
            groups = _grad_groups(state["grad"])
            line = (
                f"epoch {state['epoch']:3d}  train {state['train_ll']:7.4f}  "
                f"held-out {state['validation_ll']:7.4f}  |grad| "
                + " ".join(f"{k} {v:.2g}" for k, v in groups.items())
            )
            if "embedding_norm" in state:  # the coupled decay's term against the loss's
                scale = decay if decay is not None else float(estimator.weight_decay)
                decay_term = scale * state["embedding_norm"]
                line += f"  decay/grad {decay_term / groups['embedding']:.2g}"
            if "beta" in state:
                line += (
                    f"  beta {state['beta']:.3g}  rms(h) {state['embedding_rms']:.3g}  "
                    f"d2 {state['nearest_d2']:.3g}  beta*gap {state['beta_gap']:.3g}  "
                    f"one-hot {state['one_hot']:.2f}  dead {state['dead']:.2f}"
                )
            print(line, flush=True)
        best = max(trace, key=lambda s: s["validation_ll"])
        print(
            f"# {name}: best held-out log-likelihood {best['validation_ll']:.4f} at epoch "
            f"{best['epoch']}; training log-likelihood then {best['train_ll']:.4f}, at the "
            f"end {trace[-1]['train_ll']:.4f}",
            flush=True,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trace.json").write_text(json.dumps(
        {"task": args.task, "embedded": _params(args.embedded), "traces": traces}, indent=1
    ))  # fmt: skip
    scales = {name: float(m.weight_decay) if d is None else d for name, (m, d) in models.items()}
    _plot(traces, args.out / "trace.png", args.task, scales)
    print(f"wrote {args.out / 'trace.json'} and {args.out / 'trace.png'}")
    return 0


def _plot(traces: dict, path: Path, task: str, decays: dict) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for name, trace in traces.items():
        epochs = [s["epoch"] for s in trace]
        axes[1].semilogy(epochs, [decays[name] * s["embedding_norm"] for s in trace], ":",
                         label=f"{name}: weight decay x |embedding|")  # fmt: skip
        epochs = [s["epoch"] for s in trace]
        line = axes[0].plot(epochs, [s["train_ll"] for s in trace], label=f"{name}, training")
        axes[0].plot(epochs, [s["validation_ll"] for s in trace], "--", color=line[0].get_color(),
                     label=f"{name}, held-out")  # fmt: skip
        for group, value in _grad_groups(trace[0]["grad"]).items():
            axes[1].semilogy(epochs, [_grad_groups(s["grad"]).get(group, np.nan) for s in trace],
                             label=f"{name}: {group}")  # fmt: skip
            del value
        if "beta" in trace[0]:
            axes[2].plot(epochs, [s["one_hot"] for s in trace], label=f"{name}: one-hot codes")
            axes[2].plot(epochs, [s["dead"] for s in trace], label=f"{name}: dead prototypes")
            axes[3].semilogy(epochs, [s["beta"] for s in trace], label=f"{name}: beta")
            axes[3].semilogy(epochs, [s["embedding_rms"] for s in trace], label=f"{name}: rms |h|")
            axes[3].semilogy(epochs, [s["nearest_d2"] for s in trace], label=f"{name}: nearest d^2")
            axes[3].semilogy(epochs, [s["beta_gap"] for s in trace], label=f"{name}: beta x gap")
    titles = ("log-likelihood per set", "gradient norm", "embedded DPP: shares",
              "embedded DPP: scales")  # fmt: skip
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.legend(fontsize=6)
    fig.suptitle(task)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
