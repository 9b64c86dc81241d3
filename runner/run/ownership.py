"""Who owns a run: its records of runs in progress and its scratch folders carry the owner
of ``runner.engine.labels`` (pid, its start time, the host), so a run whose runner was killed
is recovered, and its scratch swept, by the next run; nothing that cannot be proved
orphaned is touched."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from runner import paths
from runner.results import assemble
from runner.results.record import Result

from runner.engine.labels import (  # noqa: F401  (the run's records use the same owner)
    LABEL_HOST, LABEL_PID, LABEL_PID_START, LABEL_RUN, Owner, container_labels, me, owner_from_labels,
    process_start, set_run,
)


def _markers() -> Path:
    return paths.home() / "active-runs"


def mark_running(run_id: str, result_dir: Path) -> Path:
    """Record that this process runs ``run_id``, so a later start can recover it if killed."""
    folder = _markers()
    folder.mkdir(parents=True, exist_ok=True)
    owner = me()
    marker = folder / f"{run_id}.json"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_id": run_id, "result_dir": str(result_dir), "pid": owner.pid,
                               "pid_start": owner.pid_start, "host": owner.host}))
    os.replace(tmp, marker)
    set_run(run_id)
    return marker


def mark_finished(run_id: str) -> None:
    (_markers() / f"{run_id}.json").unlink(missing_ok=True)
    set_run(None)


KILLED_REASON = "runner was killed (recovered at next start)"


def recover_killed_runs() -> list[Path]:
    """Results left at status "running" by a runner that is gone become "incomplete".
    Returns the result folders marked. Runs of live runners are not touched."""
    folder = _markers()
    if not folder.is_dir():
        return []
    recovered = []
    for marker in sorted(folder.glob("*.json")):
        try:
            info = json.loads(marker.read_text())
            owner = Owner(int(info["pid"]), str(info["pid_start"]), str(info["host"]))
            result_path = Path(info["result_dir"]) / "result.json"
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable marker: leave it for a human rather than guess
        if not owner.gone():
            continue
        try:
            result = Result.read(result_path.parent)
        except (OSError, ValueError):
            result = None
        if result is not None and result.status == "running":
            assemble.killed(result, KILLED_REASON)
            result.write(result_path.parent)
            recovered.append(result_path.parent)
        marker.unlink(missing_ok=True)
    return recovered


# --- scratch folders: /tmp/runner-* of a run, with their owner inside ---------------------

SCRATCH_PREFIX = "runner-"
SCRATCH_OWNER = ".runner-owner.json"  # pid, pid start and host of the runner using the folder


@contextmanager
def scratch_folder(prefix: str = SCRATCH_PREFIX) -> Iterator[Path]:
    """A temporary folder (``/tmp/runner-*``) removed at the end, with its owner recorded
    inside, so that a later start can remove it when this process is killed (SIGKILL skips
    the removal)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        owner = me()
        marker = Path(tmp) / SCRATCH_OWNER
        marker.write_text(json.dumps({"pid": owner.pid, "pid_start": owner.pid_start, "host": owner.host}))
        yield Path(tmp)


def _scratch_owner(folder: Path) -> Owner | None:
    """The owner recorded in ``folder``; None when it cannot be read (then nothing is proved)."""
    marker = folder / SCRATCH_OWNER
    try:
        st = marker.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
            return None
        info = json.loads(marker.read_text())
        return Owner(int(info["pid"]), str(info["pid_start"]), str(info["host"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def sweep_scratch(root: Path | None = None) -> list[Path]:
    """Remove ``runner-*`` scratch folders (under the temporary folder) whose recorded
    runner is provably gone; folders of live runners, of other users, of other hosts, or
    without a readable owner record are left alone. Returns the folders removed."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    for folder in sorted(root.glob(f"{SCRATCH_PREFIX}*")):
        try:
            st = folder.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue  # a link, a file, or someone else's
        owner = _scratch_owner(folder)
        if owner is None or not owner.gone():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed
