"""``runner study KIND ENTRY``: DAWNBench's studies of the metric, each a folder of signed
runs with a JSON summary, PNG plots and report.html (see runner/study)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from runner.errors import UserError
from runner.manifest import load_entry
from runner.reproduce import ReproduceOptions
from runner.results.record import Result
from runner.study import batch_size, roofline, stability, threshold
from runner.study.common import check_run_folders
from runner.study.report import write_report


def _options(args) -> ReproduceOptions:
    return ReproduceOptions(
        smoke=args.smoke, allow_hardware_mismatch=args.allow_hardware_mismatch,
        backends=args.backend, timeout_minutes=args.timeout_minutes,
        infer=not getattr(args, "no_infer", False), loadgen=not args.no_loadgen,
        # Curves past the crossing: stability plots them, the threshold ladder reads them.
        full_curve=args.kind in ("stability", "threshold"),
    )


def _given_runs(args) -> list[Path]:
    folders = check_run_folders(args.from_runs)
    name = load_entry(args.entry).name
    for folder in folders:
        if (other := Result.read(folder).entry.name) != name:
            raise UserError(f"{folder} is a run of {other}, not of {name}", f"pass runs under results/{name}/")
    return folders


def _thresholds(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not 0 < v <= 100 for v in values):
        raise UserError(f"--thresholds {text!r} is not a list of percentages",
                        "give numbers in (0, 100] separated by commas, e.g. --thresholds 98.5,99,99.3,99.5")
    return values


def run(args) -> int:
    console = Console()
    opts = _options(args)
    if args.kind == "stability":
        out = (stability.study(_given_runs(args)) if args.from_runs
               else stability.run(args.entry, args.runs, opts, console))
    elif args.kind == "threshold":
        ladder = _thresholds(args.thresholds)
        out = (threshold.study(_given_runs(args), ladder) if args.from_runs
               else threshold.run(args.entry, args.runs, opts, console, ladder))
    elif args.kind == "batch-size":
        out = batch_size.run(args.entry, batch_size.parse_values(args.values), opts, console)
    else:
        if args.from_runs and len(args.from_runs) != 1:
            raise UserError("the roofline study reads one run", "pass one run folder to --from-runs")
        out = (roofline.study(_given_runs(args)[0], args.batch_size, console) if args.from_runs
               else roofline.run(args.entry, opts, console, args.batch_size))
    report = write_report(out)
    for table in out.tables:
        shown = RichTable(title=table.title)
        for header in table.headers:
            shown.add_column(header)
        for row in table.rows:
            shown.add_row(*row)
        console.print(shown)
    for note in out.notes:
        console.print(f"[dim]{note}[/]")
    console.print(f"study: {out.folder}\nreport: {report}")
    runs = [Result.read(link) for link in sorted((out.folder / "runs").iterdir())]
    if failed := [r.run_id for r in runs if r.status != "complete"]:
        # The study is written either way; the exit status says not every run completed.
        console.print(f"[yellow]{len(failed)} of {len(runs)} runs did not complete[/]: {', '.join(failed)}")
        return 1
    return 0


def _common(p, runs_default: int | None = None) -> None:
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--smoke", action="store_true", help="short runs on synthetic data (never conforming)")
    p.add_argument("--allow-hardware-mismatch", action="store_true",
                   help="run on a host that does not match the profile (runs are non-conforming)")
    p.add_argument("--backend", action="append", metavar="B", help="inference backend (repeatable)")
    p.add_argument("--timeout-minutes", type=float, help="training timeout per run (default: manifest)")
    p.add_argument("--no-loadgen", action="store_true", help="skip LoadGen's runs in each run's inference phase")
    if runs_default is not None:
        p.add_argument("--runs", type=int, default=runs_default, help=f"runs to make (default {runs_default})")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study", help="DAWNBench's studies of the metric: stability, threshold, batch size, roofline",
        description="Run an entry for a study of the metric and write results/<entry>/studies/<kind>-<stamp>/ "
        "with its signed runs, summary.json, PNG plots and report.html.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    s = kinds.add_parser("stability", help="N runs with the runner's seeds: TTA, median, CV, curves")
    _common(s, runs_default=5)
    s.add_argument("--from-runs", nargs="+", metavar="RUN", help="existing run folders instead of new runs")
    s.add_argument("--no-infer", action="store_true", help="skip the inference phase of each run")
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
    p.set_defaults(func=run)
