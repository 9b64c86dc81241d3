"""``runner reproduce ENTRY``: build, train, score, infer, fingerprint, sign."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from runner.cli.records import print_results
from runner.engine.host import UNSANDBOXED_ENV
from runner.engine.kinds import ENV_VAR, current
from runner.errors import UserError
from runner.inference.loadgen import MLPERF_PROFILE
from runner.options import ReproduceOptions
from runner.plan import LOCAL, SLURM, make_plan, plan_of_task
from runner.report import Reporter, reporting
from runner.reproduce import launch
from runner.results.layout import short_id
from runner.results.record import Result
from runner.results.runs import write_runs_summary
from runner.slurm import options_from_args
from runner.terminal import fmt, json_text, whole


def loadgen_option(args) -> bool | str:
    """``ReproduceOptions.loadgen``: False (--no-loadgen), "mlperf" (--loadgen-mlperf) or
    True (the default settings, a few seconds beside the per-item pass)."""
    if getattr(args, "no_loadgen", False):
        return False
    return MLPERF_PROFILE if getattr(args, "loadgen_mlperf", False) else True


def run(args) -> int:
    console = Console()
    choose_engine(args.engine, args.unsandboxed)
    opts = ReproduceOptions(
        runs=args.runs, seed=args.seed, smoke=args.smoke,
        allow_hardware_mismatch=args.allow_hardware_mismatch,
        allow_contended=args.allow_contended, calm_timeout_s=args.calm_timeout,
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
        return print_json(folders, args.trusted_keys)
    print_results(console, folders)
    if len(folders) > 1:
        s, summary = write_runs_summary(folders)
        console.print(
            f"{s.reached}/{s.runs} runs reached the threshold; median TTA "
            f"{fmt(s.median, '.2f')} s; coefficient of variation {fmt(s.cv, '.3f')}"
        )
        console.print(f"summary of the runs: {summary}", highlight=False)
    if not args.no_sign:
        print_verdicts(console, folders, args.trusted_keys)
    statuses = [Result.read(f).status for f in folders]
    for parent in dict.fromkeys(f.parent for f in folders):
        names = ", ".join(short_id(f.name) for f in folders if f.parent == parent)
        console.print(f"results {names} (`runner show {short_id(folders[-1].name)}` for one) in:", highlight=False)
        console.print(whole(f"{parent}/"), soft_wrap=True)  # the folder whole, never folded
    return 0 if all(s == "complete" for s in statuses) else 1


def choose_engine(engine: str | None, unsandboxed: bool) -> None:
    """``--engine``/``--unsandboxed``: this command's engine (and every process it starts: a
    Slurm task inherits the environment), without changing the host's choice."""
    if engine:
        os.environ[ENV_VAR] = engine
    if unsandboxed:
        if current().name != "host":
            raise UserError("--unsandboxed is for the host engine only",
                            "add --engine host, or leave --unsandboxed out")
        os.environ[UNSANDBOXED_ENV] = "1"


def print_verdicts(console: Console, folders: list[Path], trusted: str | None) -> None:
    """What ``runner verify`` says of each signed run, one line each, judged now (the verdict is
    then cached, so ``runner ls`` and the leaderboard read it at once)."""
    from rich.markup import escape  # lazy: start-up (with the verifier)

    from runner.errors import UserError  # lazy: start-up (with the verifier)
    from runner.keys.trust import trusted_keys  # lazy: start-up (verify's modules)
    from runner.runs import judge  # lazy: start-up (verify's modules)

    try:
        keys = trusted_keys(trusted)
    except UserError as err:
        console.print(f"[yellow]verdict not judged[/]: {escape(err.problem)}", highlight=False)
        return
    for folder in folders:
        verdict = judge(folder, keys)
        style = "green" if verdict.counts else "yellow" if verdict.verified else "red"
        console.print(f"verdict {short_id(folder.name)}: [{style}]{escape(verdict.summary)}[/]", highlight=False)


def print_json(folders: list[Path], trusted: str | None = None) -> int:
    """The runs as ``runner ls --json`` lists them (full run ids, folders), and their summary;
    verified against ``trusted`` (``--trusted-keys``), as ``runner ls`` judges them."""
    from runner.keys.trust import trusted_keys  # lazy: start-up (verify's modules)
    from runner.runs import judge, read_result, row_of  # lazy: start-up (verify's modules)

    keys = trusted_keys(trusted)
    rows = [row_of(f, read_result(f), judge(f, keys)) for f in folders]
    summary = write_runs_summary(folders)[1] if len(folders) > 1 else None
    print(json_text({"runs": [r.to_dict() for r in rows], "summary": None if summary is None else str(summary)},
                     indent=2))
    return 0 if all(r.status == "complete" for r in rows) else 1
