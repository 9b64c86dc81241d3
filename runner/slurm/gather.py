"""Gather a job array's results from the shared folder, name Slurm's part, record them here.

Each task's run folder is found by its seed among the folders that appeared after the
submission. Every gathered ``result.json`` records its Slurm job (``slurm``); a task that
did not end COMPLETED makes its run incomplete with the job id and state in the reason,
and a task that never started leaves a placeholder result folder saying the same. The
submit host records each gathered run as what it measured (``runner.bundle.measured``) and,
once the runs are compared across seeds, signs each once with its own key
(``runner.reproduce.finish_runs``), so compute nodes never hold a private key.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from rich.markup import escape

from runner.manifest import Entry
from runner.bundle import record_measured, settle_outputs
from runner.results import assemble, new_run_id
from runner.results.record import Result
from runner.slurm.submit import JobArray
from runner.report import reporter
from runner.safe_read import read_json_object, visible
from runner.errors import UserError


def read_result(folder: Path) -> dict | None:
    """The task's result.json, read as untrusted input (``runner.safe_read``: a FIFO, a huge
    or deeply nested file is refused, never waited on); None when there is none to read."""
    try:
        return read_json_object(folder / "result.json", "result")
    except UserError:
        return None


def settled_result(folder: Path, timeout_s: float = 60.0) -> dict | None:
    """The result once its runner has written it. Slurm reports CANCELLED as soon as it
    signals the task, while the task's runner still writes its own last word ("interrupted"):
    its result.json appears only then (a run's record is written once, when it ends)."""
    path = folder / "result.json"
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        result = read_result(folder)
        stamp = path.stat().st_mtime_ns if path.exists() else None
        if result and result.get("status") != "running" and stamp == last:
            return result
        last = stamp
        time.sleep(2)
    return read_result(folder)


RUN_SEED = re.compile(r"-s(\d+)-[0-9a-f]{6}$")  # runner.results.new_run_id's seed


def run_folders(entry_dir: Path) -> set[str]:
    return {p.name for p in entry_dir.iterdir() if p.is_dir()} if entry_dir.is_dir() else set()


def complete_runs(entry_dir: Path, seeds: list[int], smoke: bool, variant: dict | None = None) -> dict[int, Path]:
    """Seed -> a complete run already in the results folder (re-submission skips these): of the
    same kind (smoke or not) and the same study variant (``RunPlan.variant``; None: the entry's own)."""
    found: dict[int, Path] = {}
    for name in sorted(run_folders(entry_dir)):
        result = read_result(entry_dir / name)
        if (result and result.get("seed") in seeds and result.get("status") == "complete"
                and bool(result.get("smoke")) == smoke and result.get("variant") == variant):
            found[result["seed"]] = entry_dir / name
    return found


def find_run(entry_dir: Path, seed: int, before: set[str]) -> Path | None:
    """The newest folder of ``seed`` made since the submission (run ids sort by time and name
    their seed: a run's result.json is written only when it is finished)."""
    for name in sorted(run_folders(entry_dir) - before, reverse=True):
        if (m := RUN_SEED.search(name)) and int(m[1]) == seed:
            return entry_dir / name
    return None


def slurm_record(job: JobArray, index: int, state: str, node: str | None) -> dict:
    return {"job_id": job.task_id(index), "array_job_id": job.job_id, "array_index": index,
            "state": state, "node": node, "log": str(job.folder / f"task-{index}.out")}


def mark(result: Result, record: dict) -> Result:
    """Slurm's part of a gathered run: its job, and a state other than COMPLETED as the reason."""
    assemble.gathered(result, record)
    return result


def placeholder(entry: Entry, entry_dir: Path, seed: int, smoke: bool, record: dict) -> tuple[Path, Result]:
    """A result folder for a task that never ran the entry, so the run is not silently lost
    (written once, here: it is never signed)."""
    folder = entry_dir / new_run_id(seed)
    folder.mkdir(parents=True)
    result = assemble.placeholder(run_id=folder.name, entry=entry, seed=seed, smoke=smoke,
                                  reason="the Slurm job ended before the run wrote a result")
    mark(result, record).write(folder)
    return folder, result


def gather(job: JobArray, states: dict[int, str], nodes: dict[int, str | None], entry: Entry,
           entry_dir: Path, before: set[str], smoke: bool) -> dict[int, tuple[Path, Result]]:
    """Seed -> its run folder (real, or a placeholder) and its record, Slurm's part added in
    memory; each real one recorded here as gathered, its result.json written once more when it
    is finished and signed (``runner.reproduce.finish_runs``)."""
    folders: dict[int, tuple[Path, Result]] = {}
    for index, seed in enumerate(job.seeds):
        record = slurm_record(job, index, states[index], nodes.get(index))
        folder = find_run(entry_dir, seed, before)
        if folder is None:
            folders[seed] = placeholder(entry, entry_dir, seed, smoke, record)
            reporter().print(f"[red]no run[/] for seed {seed}: slurm job {record['job_id']} "
                          f"{record['state']} (log {record['log']})")
            continue
        raw = settled_result(folder)
        try:
            if raw is None:
                raise ValueError("its result.json cannot be read")
            result = Result.from_dict(raw)
        except (ValueError, KeyError, TypeError) as exc:  # the task's runner died mid-write
            folders[seed] = placeholder(entry, entry_dir, seed, smoke, record)
            reporter().print(f"[red]unreadable result[/] in {escape(visible(str(folder)))} ({escape(visible(str(exc)))}): "
                             "a placeholder records the run")
            continue
        settle_outputs(folder, mark(result, record))  # outputs verify would refuse: left out, named
        record_measured(folder, result=result.to_dict())  # what this host gathered
        folders[seed] = (folder, result)
    return folders
