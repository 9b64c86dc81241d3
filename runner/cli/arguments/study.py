"""``runner study``'s arguments: one action per kind of study."""

from __future__ import annotations

from runner.cli import argtypes
from runner.cli.arguments import slurm
from runner.tasks import TASKS

DESCRIPTION = ("Run an entry for a study of the metric and write results/<entry>/studies/<kind>-<stamp>/ "
               "with its signed runs, summary.json, PNG plots and report.html.")


def _common(p, runs_default: int | None = None) -> None:
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--smoke", action="store_true", help="short runs on synthetic data (never conforming)")
    p.add_argument("--allow-hardware-mismatch", action="store_true",
                   help="run on a host that does not match the profile (runs are non-conforming)")
    p.add_argument("--backend", action="append", metavar="B", type=argtypes.backend,
                   help="inference backend (repeatable)")
    p.add_argument("--timeout-minutes", type=float, help="training timeout per run (default: manifest)")
    p.add_argument("--no-loadgen", action="store_true", help="skip LoadGen's runs in each run's inference phase")
    slurm.add_arguments(p)  # the study's runs as Slurm job arrays (docs/cluster.md)
    if runs_default is not None:
        p.add_argument("--runs", type=int, default=runs_default, help=f"runs to make (default {runs_default})")


def register(p) -> None:
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    s = kinds.add_parser("stability", help="N runs with the runner's seeds: TTA, median, CV, curves",
                         description="Run the entry N times with the runner's seeds (or read existing runs) "
                         "and report each run's TTA, their median and coefficient of variation, and the curves.")
    _common(s, runs_default=5)
    s.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    s.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    s.add_argument("--include-non-conforming", action="store_true",
                   help="count non-conforming runs in the median and CV (by default they are named and left out)")
    t = kinds.add_parser("threshold", help="TTA at a ladder of thresholds, from runs' curves",
                         description="Time-to-accuracy at each threshold of a ladder (the task's, or "
                         "--thresholds), read from the runs' curves.")
    _common(t, runs_default=1)
    t.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    t.add_argument("--thresholds", help="percentages, comma-separated (default: the task's ladder)")
    t.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    b = kinds.add_parser("batch-size", help="one run per global batch size: epochs, throughput, TTA",
                         description="One run per global batch size: epochs to the threshold, "
                         "throughput and TTA at each.")
    _common(b)
    b.add_argument("--values", required=True, help="batch sizes, comma-separated, e.g. 32,128,512,2048")
    b.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    r = kinds.add_parser("roofline", help="achieved FLOP/s in training and inference against the peak",
                         description="The FLOP/s a run achieved in training and in inference, against "
                         "the hardware's peak.")
    _common(r)
    r.add_argument("--from-runs", nargs="+", metavar="RUN", help="an existing run folder instead of a new run")
    r.add_argument("--batch-size", type=int, help="the run's global batch size (default: the manifest's)")
    g = kinds.add_parser("generalization",
                         help="final models on a second test set (the gap, with its interval) and a linear head "
                              "on their features for another task",
                         description="Score each run's final model on the task's second test set (QMNIST, "
                         "CIFAR-10.1, ImageNetV2) with the runner's evaluator, the gap with its interval, and a "
                         "linear head on the model's penultimate features for another task against the same "
                         "head on a randomly initialised copy.")
    _common(g, runs_default=1)
    g.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    g.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    g.add_argument("--extra-set", metavar="NAME", help="the second test set (default: the task's first; "
                   "`runner data import NAME` stages it)")
    g.add_argument("--reference", action="append", metavar="NAME=ORIG,NEW|RUN",
                   help="a reference model: its accuracies in percent on the original and the new set, or a run "
                        "folder (of any entry of the task) whose final model is evaluated the same way; repeatable")
    g.add_argument("--transfer-task", choices=sorted(TASKS), metavar="TASK",
                   help="the task the linear head is trained for (default: the task's declared one, else a staged "
                        "task of the same input shape)")
    # default: runner.study.generalization.TRANSFER_TRAIN_ITEMS (not imported here: numpy, for --help)
    g.add_argument("--transfer-items", type=argtypes.item_count,
                   help="training items of that task the head is fitted on (default 10,000)")
    g.add_argument("--no-transfer", action="store_true", help="skip the transfer measure")
