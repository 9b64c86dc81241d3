"""Control groups the runner creates and owns, for engines with no daemon to keep them
(Charliecloud, the host engine): one group per container, in every controller the run
contract needs.

- **freezer**: ``freeze``/``thaw``, waiting until the kernel says the whole group is frozen
  (cgroup v1 ``freezer.state`` reads ``FROZEN``; v2 ``cgroup.events`` says ``frozen 1``);
- **cpuacct** (v2: ``cpu.stat``): the CPU time the evidence of training reads, found from the
  container's pid as for Docker's containers (``runner.run.cpu_usage``);
- **cpuset**, **cpu**: whole cores pinned, a quota for a fraction of one, the CPU weight;
- **memory**: the limit, with no swap (a limit that swaps would skew timing);
- **pids**: the process limit;
- **devices** (v1 only): every device refused except the ordinary character devices and
  the GPUs the spec names.

The groups live under ``runner/`` of each controller's hierarchy, named by the container's
id. A process joins them before it runs anything (the launcher writes its own pid into each
group's ``cgroup.procs`` and then execs), so nothing the entry starts is ever outside them.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from runner.engine.interface import EngineError

ROOT = Path(os.environ.get("RUNNER_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "runner"
V1_CONTROLLERS = ("freezer", "cpuacct", "cpu", "cpuset", "memory", "pids", "devices")
FREEZE_TIMEOUT_S = 30.0
# Character devices every container may use (type major:minor access), as Docker's default:
# null, zero, full, random, urandom, tty, console-less ptmx, the pseudo terminals.
ORDINARY_DEVICES = ("c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm", "c 5:0 rwm", "c 5:2 rwm",
                    "c 136:* rwm")
NVIDIA_MAJOR = 195  # /dev/nvidia<N> is 195:N; nvidiactl 195:255, nvidia-modeset 195:254
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)i?b?\s*$", re.IGNORECASE)


def version() -> int:
    """2 on a unified (cgroup v2) host, else 1."""
    return 2 if (ROOT / "cgroup.controllers").exists() else 1


def memory_bytes(memory: str | int) -> int:
    """Docker's memory notation (``8g``, ``512m``, a number of bytes) in bytes."""
    if isinstance(memory, int):
        return memory
    match = _MEMORY.match(str(memory))
    if not match:
        raise EngineError(f"memory limit {memory!r} is not a size such as 8g or 512m")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * 1024 ** "bkmgt".index(unit or "b"))


@dataclass(frozen=True)
class Limits:
    cpuset: str | None = None  # "0-3", "2"
    cpu_quota: float | None = None  # cores, when not whole
    memory: int | None = None  # bytes, no swap
    pids: int | None = None
    cpu_weight: int | None = None  # Docker's cpu-shares scale (1024 the default)
    devices: tuple[str, ...] | None = None  # allowed devices (v1 lines), None: not restricted


def problem() -> str | None:
    """Why the runner cannot create its groups on this host, or None."""
    if version() == 2:
        where = ROOT
        if not os.access(where, os.W_OK):
            return f"the runner cannot create cgroups under {where} (not root and no delegated subtree)"
        controllers = (ROOT / "cgroup.controllers").read_text().split()
        missing = [c for c in ("cpu", "cpuset", "memory", "pids") if c not in controllers]
        return f"cgroup v2 controllers missing on this host: {', '.join(missing)}" if missing else None
    missing = [c for c in V1_CONTROLLERS if not (ROOT / c).is_dir()]
    if missing:
        return f"cgroup v1 controllers not mounted on this host: {', '.join(missing)}"
    unwritable = [c for c in V1_CONTROLLERS if not os.access(ROOT / c, os.W_OK)]
    if unwritable:
        return (f"the runner cannot create cgroups in {', '.join(unwritable)} "
                "(not root and no delegated subtree)")
    return None


class Cgroups:
    """The groups of one container (``name``: its id)."""

    def __init__(self, name: str):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
            raise EngineError(f"not a cgroup name: {name!r}")
        self.name = name
        self.v2 = version() == 2

    # -- where ---------------------------------------------------------------------------
    def dirs(self) -> dict[str, Path]:
        if self.v2:
            return {"unified": ROOT / PARENT / self.name}
        return {c: ROOT / c / PARENT / self.name for c in V1_CONTROLLERS}

    def _dir(self, controller: str) -> Path:
        return self.dirs()["unified" if self.v2 else controller]

    def procs_files(self) -> list[Path]:
        """The files a process writes its own pid into to join every group."""
        return [d / "cgroup.procs" for d in self.dirs().values()]

    def exists(self) -> bool:
        return any(d.is_dir() for d in self.dirs().values())

    # -- making them ---------------------------------------------------------------------
    def create(self, limits: Limits) -> None:
        try:
            if self.v2:
                self._create_v2(limits)
            else:
                self._create_v1(limits)
        except OSError as exc:
            self.remove(timeout=1)
            raise EngineError(f"cannot set up the container's cgroups ({exc.filename}): {exc.strerror}") from exc

    def _create_v1(self, limits: Limits) -> None:
        for controller in V1_CONTROLLERS:
            parent = ROOT / controller / PARENT
            parent.mkdir(exist_ok=True)
            if controller == "cpuset":  # a cpuset group holds no task until its cpus and mems are set
                for key in ("cpuset.cpus", "cpuset.mems"):
                    if not (parent / key).read_text().strip():
                        (parent / key).write_text((ROOT / controller / key).read_text())
            (parent / self.name).mkdir(exist_ok=True)
        cpuset = self._dir("cpuset")
        cpus = limits.cpuset or (ROOT / "cpuset" / PARENT / "cpuset.cpus").read_text().strip()
        _write(cpuset / "cpuset.cpus", cpus)
        _write(cpuset / "cpuset.mems", (ROOT / "cpuset" / PARENT / "cpuset.mems").read_text().strip())
        cpu = self._dir("cpu")
        if limits.cpu_quota:
            _write(cpu / "cpu.cfs_period_us", "100000")
            _write(cpu / "cpu.cfs_quota_us", str(int(limits.cpu_quota * 100000)))
        if limits.cpu_weight:
            _write(cpu / "cpu.shares", str(limits.cpu_weight))
        memory = self._dir("memory")
        if limits.memory:
            _write(memory / "memory.limit_in_bytes", str(limits.memory))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory))
            else:
                _write(memory / "memory.swappiness", "0")
        if limits.pids:
            _write(self._dir("pids") / "pids.max", str(limits.pids))
        if limits.devices is not None:
            devices = self._dir("devices")
            _write(devices / "devices.deny", "a")
            for line in limits.devices:
                _write(devices / "devices.allow", line)

    def _create_v2(self, limits: Limits) -> None:
        parent = ROOT / PARENT
        parent.mkdir(exist_ok=True)
        wanted = "+cpu +cpuset +memory +pids"
        _write(ROOT / "cgroup.subtree_control", wanted)
        _write(parent / "cgroup.subtree_control", wanted)
        group = parent / self.name
        group.mkdir(exist_ok=True)
        if limits.cpuset:
            _write(group / "cpuset.cpus", limits.cpuset)
        if limits.cpu_quota:
            _write(group / "cpu.max", f"{int(limits.cpu_quota * 100000)} 100000")
        if limits.cpu_weight:
            _write(group / "cpu.weight", str(_v2_weight(limits.cpu_weight)))
        if limits.memory:
            _write(group / "memory.max", str(limits.memory))
            if (group / "memory.swap.max").exists():  # absent where the kernel does not account swap
                _write(group / "memory.swap.max", "0")
        if limits.pids:
            _write(group / "pids.max", str(limits.pids))

    # -- using them ----------------------------------------------------------------------
    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.procs_files():
            try:
                found.update(int(p) for p in path.read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(found)

    def frozen(self) -> bool:
        if self.v2:
            try:
                return "frozen 1" in (self._dir("unified") / "cgroup.events").read_text()
            except OSError:
                return False
        try:
            return (self._dir("freezer") / "freezer.state").read_text().strip() == "FROZEN"
        except OSError:
            return False

    def freeze(self, timeout: float = FREEZE_TIMEOUT_S) -> None:
        """Freeze every process of the group; return once the kernel says all are frozen."""
        self._set_frozen(True)
        deadline = time.monotonic() + timeout
        pause = 0.0002
        while not self.frozen():
            if time.monotonic() > deadline:
                raise EngineError(f"the container's processes did not all freeze within {timeout:.0f} s")
            if not self.v2:  # v1 re-checks the group's tasks only when asked again
                self._set_frozen(True)
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def thaw(self) -> None:
        self._set_frozen(False)

    def _set_frozen(self, frozen: bool) -> None:
        try:
            if self.v2:
                _write(self._dir("unified") / "cgroup.freeze", "1" if frozen else "0")
            else:
                _write(self._dir("freezer") / "freezer.state", "FROZEN" if frozen else "THAWED")
        except OSError as exc:
            raise EngineError(f"cannot {'freeze' if frozen else 'thaw'} the container: {exc.strerror}") from exc

    def set_cpu_weight(self, weight: int) -> None:
        try:
            if self.v2:
                _write(self._dir("unified") / "cpu.weight", str(_v2_weight(weight)))
            else:
                _write(self._dir("cpu") / "cpu.shares", str(weight))
        except OSError as exc:
            raise EngineError(f"cannot change the container's CPU weight: {exc.strerror}") from exc

    def kill(self) -> None:
        """SIGKILL to every process of the group (frozen ones die as they are thawed)."""
        if self.v2 and (self._dir("unified") / "cgroup.kill").exists():
            try:
                _write(self._dir("unified") / "cgroup.kill", "1")
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.frozen():
            self.thaw()

    def remove(self, timeout: float = 10.0) -> None:
        """Kill what is left, wait until the group is empty, and remove it."""
        deadline = time.monotonic() + timeout
        while self.pids():
            self.kill()
            if time.monotonic() > deadline:
                raise EngineError(f"processes of the container survived SIGKILL for {timeout:.0f} s: "
                                  f"{', '.join(map(str, self.pids()[:5]))}")
            time.sleep(0.01)
        for directory in self.dirs().values():
            for _ in range(100):  # the kernel may still be releasing the last task
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _v2_weight(shares: int) -> int:
    """cgroup v1 shares (2..262144, 1024 the default) on v2's weight scale (1..10000, 100)."""
    return max(1, min(10000, 1 + ((shares - 2) * 9999) // 262142))
