"""Submit one Slurm job array: one task per run, each an ordinary ``runner reproduce``.

The submitter chooses the seeds and writes them, one a line, into ``seeds.txt`` next to the
job script; task ``i`` of the array reads line ``i + 1``. Every task runs on its node with
that node's Docker engine, writes into the shared results folder (``RUNNER_RESULTS``) and
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
from runner.options import ReproduceOptions
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


def task_arguments(entry: Path, opts: ReproduceOptions) -> list[str]:
    """The flags of one task's ``runner reproduce`` (the seed is added by the job script)."""
    args = ["reproduce", str(entry), "--runs", "1", "--no-sign"]
    if opts.smoke:
        args.append("--smoke")
    if opts.allow_hardware_mismatch:
        args.append("--allow-hardware-mismatch")
    for backend in opts.backends or []:
        args += ["--backend", backend]
    if opts.timeout_minutes is not None:
        args += ["--timeout-minutes", str(opts.timeout_minutes)]
    if not opts.infer:
        args.append("--no-infer")
    if opts.full_curve:
        args.append("--full-curve")
    if not opts.loadgen:
        args.append("--no-loadgen")
    elif opts.loadgen == "mlperf":
        args.append("--loadgen-mlperf")
    return args


def job_script(folder: Path, entry: Path, opts: ReproduceOptions) -> str:
    command = shlex.join(runner_command() + task_arguments(entry, opts))
    seeds = shlex.quote(str(folder / "seeds.txt"))
    exits = shlex.quote(str(folder))
    results = shlex.quote(str(paths.results_dir().resolve()))
    return f"""#!/bin/bash
# Written by `runner reproduce --slurm`: array task i reproduces the seed on line i+1 of seeds.txt.
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


def submit(entry: Path, entry_name: str, seeds: list[int], opts: ReproduceOptions,
           options: SlurmOptions, nodes: int = 1) -> JobArray:
    """``nodes`` > 1: each task is one run spanning that many whole nodes; the task's runner
    runs on the first and starts the others' ranks with srun (runner.run.remote_nodes)."""
    folder = jobs_folder(entry_name)
    folder.mkdir(parents=True)
    (folder / "seeds.txt").write_text("".join(f"{s}\n" for s in seeds))
    script = folder / "job.sh"
    script.write_text(job_script(folder, entry.resolve(), opts))
    script.chmod(0o755)
    # --exclusive: a whole node per run. Two runs on one node would share its cores and
    # disturb each other's clock, and a starting runner removes every runner container it
    # finds on its engine as left over from a killed run.
    flags = [
        "--parsable", "--exclusive", f"--array=0-{len(seeds) - 1}", f"--job-name=runner-{entry_name}",
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
