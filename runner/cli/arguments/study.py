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


def _runs_made_or_given(p, left_out: str | None = None) -> None:
    """``--from-runs`` (runs already made instead of new ones) and ``--no-infer``; with
    ``left_out`` (what non-conforming runs are left out of), ``--include-non-conforming``."""
    p.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    p.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    if left_out:
        p.add_argument("--include-non-conforming", action="store_true",
                       help=f"count non-conforming runs in the {left_out} (by default they are named and left out)")


def register(p) -> None:
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    s = kinds.add_parser("stability", help="N runs with the runner's seeds: TTA, median, CV, curves",
                         description="Run the entry N times with the runner's seeds (or read existing runs) "
                         "and report each run's TTA, their median and coefficient of variation, and the curves.")
    _common(s, runs_default=5)
    _runs_made_or_given(s, "median and CV")
    t = kinds.add_parser("threshold", help="TTA at a ladder of thresholds, from runs' curves",
                         description="Time-to-accuracy at each threshold of a ladder (the task's, or "
                         "--thresholds), read from the runs' curves.")
    _common(t, runs_default=1)
    _runs_made_or_given(t)
    t.add_argument("--thresholds", help="percentages, comma-separated (default: the task's ladder)")
    b = kinds.add_parser("batch-size", help="one run per global batch size: epochs, throughput, TTA",
                         description="One run per global batch size: epochs to the threshold, "
                         "throughput and TTA at each.")
    _common(b)
    b.add_argument("--values", required=True, help="batch sizes, comma-separated, e.g. 32,128,512,2048")
    b.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    for mode, what, description in (
            ("lesion", "the full recipe and each declared switch off alone: TTA per variant",
             "Run the full recipe and the recipe with each switch its entry.yaml declares turned off alone "
             "(N runs each, seeds the runner draws): median TTA, spread, fraction reached and accuracy at the "
             "full recipe's TTA per variant."),
            ("factors", "from every declared switch off, each added back in order: TTA per step",
             "The factor analysis: from the recipe with every declared switch off, add the switches back one "
             "at a time in the manifest's order, ending at the full recipe; the lesion's figures per step.")):
        m = kinds.add_parser(mode, help=what, description=description)
        _common(m, runs_default=3)
        m.add_argument("--switches", metavar="A,B", help="the declared switches to study (default: all, in order)")
        _runs_made_or_given(m, "figures")
    c = kinds.add_parser("scaling", help="TTA and time per epoch against processes on one host and Slurm nodes",
                         description="TTA and time per epoch at 1, 2, 4 ... processes on one host and, with "
                         "--slurm, across Slurm nodes: speed-up and efficiency against one process, and the "
                         "entry's communication time where it logs it.")
    _common(c, runs_default=1)
    c.add_argument("--processes", default="1,2", help="processes on one host, comma-separated (default 1,2)")
    c.add_argument("--nodes", help="Slurm nodes with one process each, comma-separated, e.g. 1,2 (needs --slurm)")
    _runs_made_or_given(c)
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
    _runs_made_or_given(g)
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
