"""Was the run alone on its cores? A small sampler thread, started and stopped around
training, measures two things every ~0.5 s:

- CPU steal on the run's CPUs (``/proc/stat``): time a hypervisor gave to other guests;
- other runnable tasks on the run's CPUs (``/proc/*/task/*/stat``, state ``R`` on one
  of those CPUs), leaving out the run's own containers and the runner itself.

``stop()`` returns a summary; a figure above its threshold makes the result
non-conforming, with the figure in the reason.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

INTERVAL_S = 0.5
# Thresholds (settings): steal as a fraction of the CPUs' time, and other runnable tasks
# per pinned CPU on average (0.2 = a fifth of every core taken by something else). On a
# 2-core run, one busy process beside it is 0.5 and stretched an epoch 4x (measured).
DEFAULT_MAX_STEAL = 0.05
DEFAULT_MAX_OTHER_RUNNABLE = 0.2


def thresholds() -> tuple[float, float]:
    """(max steal fraction, max other runnable tasks per CPU), from the environment."""
    return (float(os.environ.get("RUNNER_MAX_STEAL", DEFAULT_MAX_STEAL)),
            float(os.environ.get("RUNNER_MAX_OTHER_RUNNABLE", DEFAULT_MAX_OTHER_RUNNABLE)))

_CONTAINER_ID = re.compile(r"(?:docker[/-])([0-9a-f]{64})")


def parse_cpuset(text: str | None) -> list[int]:
    """``"0-1,4"`` -> ``[0, 1, 4]``; None or "" -> every CPU of the host."""
    if not text:
        return list(range(os.cpu_count() or 1))
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def cpu_times(cpus: list[int], stat_path: Path = Path("/proc/stat")) -> tuple[int, int]:
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


def _container_of(pid: str) -> str | None:
    try:
        match = _CONTAINER_ID.search(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None
    return match.group(1) if match else None


def other_runnable(cpus: set[int], is_own: Callable[[str | None], bool], me: int) -> int:
    """Tasks in state R on ``cpus`` that are neither the runner's nor its run's containers'."""
    count = 0
    for proc in os.scandir("/proc"):
        if not proc.name.isdigit() or int(proc.name) == me:
            continue
        try:
            tasks = list(os.scandir(f"/proc/{proc.name}/task"))
        except OSError:
            continue
        running = 0
        for task in tasks:
            try:
                text = Path(f"/proc/{proc.name}/task/{task.name}/stat").read_text()
            except OSError:
                continue
            fields = text[text.rfind(")") + 2:].split()
            # fields[0] is the state (field 3); fields[36] the last CPU (field 39).
            if len(fields) > 36 and fields[0] == "R" and int(fields[36]) in cpus:
                running += 1
        if running and not is_own(_container_of(proc.name)):
            count += running
    return count


@dataclass
class ContentionSummary:
    cpus: list[int]
    samples: int
    steal_fraction: float
    other_runnable_per_cpu: float  # mean over samples
    other_runnable_peak: int

    def problem(self) -> str | None:
        """Why the run did not have its cores to itself (with the figure), or None."""
        where = f"CPUs {','.join(map(str, self.cpus))}"
        max_steal, max_runnable = thresholds()
        if self.steal_fraction > max_steal:
            return (f"CPU contention: steal was {self.steal_fraction:.1%} of {where} "
                    f"(threshold {max_steal:.0%})")
        if self.other_runnable_per_cpu > max_runnable:
            return (f"CPU contention: {self.other_runnable_per_cpu:.2f} other runnable tasks per CPU "
                    f"on {where} on average over {self.samples} samples, peak {self.other_runnable_peak} "
                    f"(threshold {max_runnable:g}, RUNNER_MAX_OTHER_RUNNABLE)")
        return None

    def to_dict(self) -> dict:
        return asdict(self)


class ContentionSampler:
    """``start()`` before training, ``stop()`` after it: the summary of what it saw."""

    def __init__(self, cpuset: str | None, is_own: Callable[[str | None], bool] = lambda cid: False,
                 interval_s: float = INTERVAL_S):
        self.cpus = parse_cpuset(cpuset)
        self.is_own = is_own  # is a container id (None: not in a container) the run's own?
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._runnable: list[int] = []
        self._start_times = (0, 0)
        self.error: str | None = None

    def start(self) -> ContentionSampler:
        self._start_times = cpu_times(self.cpus)
        self._thread = threading.Thread(target=self._sample, name="runner-contention", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        me, cpus = os.getpid(), set(self.cpus)
        try:
            while not self._stop.wait(self.interval_s):
                self._runnable.append(other_runnable(cpus, self.is_own, me))
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
        steal1, total1 = cpu_times(self.cpus)
        total = max(1, total1 - total0)
        samples = self._runnable
        return ContentionSummary(
            cpus=self.cpus, samples=len(samples),
            steal_fraction=(steal1 - steal0) / total,
            other_runnable_per_cpu=(sum(samples) / len(samples) / len(self.cpus)) if samples else 0.0,
            other_runnable_peak=max(samples, default=0),
        )
