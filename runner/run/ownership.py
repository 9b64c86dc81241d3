"""Who owns a container or a run: the runner process (pid, its start time, the host) and
the run id. A container or a result is an orphan only when this proves its runner is gone:
the pid is not alive on this host, or it is alive but started at another time (a new
process reusing the pid). Anything that cannot be proved orphaned is left alone."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from runner import paths

LABEL_RUN = "dev.runner.run-id"
LABEL_PID = "dev.runner.pid"
LABEL_PID_START = "dev.runner.pid-start"
LABEL_HOST = "dev.runner.host"

_current_run: str | None = None


def process_start(pid: int) -> str | None:
    """The process' start time in clock ticks since boot (field 22 of /proc/PID/stat),
    or None when no such process is alive."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


@dataclass(frozen=True)
class Owner:
    pid: int
    pid_start: str
    host: str

    def gone(self) -> bool:
        """True only when this host can prove the owning process no longer runs."""
        if self.host != socket.gethostname():
            return False  # another host's process: nothing here proves anything
        return process_start(self.pid) != self.pid_start


def me() -> Owner:
    return Owner(os.getpid(), process_start(os.getpid()) or "?", socket.gethostname())


def set_run(run_id: str | None) -> None:
    """The run the containers started from now on belong to (labelled on creation)."""
    global _current_run
    _current_run = run_id


def container_labels() -> dict[str, str]:
    owner = me()
    labels = {LABEL_PID: str(owner.pid), LABEL_PID_START: owner.pid_start, LABEL_HOST: owner.host}
    if _current_run:
        labels[LABEL_RUN] = _current_run
    return labels


def owner_from_labels(labels: dict) -> Owner | None:
    try:
        return Owner(int(labels[LABEL_PID]), str(labels[LABEL_PID_START]), str(labels[LABEL_HOST]))
    except (KeyError, TypeError, ValueError):
        return None  # not labelled by an owning runner: cannot be proved orphaned


# --- runs in progress: a marker per run under the runner home --------------------------

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
            result = json.loads(result_path.read_text())
        except (OSError, ValueError):
            result = None
        if isinstance(result, dict) and result.get("status") == "running":
            result["status"] = "incomplete"
            result["incomplete_reason"] = KILLED_REASON
            tmp = result_path.with_name(f".{result_path.name}.tmp")
            tmp.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, result_path)
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
