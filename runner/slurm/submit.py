"""Submit one Slurm job array: one task per run, each an ordinary ``runner reproduce``.

The submitter's run plan chose the seeds; it writes the plan (``plan.json``) and the seeds,
one a line, into ``seeds.txt`` next to the job script; task ``i`` of the array reads line
``i + 1`` and runs the plan for that seed (``runner.plan.plan_of_task``). Every task runs on its node with
that node's engine (the submitter's environment reaches it, ``RUNNER_ENGINE`` and ``RUNNER_HOME``
included: ``--export=ALL``), writes into the shared results folder (``RUNNER_RESULTS``) and
signs nothing (``--no-sign``): the submit host signs what it gathers.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from runner import paths
from runner.plan import PLAN_FILE, RunPlan
from runner.slurm.commands import slurm

# How a compute node starts the runner; default: this Python, from the shared checkout.
COMMAND_ENV = "RUNNER_SLURM_COMMAND"


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    extra_args: list[str] = field(default_factory=list)  # passed to sbatch as they are


@dataclass(frozen=True)
class JobArray:
    job_id: str
    folder: Path  # job script, seeds, one log and one exit file per task
    seeds: list[int]  # seeds[i] is the seed of array task i

    def task_id(self, index: int) -> str:
        return f"{self.job_id}_{index}"


def runner_command() -> list[str]:
    custom = os.environ.get(COMMAND_ENV)
    return shlex.split(custom) if custom else [sys.executable, "-m", "runner"]


def task_arguments(entry: Path, plan_file: Path) -> list[str]:
    """The arguments of one task's ``runner reproduce`` (the seed is added by the job script):
    the entry and the submitter's plan, whose options the task keeps."""
    return ["reproduce", str(entry), "--plan", str(plan_file)]


def job_script(folder: Path, entry: Path) -> str:
    command = shlex.join(runner_command() + task_arguments(entry, folder / PLAN_FILE))
    seeds = shlex.quote(str(folder / "seeds.txt"))
    exits = shlex.quote(str(folder))
    results = shlex.quote(str(paths.results_dir().resolve()))
    return f"""#!/bin/bash
# Written by `runner reproduce --slurm`: array task i runs the plan for the seed on line i+1 of seeds.txt.
set -u
seed=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {seeds})
export RUNNER_RESULTS={results}
echo "slurm job ${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}} on $(hostname): seed $seed"
{command} --seed "$seed"
rc=$?
echo "$rc" > {exits}/task-"$SLURM_ARRAY_TASK_ID".exit
exit "$rc"
"""


def jobs_folder(entry_name: str) -> Path:
    """Beside the results, so it is on the shared file system too."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return paths.results_dir().resolve() / ".slurm" / entry_name / stamp


def submit(plan: RunPlan, seeds: list[int], options: SlurmOptions) -> JobArray:
    """A plan spanning nodes: each task is one run over that many whole nodes; the task's
    runner runs on the first and starts the others' ranks with srun (runner.run.remote_nodes)."""
    entry_name, nodes = plan.entry.name, plan.entry.nodes
    folder = jobs_folder(entry_name)
    folder.mkdir(parents=True)
    plan.write(folder)
    (folder / "seeds.txt").write_text("".join(f"{s}\n" for s in seeds))
    script = folder / "job.sh"
    script.write_text(job_script(folder, plan.entry.path.resolve()))
    script.chmod(0o755)
    # --exclusive: a whole node per run. Two runs on one node would share its cores and
    # disturb each other's clock, and a starting runner removes every runner container it
    # finds on its engine as left over from a killed run.
    flags = [
        # --export=ALL: sbatch's default, named so a site's SBATCH_EXPORT cannot drop the engine's setting.
        "--parsable", "--exclusive", "--export=ALL", f"--array=0-{len(seeds) - 1}", f"--job-name=runner-{entry_name}",
        f"--chdir={folder}", f"--output={folder}/task-%a.out",
    ]
    if nodes > 1:
        flags.append(f"--nodes={nodes}")
    if options.partition:
        flags.append(f"--partition={options.partition}")
    done = slurm("sbatch", *flags, *options.extra_args, str(script))
    job_id = done.stdout.strip().split(";")[0]  # "id" or "id;cluster"
    (folder / "job_id").write_text(job_id + "\n")
    return JobArray(job_id, folder, list(seeds))
