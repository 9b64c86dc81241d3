"""Calling Slurm's own command-line tools (sbatch, squeue, scontrol), with clear errors."""

from __future__ import annotations

import shutil
import subprocess

from runner.errors import UserError


TOOLS = ("sbatch", "squeue", "scontrol")


def require_tools() -> None:
    for tool in TOOLS:
        if shutil.which(tool) is None:
            raise UserError(
                f"`{tool}` is not on PATH, so this host cannot talk to Slurm",
                "run on a Slurm submit host (Debian: apt-get install slurm-client munge, with "
                "the cluster's slurm.conf and munge key), or drop --slurm",
            )


def slurm(tool: str, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    require_tools()
    try:
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError(f"`{tool}` did not answer within {timeout:.0f} s",
                        "check that slurmctld is up (`scontrol ping`)") from None
    if check and done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise UserError(
            f"`{tool} {' '.join(args)}` failed: {message[-1] if message else f'exit {done.returncode}'}",
            "check the partition and --slurm-arg flags, and that slurmctld is up (`scontrol ping`)",
        )
    return done
