"""Every method on every task of the suite (benchmarks/lab/), or a paired comparison.

Writes suite.json, .csv, .md, .png (and evidence.png with digit-bag tasks).

    python benchmarks/suite.py             # the broad benchmark: every generated task, 3 draws x
                                           # 5 outer folds, every method -> outputs/suite/
    python benchmarks/suite.py --quick     # 4 tasks, 1 draw x 3 folds, 4 methods
    python benchmarks/suite.py --tasks witness_d10_r10 --folds 3 --draws 1 --out /tmp/suite
    python benchmarks/suite.py --tasks mil_musk1 mil_elephant --folds 10 --draws 1  # real sets
    python benchmarks/suite.py --compare dpp_max dpp_mean [--out outputs/suite]  # a finished run
    python benchmarks/suite.py --methods dpp_mean dpp_mean_iter5 --variant dpp_mean_iter5 \
        dpp_mean '{"estimator__optimizer_options": {"max_iter": 5}}'  # a screen's variant
    python benchmarks/suite.py --decide dpp_max dpp_gem --out runA runB   # the default's rule

It calls :func:`lab.run_suite`. Files are rewritten after every fit, so a run that
fails keeps every fit it finished; ``--resume`` continues it, keeping the (draw, fold) units
that every method finished. ``--compare A B`` prints A - B over the paired (task, draw, fold)
units of the run in ``--out`` (mean ± s.e., wins/ties/losses, Wilcoxon p), overall and per
task family, for accuracy and the test log-likelihood. With several ``--out`` folders (runs of
other methods, or on other machines), a unit is one (run, task, draw, fold): only records of
one run are paired. ``--decide R1 R2 ...`` prints each rule against ``dpp_mean`` and the one the
issue's criterion ships (:func:`lab.decide`). ``--peers M P1 P2 ...``
prints, per task, M against the best of the peers on the units all of them finished.
"""

import argparse
import json
import sys
import textwrap
import time
from pathlib import Path

from lab import (
    GENERATED_TASKS,
    METHODS,
    QUICK_METHODS,
    QUICK_TASKS,
    TASKS,
    add_variant,
    compare_table,
    decision_table,
    peer_table,
    run_suite,
)

from dpp.errors import ConfigError, RunInterrupted


def variants(argv) -> None:
    """Registers each ``--variant NAME BASE JSON`` (:func:`lab.add_variant`) before parsing,
    so that ``--methods`` accepts the names."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--variant", nargs=3, action="append", default=[])
    for name, base, parameters in pre.parse_known_args(argv)[0].variant:
        try:
            add_variant(name, base, json.loads(parameters))
        except (ValueError, json.JSONDecodeError) as err:
            raise SystemExit(f"error: --variant {name}: {err}") from None


def main(argv=None) -> int:
    variants(sys.argv[1:] if argv is None else argv)
    names = textwrap.fill(", ".join(METHODS), 96, initial_indent="  ", subsequent_indent="  ")
    tasks = textwrap.fill(", ".join(TASKS), 96, initial_indent="  ", subsequent_indent="  ")
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"tasks:\n{tasks}\n\nmethods (benchmarks/lab/methods.py):\n{names}",
    )  # fmt: skip
    parser.add_argument(
        "--tasks", nargs="+", default=None, choices=list(TASKS), metavar="T",
        help="default: the generated; mil_*: real (.[bench])",
    )  # fmt: skip
    parser.add_argument(
        "--methods", nargs="+", default=None, choices=list(METHODS), metavar="M",
        help="methods to fit (listed below)",
    )  # fmt: skip
    parser.add_argument("--folds", type=int, default=None, help="5 (--quick: 3)")
    parser.add_argument("--draws", type=int, default=None, help="3 (--quick: 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--train-sets", type=int, default=None, metavar="N",
        help="at most N training sets a fold (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, nargs="+", default=[Path("outputs/suite")],
        help="the run folder (--compare, --decide: one or more)",
    )  # fmt: skip
    parser.add_argument("--resume", action="store_true")
    parser.add_argument(
        "--n-jobs", type=int, default=None, help="fits at once in a selection (-1: every core)"
    )
    parser.add_argument("--quick", action="store_true", help="the 15-minute subset")
    parser.add_argument(
        "--variant", nargs=3, action="append", metavar=("N", "B", "J"),
        help="method N: B with the parameters of JSON J",
    )  # fmt: skip
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="A - B from a finished run")
    parser.add_argument("--decide", nargs="+", metavar="R", help="rules R against dpp_mean")
    parser.add_argument(
        "--peers", nargs="+", metavar="METHOD",
        help="the first against the best of the rest",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args.out, *args.compare)
    if args.decide:
        return decide(args.out, args.decide)
    if args.peers:
        records = read_runs(args.out)
        if records is None:
            return 2
        print(peer_table(records, args.peers[0], args.peers[1:]))
        return 0
    if len(args.out) > 1:
        print("error: a run writes into one --out folder", file=sys.stderr)
        return 2
    args.out = args.out[0]
    quick = args.quick
    tasks = args.tasks or list(QUICK_TASKS if quick else GENERATED_TASKS)
    methods = args.methods or list(QUICK_METHODS if quick else METHODS)
    folds = args.folds or (3 if quick else 5)
    draws = args.draws or (1 if quick else 3)
    t0 = time.perf_counter()

    try:  # inside the run, SIGTERM and SIGINT raise RunInterrupted (the Recorder's handlers)
        run_suite(
            args.out, tasks, folds, args.seed, methods, args.resume, draws=draws,
            n_jobs=args.n_jobs, train_sets=args.train_sets,
            log=lambda line: print(line, flush=True),  # progress, also into a redirected file
        )  # fmt: skip
    except ConfigError as err:  # a refused folder or a bad name: one line, nothing written
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (RunInterrupted, KeyboardInterrupt) as err:  # suite.json says "interrupted"
        name = getattr(err, "signal_name", "SIGINT")
        print(f"interrupted by {name}: the finished fits are kept; --resume continues",
              file=sys.stderr)  # fmt: skip
        return 143 if name == "SIGTERM" else 130
    print((args.out / "suite.md").read_text())
    print(f"{time.perf_counter() - t0:.0f} s; files in {args.out}")
    return 0


def read_runs(outs: list[Path]) -> list[dict] | None:
    """The records of every run in ``outs``, each with its ``run`` (the folder) when several.

    ``None``, with a message, when a folder holds no suite run.
    """
    records = []
    for out in outs:
        path = out / "suite.json"
        if not path.is_file():
            print(f"error: no suite run at {path} (run the suite, or pass --out)", file=sys.stderr)
            return None
        run = json.loads(path.read_text())["records"]
        records += [{**r, "run": str(out)} for r in run] if len(outs) > 1 else run
    return records


def decide(outs: list[Path], rules: list[str]) -> int:
    """Prints :func:`lab.decision_table` of ``rules`` from the runs in ``outs``."""
    records = read_runs(outs)
    if records is None:
        return 2
    present = {r["method"] for r in records}
    missing = [m for m in [*rules, "dpp_mean"] if m not in present]
    if missing:
        print(f"error: no records of {missing} in {', '.join(map(str, outs))}; they hold "
              f"{sorted(present)}", file=sys.stderr)  # fmt: skip
        return 2
    print(decision_table(records, rules))
    return 0


def compare(outs: list[Path], a: str, b: str) -> int:
    """Prints ``a - b`` from the suite runs in ``outs``; 2 with a message when it cannot."""
    records = read_runs(outs)
    if records is None:
        return 2
    path = ", ".join(str(out) for out in outs)
    present = {r["method"] for r in records}
    missing = [m for m in (a, b) if m not in present]
    if missing:
        print(
            f"error: {path} has no records of {missing}; it has {sorted(present)}", file=sys.stderr
        )
        return 2
    for metric in ("accuracy", "test_log_likelihood"):
        print(compare_table(records, a, b, metric))
    return 0


if __name__ == "__main__":
    sys.exit(main())
