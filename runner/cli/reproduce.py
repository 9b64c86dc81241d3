"""``runner reproduce ENTRY``: build, train, score, infer, fingerprint, sign."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner.claims import Comparison, result_claim
from runner.cli import argtypes
from runner.inference.loadgen import MLPERF_PROFILE, claims_mlperf_minimums
from runner.manifest.schema import BACKENDS
from runner.options import ReproduceOptions
from runner.plan import LOCAL, SLURM, make_plan, plan_of_task
from runner.reproduce import launch
from runner.results.inference import BackendRun
from runner.results.record import Result
from runner.results.runs import write_runs_summary
from runner.slurm import add_arguments as add_slurm_arguments, options_from_args


def _fmt(value, spec: str, missing: str = "--") -> str:
    return missing if value is None else format(value, spec)


def loadgen_cells(run: BackendRun) -> tuple[str, str, str]:
    """LoadGen SingleStream p50/p90 (ms) and Offline samples/s, '--' where it did not run."""
    lg = run.loadgen or {}
    single = lg.get("single_stream") or {}
    offline = lg.get("offline") or {}
    return (_fmt(single.get("p50_ms"), ".3f"), _fmt(single.get("p90_ms"), ".3f"),
            _fmt(offline.get("samples_per_s"), ".0f"))


def loadgen_problems(run: BackendRun) -> list[str]:
    lg = run.loadgen or {}
    if lg.get("error"):
        return [lg["error"]]
    return [f"{scenario}: {(lg.get(scenario) or {}).get('problem')}" for scenario in ("single_stream", "offline")
            if (lg.get(scenario) or {}).get("problem")]


def loadgen_settings_line(run: BackendRun) -> str | None:
    """The LoadGen settings a backend ran with, in one line (None when LoadGen did not run)."""
    settings = (run.loadgen or {}).get("settings")
    if not isinstance(settings, dict):
        return None

    def seconds(ms):
        return f"{ms / 1000:g} s"

    def cap(ms):
        return f"at most {seconds(ms)}" if ms else "no maximum"

    mlperf = ("MLPerf's minimums" if claims_mlperf_minimums(run.loadgen)
              else "below MLPerf's minimums (--loadgen-mlperf restores them)")
    return (f"{settings.get('profile', 'dawnbench (before profiles)')}: SingleStream at least "
            f"{settings.get('single_stream_min_query_count')} queries and "
            f"{seconds(settings.get('single_stream_min_duration_ms'))}, "
            f"{cap(settings.get('single_stream_max_duration_ms'))}; Offline at least "
            + (f"{samples} samples and " if (samples := settings.get("offline_min_query_count", 1)) > 1 else "")
            + f"{seconds(settings.get('offline_min_duration_ms'))}, "
            f"{cap(settings.get('offline_max_duration_ms'))}; {mlperf}")


def loadgen_option(args) -> bool | str:
    """``ReproduceOptions.loadgen``: False (--no-loadgen), "mlperf" (--loadgen-mlperf) or
    True (the default settings, a few seconds beside the per-item pass)."""
    if getattr(args, "no_loadgen", False):
        return False
    return MLPERF_PROFILE if getattr(args, "loadgen_mlperf", False) else True


def _energy_cell(energy: dict | None) -> str:
    """Joules-to-accuracy, or "not measured" (the reasons are in result.json's energy)."""
    training = (energy or {}).get("training") or {}
    value = training.get("joules_to_accuracy")
    if isinstance(value, (int, float)):
        return f"{value:.1f}"
    return "not measured" if not ((training.get("window") or {}).get("measured")) else "-"


def claim_line(folder, result: Result, claimed: dict, tta: float) -> str:
    """The measurement beside the claim, compared only on a host of the claim's profile
    (``runner.claims.result_claim``: the rule the leaderboard and compare use too)."""
    applies = result_claim(folder) or Comparison((result.hardware or {}).get("profile") or "", False,
                                                 ("the run has no fingerprint",), claimed.get("tta_seconds"))
    return applies.line(None, tta, result.run_id) + _resolution(result.training)


def evidence_line(r) -> str | None:
    """The work to the crossing against one forward pass over the training set (class 4f)."""
    e = r.training.evidence if r.training else None
    if not isinstance(e, dict) or e.get("ratio") is None:
        return None
    return (f"evidence of training {r.run_id}: {e['cpu_seconds']:.2f} CPU-s to the crossing, "
            f"{e['ratio']:.2f}x one forward pass over {e['train_items']} training items "
            f"({e['forward_pass_cpu_seconds']:.2f} CPU-s; floor {e['fraction']:g}x)")


def _resolution(training) -> str:
    """Beside the TTA: the step the entry's evaluations time it in (runner.score.tta)."""
    step = training.tta_resolution_seconds if training and training.reached else None
    return "" if step is None else f" (resolution {step:.1f} s)"


def print_results(console: Console, folders) -> None:
    results = [Result.read(folder) for folder in folders]
    table = Table(title="runs")
    table.add_column("run", no_wrap=True)
    for col in ("status", "reached", "TTA s", "cost $", "J to accuracy", "launch s", "conforming"):
        table.add_column(col)
    for r in results:
        t = r.training
        table.add_row(
            r.run_id, r.status, str(bool(t and t.reached)),
            _fmt(t and t.tta_seconds, ".2f") + _resolution(t), _fmt(r.cost and r.cost.training_usd, ".6f"),
            _energy_cell(r.energy), _fmt(t and t.launch_seconds, ".2f"), "yes" if r.conforming else "no",
        )
    console.print(table)
    last = results[-1]
    if last.inference:
        inf = Table(title="inference (batch 1, every evaluation item)")
        for col in ("backend", "gate", "score %", "mean ms", "p50", "p90", "p99", "$ / 10k", "J / 10k",
                    "LoadGen p50", "LoadGen p90", "LoadGen offline /s"):
            inf.add_column(col)
        for name, b in last.inference.items():
            lat = b.latency_ms or {}
            score = b.score(last.task.metric)
            inf.add_row(
                name, "pass" if b.passed_gate else "fail",
                _fmt(score * 100 if score is not None else None, ".2f"),
                _fmt(lat.get("mean"), ".3f"), _fmt(lat.get("p50"), ".3f"),
                _fmt(lat.get("p90"), ".3f"), _fmt(lat.get("p99"), ".3f"),
                _fmt(b.cost_per_10k_usd, ".6f"),
                _fmt(b.joules_per_10k, ".1f"), *loadgen_cells(b),
            )
        console.print(inf)
        for name, b in last.inference.items():
            if not b.passed_gate:
                console.print(f"[yellow]no latency claim[/] for {name}: {b.gate_reason}")
            for problem in loadgen_problems(b):
                console.print(f"[yellow]LoadGen[/] {name}: {problem}")
        shown = {line for b in last.inference.values() if (line := loadgen_settings_line(b))}
        for line in sorted(shown):
            console.print(f"LoadGen settings {line}")
    claimed = last.entry.claimed or {}
    for folder, r in zip(folders, results):
        tta = r.training.tta_seconds if r.training else None
        if claimed.get("tta_seconds") and tta is not None and not r.smoke:
            console.print(claim_line(folder, r, claimed, tta), highlight=False)
        if line := evidence_line(r):
            console.print(line, highlight=False)
        if not r.conforming:
            console.print(f"[yellow]non-conforming[/] {r.run_id}: " + "; ".join(r.nonconforming_reasons))
        if r.incomplete_reason:
            console.print(f"[red]{r.status}[/] {r.run_id}: {r.incomplete_reason}")


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
    folders = launch(plan, slurm)
    print_results(console, folders)
    if len(folders) > 1:
        s, summary = write_runs_summary(folders)
        console.print(
            f"{s.reached}/{s.runs} runs reached the threshold; median TTA "
            f"{_fmt(s.median, '.2f')} s; coefficient of variation {_fmt(s.cv, '.3f')}"
        )
        console.print(f"summary of the runs: {summary}")
    statuses = [Result.read(f).status for f in folders]
    console.print(f"results: {', '.join(str(f) for f in folders)}")
    return 0 if all(s == "complete" for s in statuses) else 1


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
    p.add_argument("--no-sign", action="store_true",
                   help="leave the result unsigned (Slurm tasks: the submit host signs)")
    add_slurm_arguments(p)
    # A Slurm array task's run: the submitter's plan (runner.slurm.submit), with --seed.
    p.add_argument("--plan", type=Path, help=argparse.SUPPRESS)
    p.set_defaults(func=run)
