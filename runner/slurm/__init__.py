"""Reproductions fanned out over a Slurm cluster: one job array task per run.

``reproduce_on_slurm`` is the Slurm placement of ``runner.reproduce.launch``: it takes the
plan's seeds, skips those already complete in the shared results folder, submits the rest
as one job array whose tasks each read the plan (``submit``), follows it (``follow``), and
gathers and records the results on this host (``gather``; ``runner.reproduce.launch`` signs
them once they are compared across seeds). It returns the run folders in seed
order, like a local ``--runs N``.
"""

from __future__ import annotations


from pathlib import Path


from runner import paths
from runner.engine import get_engine
from runner.engine.kinds import current, implementation
from runner.entry_build import build_entry
from runner.keys import load_signer
from runner.run.allocation import require_network_setting
from runner.slurm.commands import require_tools
from runner.slurm.follow import follow, node_of
from runner.slurm.gather import complete_runs, gather, run_folders
from runner.plan import RunPlan
from runner.results.layout import entry_dir as runs_dir
from runner.results.record import Result
from runner.slurm.submit import JobArray, SlurmOptions, submit
from runner.report import reporter

__all__ = ["JobArray", "SlurmOptions", "options_from_args", "reproduce_on_slurm"]


def reproduce_on_slurm(plan: RunPlan, options: SlurmOptions, resume: bool = True) -> list[tuple[Path, Result]]:
    """Each seed's run folder and its record (a gathered run's, Slurm's part added in memory,
    to be finished and signed by ``runner.reproduce.finish_runs``). ``resume``: skip seeds
    already complete in the results folder (drift reruns do not)."""
    require_tools()  # before anything is written
    entry = plan.entry
    if entry.nodes > 1:
        require_network_setting(entry.nodes)  # the tasks inherit this environment (--export=ALL)
    load_signer()  # a misconfigured key fails here, before any job is submitted
    # The submitter's plan drew the seeds (never the entry); pass --seed to resubmit the same runs.
    seeds = list(plan.seeds)
    entry_dir = runs_dir(paths.results_dir(), entry.name, plan.smoke)  # smoke runs apart
    done = complete_runs(entry_dir, seeds, plan.smoke, plan.variant) if resume else {}
    folders = {seed: (folder, Result.read(folder)) for seed, folder in done.items()}
    if folders:
        reporter().print(f"already complete, not submitted again: seed(s) "
                      f"{', '.join(map(str, sorted(folders)))}")
    pending = [s for s in seeds if s not in folders]
    if pending:
        build_for_the_nodes(plan)
        before = run_folders(entry_dir)
        job = submit(plan, pending, options or SlurmOptions())
        reporter().print(f"[bold]slurm[/] job array {job.job_id}: {len(pending)} run(s), seeds "
                      f"{', '.join(map(str, pending))}; results in {paths.results_dir()}, "
                      f"job files in {job.folder}")
        states = follow(job)
        nodes = {i: node_of(job, i) for i in states}
        folders.update(gather(job, states, nodes, entry, entry_dir, before, plan.smoke))
    return [folders[s] for s in seeds]


def build_for_the_nodes(plan: RunPlan) -> None:
    """Build the entry's image here, once, before submitting, when the engine keeps its images
    under RUNNER_HOME (``Engine.images_in_runner_home``: Charliecloud), which the nodes share
    like the results: every task then finds the image by its tag (its log says "cache hit")
    instead of the first task building it while the others wait on the entry's build lock,
    and a build that fails does so here, before any job is queued. An engine whose images
    are each node's own (Docker, Podman) builds on the nodes, and this host needs no engine."""
    if not implementation(current()).images_in_runner_home:
        return
    engine = get_engine()
    try:
        reporter().print(f"[bold]build[/] {plan.entry.name} (base {plan.entry.base_image}) on this host, "
                         f"for the tasks: the {engine.name} engine's images are under {paths.home()}")
        built = build_entry(plan.entry, engine)
        reporter().print(f"  image {built.image_id[:19]}  {'cache hit' if built.cached else 'built'} "
                         f"in {built.seconds:.1f} s")
    finally:
        engine.close()


def options_from_args(args) -> SlurmOptions | None:
    """SlurmOptions when --slurm was given, else None (run here); the flags are
    ``runner.cli.arguments.slurm``'s."""
    return SlurmOptions(args.partition, list(args.slurm_arg)) if args.slurm else None
