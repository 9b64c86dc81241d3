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
from runner.results.record import RESULT_FILE, Result

from runner.engine.labels import (  # noqa: F401  (the run's records use the same owner)
    LABEL_HOST, LABEL_PID, LABEL_PID_START, LABEL_RUN, Owner, container_labels, me, owner_from_labels,
    process_start, set_run,
)


def _markers() -> Path:
    return paths.home() / "active-runs"


def _marker(run_id: str) -> Path:
    return _markers() / f"{run_id}.json"


def mark_running(result: Result, result_dir: Path) -> Path:
    """Record that this process runs ``result``'s run, with its record as far as it went, so a
    later start can finish it (incomplete) if this process is killed: the run's result.json is
    written once, when the run is finished (``journal`` keeps the record up to date until then)."""
    folder = _markers()
    folder.mkdir(parents=True, exist_ok=True)
    owner = me()
    _write_marker(result, result_dir, owner)
    set_run(result.run_id)
    return _marker(result.run_id)


def journal(result: Result, result_dir: Path) -> None:
    """The run's record as far as it went, kept beside its marker (outside its folder, which
    the run's containers write), for ``recover_killed_runs``."""
    _write_marker(result, result_dir, me())


def _write_marker(result: Result, result_dir: Path, owner: Owner) -> None:
    marker = _marker(result.run_id)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_id": result.run_id, "result_dir": str(result_dir), "pid": owner.pid,
                               "pid_start": owner.pid_start, "host": owner.host, "record": result.to_dict()}))
    os.replace(tmp, marker)


def mark_finished(run_id: str) -> None:
    """The run's result.json is written: nothing is left to recover."""
    _marker(run_id).unlink(missing_ok=True)
    set_run(None)


KILLED_REASON = "runner was killed (recovered at next start)"


def _killed_record(info: dict, result_dir: Path) -> Result | None:
    """The record of a run whose runner is gone: its journal (the run's result.json is not
    written yet), or a result.json left at status "running" by a runner before journals."""
    if not (result_dir / RESULT_FILE).exists():
        try:
            return Result.from_dict(info["record"])
        except (KeyError, TypeError, ValueError):
            return None
    try:
        result = Result.read(result_dir)
    except (OSError, ValueError):
        return None
    return result if result.status == "running" else None


def recover_killed_runs() -> list[Path]:
    """The runs of runners that are gone, never finished, get their result.json: their record as
    far as it went, "incomplete" because the runner was killed. Returns the result folders
    written. Runs of live runners are not touched."""
    folder = _markers()
    if not folder.is_dir():
        return []
    recovered = []
    for marker in sorted(folder.glob("*.json")):
        try:
            info = json.loads(marker.read_text())
            owner = Owner(int(info["pid"]), str(info["pid_start"]), str(info["host"]))
            result_dir = Path(info["result_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable marker: leave it for a human rather than guess
        if not owner.gone():
            continue
        result = _killed_record(info, result_dir) if result_dir.is_dir() else None
        if result is not None:
            assemble.killed(result, KILLED_REASON)
            result.write(result_dir)
            recovered.append(result_dir)
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
