"""``runner study KIND ENTRY``: DAWNBench's studies of the metric, each a folder of signed
runs with a JSON summary, PNG plots and report.html (see runner/study). The command parses
its flags into a request, ``runner.study.dispatch.run_study`` runs it, and the command
renders the study's tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable

from runner.manifest.schema import BACKENDS
from runner.options import ReproduceOptions
from runner.slurm import add_arguments as add_slurm_arguments, options_from_args
from runner.study.dispatch import StudyRequest, run_study


def run(args) -> int:
    console = Console()
    outcome = run_study(StudyRequest(
        kind=args.kind, entry=args.entry, runs=getattr(args, "runs", None),
        from_runs=getattr(args, "from_runs", None), thresholds=getattr(args, "thresholds", None),
        values=getattr(args, "values", None), batch_size=getattr(args, "batch_size", None),
        include_nonconforming=getattr(args, "include_non_conforming", False),
        switches=getattr(args, "switches", None), processes=getattr(args, "processes", None),
        nodes=getattr(args, "nodes", None),
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
    if outcome.failed:
        # The study is written either way; the exit status says not every run completed.
        console.print(f"[yellow]{len(outcome.failed)} of {outcome.runs} runs did not complete[/]: "
                      f"{', '.join(outcome.failed)}")
        return 1
    return 0


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


def _runs_made_or_given(p, left_out: str | None = None) -> None:
    """``--from-runs`` (runs already made instead of new ones) and ``--no-infer``; with
    ``left_out`` (what non-conforming runs are left out of), ``--include-non-conforming``."""
    p.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    p.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    if left_out:
        p.add_argument("--include-non-conforming", action="store_true",
                       help=f"count non-conforming runs in the {left_out} (by default they are named and left out)")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study", help="DAWNBench's studies: stability, threshold, batch size, roofline, lesion, factors, scaling",
        description="Run an entry for a study of the metric and write results/<entry>/studies/<kind>-<stamp>/ "
        "with its signed runs, summary.json, PNG plots and report.html.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    s = kinds.add_parser("stability", help="N runs with the runner's seeds: TTA, median, CV, curves")
    _common(s, runs_default=5)
    _runs_made_or_given(s, "median and CV")
    t = kinds.add_parser("threshold", help="TTA at a ladder of thresholds, from runs' curves")
    _common(t, runs_default=1)
    _runs_made_or_given(t)
    t.add_argument("--thresholds", help="percentages, comma-separated (default: the task's ladder)")
    b = kinds.add_parser("batch-size", help="one run per global batch size: epochs, throughput, TTA")
    _common(b)
    b.add_argument("--values", required=True, help="batch sizes, comma-separated, e.g. 32,128,512,2048")
    b.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
    for mode, what in (("lesion", "the full recipe and each declared switch off alone: TTA per variant"),
                       ("factors", "from every declared switch off, each added back in order: TTA per step")):
        m = kinds.add_parser(mode, help=what)
        _common(m, runs_default=3)
        m.add_argument("--switches", metavar="A,B", help="the declared switches to study (default: all, in order)")
        _runs_made_or_given(m, "figures")
    c = kinds.add_parser("scaling", help="TTA and time per epoch against processes on one host and Slurm nodes")
    _common(c, runs_default=1)
    c.add_argument("--processes", default="1,2", help="processes on one host, comma-separated (default 1,2)")
    c.add_argument("--nodes", help="Slurm nodes with one process each, comma-separated, e.g. 1,2 (needs --slurm)")
    _runs_made_or_given(c)
    r = kinds.add_parser("roofline", help="achieved FLOP/s in training and inference against the peak")
    _common(r)
    r.add_argument("--from-runs", nargs="+", metavar="RUN", help="an existing run folder instead of a new run")
    r.add_argument("--batch-size", type=int, help="the run's global batch size (default: the manifest's)")
    p.set_defaults(func=run)
