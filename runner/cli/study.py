"""``runner study KIND ENTRY``: DAWNBench's studies of the metric, each a folder of signed
runs with a JSON summary, PNG plots and report.html (see runner/study). The command parses
its flags into a request, ``runner.study.dispatch.run_study`` runs it, and the command
renders the study's tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable

from runner.cli.argtypes import item_count
from runner.manifest.schema import BACKENDS
from runner.options import ReproduceOptions
from runner.slurm import add_arguments as add_slurm_arguments, options_from_args
from runner.study.dispatch import StudyRequest, run_study
from runner.study.generalization import TRANSFER_TRAIN_ITEMS, Choices
from runner.tasks import TASKS


def run(args) -> int:
    console = Console()
    outcome = run_study(StudyRequest(
        kind=args.kind, entry=args.entry, runs=getattr(args, "runs", None),
        from_runs=getattr(args, "from_runs", None), thresholds=getattr(args, "thresholds", None),
        values=getattr(args, "values", None), batch_size=getattr(args, "batch_size", None),
        include_nonconforming=getattr(args, "include_non_conforming", False),
        generalization=Choices(
            extra_set=getattr(args, "extra_set", None), references=tuple(getattr(args, "reference", None) or ()),
            transfer=not getattr(args, "no_transfer", False), transfer_task=getattr(args, "transfer_task", None),
            transfer_items=getattr(args, "transfer_items", TRANSFER_TRAIN_ITEMS)),
        options=ReproduceOptions(
            smoke=args.smoke, allow_hardware_mismatch=args.allow_hardware_mismatch, backends=args.backend,
            timeout_minutes=args.timeout_minutes, infer=not getattr(args, "no_infer", False),
            loadgen=not args.no_loadgen),
        slurm=options_from_args(args),
    ))
    out = outcome.output
    for table in out.tables:
        shown = RichTable(title=table.title)
        for header in table.headers:
            shown.add_column(header)
        for row in table.rows:
            shown.add_row(*row)
        console.print(shown)
    for note in out.notes:
        console.print(f"[dim]{note}[/]")
    console.print(f"study: {out.folder}\nreport: {outcome.report}")
    code = 0
    if outcome.failed:
        # The study is written either way; the exit status says not every run completed.
        console.print(f"[yellow]{len(outcome.failed)} of {outcome.runs} runs did not complete[/]: "
                      f"{', '.join(outcome.failed)}")
        code = 1
    if outcome.unstudied:
        console.print(f"[yellow]{len(outcome.unstudied)} of {outcome.runs} runs could not be studied[/] "
                      f"(the report says why): {', '.join(outcome.unstudied)}")
        code = 1
    return code


def _common(p, runs_default: int | None = None) -> None:
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--smoke", action="store_true", help="short runs on synthetic data (never conforming)")
    p.add_argument("--allow-hardware-mismatch", action="store_true",
                   help="run on a host that does not match the profile (runs are non-conforming)")
    p.add_argument("--backend", action="append", metavar="B", choices=BACKENDS, help="inference backend (repeatable)")
    p.add_argument("--timeout-minutes", type=float, help="training timeout per run (default: manifest)")
    p.add_argument("--no-loadgen", action="store_true", help="skip LoadGen's runs in each run's inference phase")
    add_slurm_arguments(p)  # the study's runs as Slurm job arrays (docs/cluster.md)
    if runs_default is not None:
        p.add_argument("--runs", type=int, default=runs_default, help=f"runs to make (default {runs_default})")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study", help="DAWNBench's studies of the metric: stability, threshold, batch size, roofline, generalization",
        description="Run an entry for a study of the metric and write results/<entry>/studies/<kind>-<stamp>/ "
        "with its signed runs, summary.json, PNG plots and report.html.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    s = kinds.add_parser("stability", help="N runs with the runner's seeds: TTA, median, CV, curves")
    _common(s, runs_default=5)
    s.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    s.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    s.add_argument("--include-non-conforming", action="store_true",
                   help="count non-conforming runs in the median and CV (by default they are named and left out)")
    t = kinds.add_parser("threshold", help="TTA at a ladder of thresholds, from runs' curves")
    _common(t, runs_default=1)
    t.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    t.add_argument("--thresholds", help="percentages, comma-separated (default: the task's ladder)")
    t.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    b = kinds.add_parser("batch-size", help="one run per global batch size: epochs, throughput, TTA")
    _common(b)
    b.add_argument("--values", required=True, help="batch sizes, comma-separated, e.g. 32,128,512,2048")
    b.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    r = kinds.add_parser("roofline", help="achieved FLOP/s in training and inference against the peak")
    _common(r)
    r.add_argument("--from-runs", nargs="+", metavar="RUN", help="an existing run folder instead of a new run")
    r.add_argument("--batch-size", type=int, help="the run's global batch size (default: the manifest's)")
    g = kinds.add_parser("generalization",
                         help="final models on a second test set (the gap, with its interval) and a linear head "
                              "on their features for another task")
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
    g.add_argument("--transfer-items", type=item_count, default=TRANSFER_TRAIN_ITEMS,
                   help=f"training items of that task the head is fitted on (default {TRANSFER_TRAIN_ITEMS:,})")
    g.add_argument("--no-transfer", action="store_true", help="skip the transfer measure")
    p.set_defaults(func=run)
