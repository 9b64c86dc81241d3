"""Follow a job array until every task has ended, with a ``rich`` progress bar.

Live tasks come from ``squeue``; an ended task's final state from ``scontrol show job``
(``sacct`` needs slurmdbd, which many small clusters lack). When Slurm has already
forgotten a task, its exit file (written by the job script) says COMPLETED or FAILED.
"""

from __future__ import annotations

import re
import time
from collections import Counter

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from runner.slurm.commands import slurm
from runner.slurm.submit import JobArray
from runner.report import reporter

ENDED = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "BOOT_FAIL", "DEADLINE",
}
# A task neither Slurm nor an exit file knows of, this many polls in a row, is UNKNOWN.
FORGOTTEN_AFTER_POLLS = 5


def live_states(job: JobArray) -> dict[int, str]:
    """Array index -> state of the tasks squeue still lists (pending ones included)."""
    done = slurm("squeue", "-h", "-r", "-j", job.job_id, "-o", "%K %T", check=False)
    states = {}
    for line in done.stdout.splitlines():
        index, _, state = line.strip().partition(" ")
        if index.isdigit():
            states[int(index)] = state.strip()
    return states


def task_state(job: JobArray, index: int) -> str | None:
    """The task's state as Slurm or its exit file knows it; None when neither does."""
    done = slurm("scontrol", "show", "job", "-o", job.task_id(index), check=False)
    match = re.search(r"\bJobState=(\S+)", done.stdout)
    if match:
        return match.group(1)
    exit_file = job.folder / f"task-{index}.exit"
    if exit_file.exists():
        return "COMPLETED" if exit_file.read_text().strip() == "0" else "FAILED"
    return None


def node_of(job: JobArray, index: int) -> str | None:
    done = slurm("scontrol", "show", "job", "-o", job.task_id(index), check=False)
    match = re.search(r"\bBatchHost=(\S+)", done.stdout)
    return match.group(1) if match else None


def follow(job: JobArray, poll_seconds: float = 5.0) -> dict[int, str]:
    """Wait for every task; return index -> final Slurm state."""
    total = len(job.seeds)
    final: dict[int, str] = {}
    unseen_polls: Counter[int] = Counter()
    columns = (TextColumn("[bold]slurm[/] job {task.fields[job]}"), BarColumn(),
               MofNCompleteColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    try:
        with Progress(*columns, console=reporter().console, transient=False) as progress:
            bar = progress.add_task("submitted", total=total, job=job.job_id)
            while len(final) < total:
                live = live_states(job)
                for index in range(total):
                    if index in final or index in live:
                        unseen_polls[index] = 0
                        continue
                    state = task_state(job, index)
                    unseen_polls[index] = unseen_polls[index] + 1 if state is None else 0
                    if state is None and unseen_polls[index] >= FORGOTTEN_AFTER_POLLS:
                        state = "UNKNOWN"
                    if state in ENDED or state == "UNKNOWN":
                        final[index] = state
                counts = Counter(s.lower() for i, s in live.items() if i not in final)
                counts.update(s.lower() for s in final.values())
                progress.update(bar, completed=len(final),
                                description=", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
                if len(final) < total:
                    time.sleep(poll_seconds)
    except KeyboardInterrupt:
        reporter().print(
            f"[yellow]stopped following[/] slurm job {job.job_id}; its tasks keep running. "
            f"Cancel them with `scancel {job.job_id}`, or run the same command again once they "
            "end: completed seeds are not run again"
        )
        raise
    return final
