"""Was the run alone on its cores? A small sampler thread, started and stopped around
training, measures two things every ~0.5 s:

- CPU steal on the run's CPUs (``/proc/stat``): time a hypervisor gave to other guests;
- runnable tasks on the run's CPUs (state ``R`` in ``/proc/<pid>/stat``, or per thread in
  ``/proc/<pid>/task/<tid>/stat`` for a process with more than one), in three groups:

  - the run's own containers (cgroup of one of them): not counted;
  - the runner's own work: the runner process (its threads but the sampler's) and its
    descendants (by parent pid: a process reparented away is no longer one), and the
    Docker engine serving it (``dockerd``, ``containerd``, the ``containerd-shim*`` of the
    run's containers, which copy their output to the runner, and what these start outside
    containers, like ``runc``; a run that floods stdout keeps them busy). The engine is
    told by ``comm`` and owner (root, or the runner's user), outside any container;
  - other tenants: everything else (a shim serving another container included).

``stop()`` returns a summary. The same sampler, for about a second, is the check for a busy
host before the build and before training (``runner.run.calm``), which names the other
tenants' processes it saw runnable most often (``others``). Steal or other tenants' tasks above their threshold make
the result non-conforming, with the figure in the reason; the runner's own share is
reported apart (``runner_runnable_per_cpu``) and above the same threshold gives a note,
never a non-conformance.

Cheap by design, as it samples during the timed window: one read of ``/proc/<pid>/stat``
per process (the task folder only for a multi-threaded one), and what takes more reads
(the cgroup, a shim's command line) is read once per process, for those seen runnable on
the run's CPUs, and kept until the pid's start time changes (a reused pid).
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

INTERVAL_S = 0.5
# Thresholds (settings): steal as a fraction of the CPUs' time, and other runnable tasks
# per pinned CPU on average (0.2 = a fifth of every core taken by something else). On a
# 2-core run, one busy process beside it is 0.5 and stretched an epoch 4x (measured).
DEFAULT_MAX_STEAL = 0.05
DEFAULT_MAX_OTHER_RUNNABLE = 0.2

PROC = Path("/proc")
# The classes of a runnable process.
OWN, RUNNER, OTHER = "own", "runner", "other"
# The Docker engine's processes, by ``comm`` (cut at 15 characters by the kernel, so
# ``containerd-shim-runc-v2`` reads ``containerd-shim``).
ENGINE_COMMS = frozenset({"dockerd", "containerd", "podman"})
SHIM_COMM = "containerd-shim"
CONMON_COMM = "conmon"  # Podman's per-container monitor: its shim


def thresholds() -> tuple[float, float]:
    """(max steal fraction, max other runnable tasks per CPU), from the environment."""
    return (float(os.environ.get("RUNNER_MAX_STEAL", DEFAULT_MAX_STEAL)),
            float(os.environ.get("RUNNER_MAX_OTHER_RUNNABLE", DEFAULT_MAX_OTHER_RUNNABLE)))

# Docker's cgroups end in docker/<id> or docker-<id>.scope; Podman's in libpod-<id>.
_CONTAINER_ID = re.compile(r"(?:docker|libpod|runner)[/-]([0-9a-f]{64})")  # runner: the daemonless engines (runner.engine.cgroups)
# A shim's command line names the container it serves: ``-id <id>`` (runc v2 shim) or a
# path ending in it (v1 shim's ``-workdir .../moby/<id>``).
_SHIM_ID = re.compile(r"(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])")


def parse_cpuset(text: str | None) -> list[int]:
    """``"0-1,4"`` -> ``[0, 1, 4]``; None or "" -> every CPU of the host."""
    if not text:
        return list(range(os.cpu_count() or 1))
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def cpu_times(cpus: list[int], stat_path: Path = PROC / "stat") -> tuple[int, int]:
    """(steal, total) jiffies summed over ``cpus``."""
    steal = total = 0
    wanted = {f"cpu{c}" for c in cpus}
    for line in stat_path.read_text().splitlines():
        name, *fields = line.split()
        if name in wanted:
            values = [int(v) for v in fields[:8]]  # user..steal; guest time is inside user
            total += sum(values)
            steal += values[7] if len(values) > 7 else 0
    return steal, total


def _container_of(pid: str, proc: Path = PROC) -> str | None:
    try:
        match = _CONTAINER_ID.search(Path(f"{proc}/{pid}/cgroup").read_text())
    except OSError:
        return None
    return match.group(1) if match else None


def _split_stat(text: str) -> tuple[str, list[str]]:
    """A ``stat`` line -> (comm, the fields after it: [0] state, [1] ppid, [17] threads,
    [19] start time, [36] last CPU)."""
    close = text.rfind(")")
    return text[text.find("(") + 1:close], text[close + 2:].split()


@dataclass(frozen=True)
class _Facts:
    """What classifying a process needs beyond its stat line; read once per (pid, start)."""

    start: str  # start time (clock ticks after boot): another process on a reused pid has another
    container: str | None  # from its cgroup
    engine: bool  # dockerd, containerd or a containerd shim, outside containers, root's or ours
    serves: str | None  # a shim: the container it serves


@dataclass(frozen=True)
class RunnableCount:
    other: int  # other tenants' tasks: what contention is
    runner: int  # the runner's own work (it, its descendants, the engine serving it)
    own: int  # the run's containers


class RunnableCounter:
    """Counts the runnable tasks on a set of CPUs, by class. Keeps what it learnt of each
    process between calls; ``last`` is the class of each process counted by the last call."""

    def __init__(self, is_own: Callable[[str | None], bool] = lambda cid: False, me: int | None = None,
                 proc: Path | str = PROC):
        self.is_own = is_own
        self.me = os.getpid() if me is None else me
        self.proc = Path(proc)
        self.uids = {0, os.getuid()}  # an engine runs as root (or, rootless, as us)
        self.last: dict[int, str] = {}
        self._facts: dict[int, _Facts] = {}

    def count(self, cpus: set[int], skip_tids: Iterable[int] = ()) -> RunnableCount:
        skip = set(skip_tids)
        proc = str(self.proc)
        procs: dict[int, tuple[int, str, str]] = {}  # every process: (parent pid, comm, start time)
        running: dict[int, int] = {}  # pid -> its tasks runnable on the CPUs
        for entry in os.scandir(proc):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                with open(f"{proc}/{pid}/stat") as f:
                    comm, fields = _split_stat(f.read())
            except OSError:
                continue  # gone
            if len(fields) <= 36:
                continue
            procs[pid] = (int(fields[1]), comm, fields[19])
            # The process's line has its leader's state and CPU; its other threads are read
            # only when it has some.
            n = 1 if fields[0] == "R" and int(fields[36]) in cpus and pid not in skip else 0
            if int(fields[17]) > 1:
                n += self._other_threads(pid, cpus, skip)
            if n:
                running[pid] = n
        counts = {OWN: 0, RUNNER: 0, OTHER: 0}
        self.last = {}
        ours: dict[int, bool] = {}
        for pid, n in running.items():
            kind = self._classify(pid, procs, ours)
            counts[kind] += n
            self.last[pid] = kind
        for pid in [pid for pid in self._facts if pid not in procs]:  # forget those gone
            del self._facts[pid]
        return RunnableCount(other=counts[OTHER], runner=counts[RUNNER], own=counts[OWN])

    def container(self, pid: int) -> str | None:
        """The container of a process the last call counted (None: none, or not known)."""
        facts = self._facts.get(pid)
        return facts.container if facts is not None else None

    def _other_threads(self, pid: int, cpus: set[int], skip: set[int]) -> int:
        n = 0
        try:
            tasks = list(os.scandir(f"{self.proc}/{pid}/task"))
        except OSError:
            return 0
        for task in tasks:
            if task.name == str(pid) or not task.name.isdigit() or int(task.name) in skip:
                continue
            try:
                with open(f"{self.proc}/{pid}/task/{task.name}/stat") as f:
                    _, fields = _split_stat(f.read())
            except OSError:
                continue
            if len(fields) > 36 and fields[0] == "R" and int(fields[36]) in cpus:
                n += 1
        return n

    def _classify(self, pid: int, procs: dict[int, tuple[int, str, str]], ours: dict[int, bool]) -> str:
        facts = self._facts_of(pid, procs[pid])
        if facts.container is not None and self.is_own(facts.container):
            return OWN
        if self._descends(pid, procs, ours):
            return RUNNER
        if facts.container is not None:
            return OTHER  # another container's
        if not facts.engine:
            # A child the engine started outside containers (``runc``, started by a shim
            # to create, start or delete a container) is the engine's work too.
            parent = procs.get(procs[pid][0])
            if parent is None or not _engine_comm(parent[1]):
                return OTHER
            facts = self._facts_of(procs[pid][0], parent)
            if facts.container is not None or not facts.engine:
                return OTHER
        # A shim serves one container: the run's (its output, to the runner), or another's.
        return RUNNER if facts.serves is None or self.is_own(facts.serves) else OTHER

    def _facts_of(self, pid: int, seen: tuple[int, str, str]) -> _Facts:
        _, comm, start = seen
        facts = self._facts.get(pid)
        if facts is None or facts.start != start:
            facts = self._facts[pid] = self._learn(pid, comm, start)
        return facts

    def _learn(self, pid: int, comm: str, start: str) -> _Facts:
        container = _container_of(str(pid), self.proc)
        engine = serves = None
        if container is None and _engine_comm(comm):
            try:
                engine = os.stat(f"{self.proc}/{pid}").st_uid in self.uids
            except OSError:
                engine = False
            if engine and (comm.startswith(SHIM_COMM) or comm == CONMON_COMM):
                try:
                    cmdline = Path(f"{self.proc}/{pid}/cmdline").read_bytes().decode(errors="replace")
                except OSError:
                    cmdline = ""
                ids = _SHIM_ID.findall(cmdline.replace("\0", " "))
                serves = ids[-1] if ids else None
        return _Facts(start=start, container=container, engine=bool(engine), serves=serves)

    def _descends(self, pid: int, procs: dict[int, tuple[int, str, str]], ours: dict[int, bool]) -> bool:
        """Is ``pid`` the runner or one of its descendants (by the parent pids read this time)?
        A process whose parent exited is reparented (to init or a subreaper) and is no longer one."""
        chain: list[int] = []
        p, verdict = pid, False
        while True:
            if p == self.me:
                verdict = True
                break
            if p in ours:
                verdict = ours[p]
                break
            if p <= 1 or p not in procs or len(chain) > 4096:
                break
            chain.append(p)
            p = procs[p][0]
        for q in chain:
            ours[q] = verdict
        return verdict


def _engine_comm(comm: str) -> bool:
    return comm in ENGINE_COMMS or comm.startswith(SHIM_COMM) or comm == CONMON_COMM


def other_runnable(cpus: set[int], is_own: Callable[[str | None], bool], me: int) -> int:
    """Other tenants' tasks in state R on ``cpus`` (neither the run's containers' nor the runner's work)."""
    return RunnableCounter(is_own, me).count(cpus).other


@dataclass
class ContentionSummary:
    cpus: list[int]
    samples: int
    steal_fraction: float
    other_runnable_per_cpu: float  # mean over samples; other tenants only
    other_runnable_peak: int
    # The runner's own work on the run's CPUs (it, its children, the engine serving it):
    # reported, never a contention.
    runner_runnable_per_cpu: float = 0.0  # mean over samples
    runner_runnable_peak: int = 0

    def _where(self) -> str:
        return f"CPUs {','.join(map(str, self.cpus))}"

    def problem(self) -> str | None:
        """Why the run did not have its cores to itself (with the figure), or None."""
        where = self._where()
        max_steal, max_runnable = thresholds()
        if self.steal_fraction > max_steal:
            return (f"CPU contention: steal was {self.steal_fraction:.1%} of {where} "
                    f"(threshold {max_steal:.0%})")
        if self.other_runnable_per_cpu > max_runnable:
            return (f"CPU contention: {self.other_runnable_per_cpu:.2f} other runnable tasks per CPU "
                    f"on {where} on average over {self.samples} samples, peak {self.other_runnable_peak} "
                    f"(threshold {max_runnable:g}, RUNNER_MAX_OTHER_RUNNABLE)")
        return None

    def note(self) -> str | None:
        """When the runner's own work took a share of the run's cores above the threshold:
        a note saying so (not a contention: no other tenant did it), or None."""
        _, max_runnable = thresholds()
        if self.runner_runnable_per_cpu <= max_runnable:
            return None
        return (f"runner's own work on the run's cores: {self.runner_runnable_per_cpu:.2f} runnable tasks "
                f"per CPU of the runner, its child processes and the Docker engine serving it (reading "
                f"the run's output) on {self._where()} on average over {self.samples} samples, peak "
                f"{self.runner_runnable_peak} (threshold {max_runnable:g}); not counted as CPU contention")

    def to_dict(self) -> dict:
        return asdict(self)


class ContentionSampler:
    """``start()`` before training, ``stop()`` after it: the summary of what it saw."""

    def __init__(self, cpuset: str | None, is_own: Callable[[str | None], bool] = lambda cid: False,
                 interval_s: float = INTERVAL_S, proc: Path | str = PROC, me: int | None = None):
        self.cpus = parse_cpuset(cpuset)
        self.is_own = is_own  # is a container id (None: not in a container) the run's own?
        self.interval_s = interval_s
        self.proc = Path(proc)
        self.counter = RunnableCounter(is_own, me, self.proc)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._runnable: list[int] = []  # other tenants' tasks, per sample
        self._runner: list[int] = []  # the runner's own, per sample
        # Other tenants' processes: in how many samples each was runnable (who to name).
        self.others: Counter[int] = Counter()
        self._start_times = (0, 0)
        self.error: str | None = None

    def start(self) -> ContentionSampler:
        self._start_times = cpu_times(self.cpus, self.proc / "stat")
        self._thread = threading.Thread(target=self._sample, name="runner-contention", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        cpus, myself = set(self.cpus), (threading.get_native_id(),)  # the sampler is not the run's load
        try:
            while not self._stop.wait(self.interval_s):
                seen = self.counter.count(cpus, myself)
                self.others.update(pid for pid, kind in self.counter.last.items() if kind == OTHER)
                self._runner.append(seen.runner)
                self._runnable.append(seen.other)  # last: samples_taken counts complete samples
        except Exception as exc:  # a sampler failure is reported, never fatal to the run
            self.error = f"{type(exc).__name__}: {exc}"

    @property
    def samples_taken(self) -> int:
        return len(self._runnable)

    def stop(self) -> ContentionSummary:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        steal0, total0 = self._start_times
        steal1, total1 = cpu_times(self.cpus, self.proc / "stat")
        total = max(1, total1 - total0)
        samples, runner = list(self._runnable), self._runner[:len(self._runnable)]
        def per_cpu(xs):
            return sum(xs) / len(xs) / len(self.cpus) if xs else 0.0

        return ContentionSummary(
            cpus=self.cpus, samples=len(samples),
            steal_fraction=(steal1 - steal0) / total,
            other_runnable_per_cpu=per_cpu(samples),
            other_runnable_peak=max(samples, default=0),
            runner_runnable_per_cpu=per_cpu(runner),
            runner_runnable_peak=max(runner, default=0),
        )
