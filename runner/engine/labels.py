"""Who owns a container: the runner process (pid, its start time, the host) and the run id,
written as labels on every container the runner creates. A container is an orphan only
when this proves its runner is gone: the pid is not alive on this host, or it is alive but
started at another time (a new process reusing the pid). Anything that cannot be proved
orphaned is left alone. (Run records and scratch folders use the same owner: runner.run.ownership.)"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Every container the runner starts carries this label (its value: the container's role), so
# an orphan left by a killed runner can be found and removed by the next run.
MANAGED_LABEL = "dev.runner.container"
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


def owned_labels(role: str) -> dict[str, str]:
    """Labels for any container the runner creates: a runner killed mid-way leaves it
    behind, and the next run's ``remove_orphans`` can then prove it orphaned."""
    return {MANAGED_LABEL: role, **container_labels()}


def owner_from_labels(labels: Mapping[str, str]) -> Owner | None:
    try:
        return Owner(int(labels[LABEL_PID]), str(labels[LABEL_PID_START]), str(labels[LABEL_HOST]))
    except (KeyError, TypeError, ValueError):
        return None  # not labelled by an owning runner: cannot be proved orphaned


# --- runs in progress: a marker per run under the runner home --------------------------
