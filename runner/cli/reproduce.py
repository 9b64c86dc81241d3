"""``runner reproduce ENTRY``: build, train, score, infer, fingerprint, sign."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from runner.cli import argtypes
from runner.cli.records import print_results
from runner.inference.loadgen import MLPERF_PROFILE
from runner.manifest.schema import BACKENDS
from runner.options import ReproduceOptions
from runner.plan import LOCAL, SLURM, make_plan, plan_of_task
from runner.report import Reporter, reporting
from runner.reproduce import launch
from runner.results.layout import short_id
from runner.results.record import Result
from runner.results.runs import write_runs_summary
from runner.slurm import add_arguments as add_slurm_arguments, options_from_args
from runner.terminal import fmt


def loadgen_option(args) -> bool | str:
    """``ReproduceOptions.loadgen``: False (--no-loadgen), "mlperf" (--loadgen-mlperf) or
    True (the default settings, a few seconds beside the per-item pass)."""
    if getattr(args, "no_loadgen", False):
        return False
    return MLPERF_PROFILE if getattr(args, "loadgen_mlperf", False) else True


def run(args) -> int:
    console = Console()
    opts = ReproduceOptions(
        runs=args.runs, seed=args.seed, smoke=args.smoke,
        allow_hardware_mismatch=args.allow_hardware_mismatch,
        backends=args.backend, timeout_minutes=args.timeout_minutes, infer=not args.no_infer,
        sign=not args.no_sign, full_curve=args.full_curve, loadgen=loadgen_option(args),
        verbose=args.verbose,
    )
    slurm = options_from_args(args)
    if args.plan:  # a Slurm array task: the submitter's plan, for this task's seed
        plan = plan_of_task(args.plan, args.seed)
    else:
        plan = make_plan(args.entry, opts, SLURM if slurm else LOCAL)
    # This command's own reporter: a warning every run would repeat is said once; with --json
    # stdout is the JSON's alone and the progress goes to stderr.
    with reporting(Reporter(Console(stderr=True) if args.json else None)):
        folders = launch(plan, slurm)
    if args.json:
        return print_json(folders)
    print_results(console, folders)
    if len(folders) > 1:
        s, summary = write_runs_summary(folders)
        console.print(
            f"{s.reached}/{s.runs} runs reached the threshold; median TTA "
            f"{fmt(s.median, '.2f')} s; coefficient of variation {fmt(s.cv, '.3f')}"
        )
        console.print(f"summary of the runs: {summary}", highlight=False)
    statuses = [Result.read(f).status for f in folders]
    for parent in dict.fromkeys(f.parent for f in folders):
        names = ", ".join(short_id(f.name) for f in folders if f.parent == parent)
        console.print(f"results in {parent}/: {names} (`runner show {short_id(folders[-1].name)}` for one)",
                      highlight=False)
    return 0 if all(s == "complete" for s in statuses) else 1


def print_json(folders: list[Path]) -> int:
    """The runs as ``runner ls --json`` lists them (full run ids, folders), and their summary."""
    import json  # lazy: only for --json

    from runner import paths  # lazy: as above
    from runner.runs import read_result, row_of  # lazy: signature checks import verify's modules
    from runner.verify.trust import default_trusted_keys  # lazy: as above

    keys = default_trusted_keys(None, paths.results_dir())
    rows = [row_of(f, read_result(f), keys) for f in folders]
    summary = write_runs_summary(folders)[1] if len(folders) > 1 else None
    print(json.dumps({"runs": [r.to_dict() for r in rows], "summary": None if summary is None else str(summary)},
                     indent=2))
    return 0 if all(r.status == "complete" for r in rows) else 1


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "reproduce", help="build an entry, train and infer in its container, sign the result",
        description="Build ENTRY's image, run training then inference inside it, keep the "
        "clock and the score on the host, fingerprint the hardware and write a signed result.",
    )
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--runs", type=argtypes.run_count, help="repeat with seeds seed, seed+1, ... (default: manifest)")
    p.add_argument("--seed", type=argtypes.seed,
                   help="first seed, the auditor's to fix (default: the runner draws one at random)")
    p.add_argument("--smoke", action="store_true",
                   help="one short epoch on synthetic data, on CPU; never conforming")
    p.add_argument("--allow-hardware-mismatch", action="store_true",
                   help="run on a host that does not match the profile; marks the result non-conforming")
    p.add_argument("--backend", action="append", metavar="B", choices=BACKENDS,
                   help="inference backend (repeatable; default: the manifest's)")
    p.add_argument("--timeout-minutes", type=argtypes.timeout_minutes, help="training timeout (default: manifest)")
    p.add_argument("--no-infer", action="store_true", help="skip the inference phase")
    p.add_argument("--full-curve", action="store_true",
                   help="evaluate every checkpoint, also after the crossing (default: stop evaluating there)")
    loadgen = p.add_mutually_exclusive_group()
    loadgen.add_argument("--no-loadgen", action="store_true",
                         help="skip LoadGen's SingleStream and Offline runs (the per-item latency pass stays)")
    loadgen.add_argument("--loadgen-mlperf", action="store_true",
                         help="run LoadGen with MLPerf Inference's minimums (600 s per scenario, SingleStream "
                              "1024 queries, Offline 24,576 samples), as a result claiming MLPerf compliance "
                              "needs (default: about a second per scenario beside the DAWNBench per-item figure)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print where each run's time went (its result's timings section)")
    p.add_argument("--json", action="store_true",
                   help="print the runs as JSON at the end (full run ids, folders); progress goes to stderr")
    p.add_argument("--no-sign", action="store_true",
                   help="leave the result unsigned (Slurm tasks: the submit host signs)")
    add_slurm_arguments(p)
    # A Slurm array task's run: the submitter's plan (runner.slurm.submit), with --seed.
    p.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
    p.set_defaults(func=run)
