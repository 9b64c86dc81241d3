"""The CPU time a container has used, from its cgroup's own accounting on the host (evidence
of training, threat-model class 4f).

The kernel charges every CPU cycle a container's processes run to the container's cgroup,
whatever they do and however many threads they start; nothing inside the container can
write the counter. The runner reads it at each freeze (``runner.run.training``: the
training containers, for the CPU time up to every checkpoint) and around each prediction
of its evaluator (``runner.run.evaluator``: the CPU cost of one forward pass over the
items it predicted). The docker stats API samples the same counter once a second, far too
slowly for a frozen window of a few hundredths of a second: the file is read directly.

Where the counter lives: the container's first process names its cgroups in
``/proc/<pid>/cgroup``. Under cgroup v1 the ``cpuacct`` controller's line gives the path
below the controller's mount (``cpuacct.usage``, nanoseconds); under v2 the unified line
(``0::``) gives it below ``/sys/fs/cgroup`` (``cpu.stat``, ``usage_usec``). Docker's and
Podman's drivers (cgroupfs and systemd) all place a container's processes this way. A
counter that cannot be found (a cgroup namespace the runner does not share, a container
already gone) is ``None``: the run records the CPU time as not measured, never a guess.
"""

from __future__ import annotations

import threading
from pathlib import Path

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SAMPLE_SECONDS = 0.1  # how often the running containers' counters are read
V1_MOUNTS = ("cpuacct", "cpu,cpuacct", "cpuacct,cpu")


def counter_file(pid: int, proc: Path = PROC, root: Path = CGROUP_ROOT) -> Path | None:
    """The file that counts the CPU time of ``pid``'s cgroup; None when there is none to read."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        relative = path.lstrip("/")
        if "cpuacct" in controllers.split(","):
            for mount in V1_MOUNTS:
                if (candidate := root / mount / relative / "cpuacct.usage").is_file():
                    return candidate
        elif controllers == "":
            unified = root / relative / "cpu.stat"
    return unified if unified is not None and unified.is_file() else None


def read_seconds(counter: Path) -> float | None:
    """The counter's CPU seconds (v1 ``cpuacct.usage`` in ns, v2 ``cpu.stat`` usage_usec)."""
    try:
        text = counter.read_text()
    except OSError:
        return None
    try:
        if counter.name == "cpuacct.usage":
            return int(text.strip()) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except ValueError:
        return None
    return None


class ContainerCpu:
    """One container's CPU counter, found once (from its first process) and read on demand."""

    def __init__(self, container, proc: Path = PROC, root: Path = CGROUP_ROOT):
        self.container, self.proc, self.root = container, proc, root
        self.counter: Path | None = None
        self.problem: str | None = None
        self.last: float | None = None  # the latest reading
        self.stale = False  # seconds() gave the last reading: the container was gone

    def _find(self) -> Path | None:
        if self.counter is None and self.problem is None:
            try:
                pid = self.container.state().pid
            except Exception as exc:  # noqa: BLE001 - gone, or an engine error: not measured
                self.problem = f"the container's process could not be found ({type(exc).__name__})"
                return None
            self.counter = counter_file(pid, self.proc, self.root) if pid > 0 else None
            if self.counter is None:
                self.problem = "the container's cgroup CPU accounting is not readable from the runner"
        return self.counter

    def seconds(self) -> float | None:
        """The counter now; once the container is gone (its cgroup removed with it), the last
        reading taken while it ran (``sample``), marked ``stale``: a lower bound of its work.
        An entry that exits right after asking for an evaluation cannot make its CPU time
        unmeasured: the runner samples the counter from the container's start."""
        counter = self._find()
        now = read_seconds(counter) if counter is not None else None
        if now is not None:
            self.last = now
            return now
        if self.last is not None:
            self.stale = True
        return self.last

    def sample(self) -> None:
        """Read the counter and keep the reading (``seconds`` falls back to it)."""
        counter = self._find()
        if counter is not None and (now := read_seconds(counter)) is not None:
            self.last = now


class Sampler:
    """Reads the training containers' counters every ``SAMPLE_SECONDS`` while they run, so the
    CPU time up to a checkpoint is known even when the container has exited by the time its
    request is handled (the last reading is at most that old)."""

    def __init__(self, counters: dict[int, "ContainerCpu"]):
        self.counters = counters
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runner-cpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            for counter in list(self.counters.values()):
                counter.sample()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)
