"""What watches a run from the host while it trains: CPU contention on its cores, the
quota of its output folder, MLLOG lines dropped for being over the limits, and on a run
with GPUs whether they were the run's alone (``gpu_sharing``). It also meters the energy
of the training window (``runner.energy``: the run's GPUs through NVML, the CPU through RAPL).

``reproduce`` starts the guards before training and applies their verdict to the result
after it: contention or dropped events make the result non-conforming (with the figure),
an exceeded quota makes it incomplete (the watcher stops the run's containers). The
runner's own share of the run's cores (its work, the engine serving it), when above the
contention threshold, is a note in ``training.notes``, never a non-conformance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from runner import events as run_events
from runner.engine.interface import Container, Engine, EngineError
from runner.energy import EnergyMeter, EnergySeries
from runner.run.contention import ContentionSampler, ContentionSummary, _container_of
from runner.run.gpu_freeze import run_gpu_indices
from runner.run.gpu_sharing import GpuSharingSampler, GpuSharingSummary
from runner.run.cores import cpuset_for
from runner.run.output_quota import OutputQuota


def run_containers(engine: Engine, run_id: str) -> list[Container]:
    return engine.owned(run_id)


def stop_run_containers(engine: Engine, run_id: str) -> None:
    """Kill the run's containers (the runner's own container code then removes them)."""
    for c in run_containers(engine, run_id):
        try:
            c.stop()
        except EngineError:
            pass  # already stopped


class _OwnContainers:
    """Is a container id one of the run's? Asks the engine again (at most twice a second)
    when an id it does not know yet shows up: the run's containers start after the sampler."""

    def __init__(self, engine: Engine, run_id: str):
        self.engine, self.run_id = engine, run_id
        self.ids: set[str] = set()
        self.asked = 0.0

    def __call__(self, container_id: str | None) -> bool:
        if container_id is None:
            return False
        if container_id not in self.ids and time.monotonic() - self.asked > 0.5:
            self.asked = time.monotonic()
            try:
                self.ids = {c.id for c in run_containers(self.engine, self.run_id)}
            except (EngineError, OSError):
                pass
        return container_id in self.ids


@dataclass
class GuardVerdict:
    nonconforming: list[str] = field(default_factory=list)
    incomplete: str | None = None
    notes: list[str] = field(default_factory=list)  # said in the result, not a non-conformance
    contention: ContentionSummary | None = None
    gpu_sharing: GpuSharingSummary | None = None
    energy: EnergySeries | None = None


class RunGuards:
    def __init__(self, engine: Engine, run_id: str, cpus: float | None, output_dir: Path,
                 quota_bytes: int | None = None, gpus: int = 0):
        own = _OwnContainers(engine, run_id)
        self.contention = ContentionSampler(cpuset_for(cpus), own)
        self.gpu_sharing = GpuSharingSampler(run_gpu_indices(gpus), lambda pid: own(_container_of(str(pid)))) \
            if gpus else None
        self.energy = EnergyMeter(run_gpu_indices(gpus))
        self.quota = OutputQuota(output_dir, lambda: stop_run_containers(engine, run_id), quota_bytes)
        self._dropped_before: dict[str, int] = {}

    def start(self) -> RunGuards:
        self._dropped_before = run_events.dropped()
        self.contention.start()
        self.quota.start()
        if self.gpu_sharing is not None:
            self.gpu_sharing.start()
        self.energy.start()
        return self

    def stop(self) -> GuardVerdict:
        verdict = GuardVerdict(incomplete=self.quota.stop())
        verdict.contention = summary = self.contention.stop()
        if problem := summary.problem():
            verdict.nonconforming.append(problem)
        if note := summary.note():
            verdict.notes.append(note)
        verdict.energy = self.energy.stop()
        if self.gpu_sharing is not None:
            verdict.gpu_sharing = sharing = self.gpu_sharing.stop()
            if problem := sharing.problem():
                verdict.nonconforming.append(problem)
        after = run_events.dropped()
        lost = {why: n - self._dropped_before.get(why, 0) for why, n in after.items()}
        lost = {why: n for why, n in lost.items() if n > 0}
        if lost:
            verdict.nonconforming.append(
                "MLLOG lines ignored for exceeding the runner's limits: "
                + ", ".join(f"{n} x {why}" for why, n in sorted(lost.items())))
        return verdict
