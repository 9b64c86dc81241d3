"""Evidence of training (class 4f): the CPU time the training containers used up to each
freeze, read by the host from their cgroups (``cpu_usage``), and with GPUs their busy time
(``gpu_freeze.GpuWorkMeter``). The entry cannot write any of it: it lands in the runner's
``eval_freeze`` events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.run.cpu_usage import ContainerCpu, Sampler
from runner.run.gpu_freeze import GpuWorkMeter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runner.engine.interface import Container
    from runner.run.freezer import RankGroup


class Evidence:
    """The training containers' counters, sampled while they run and read at each freeze."""

    def __init__(self, gpus: int):
        self.container: Container | None = None  # rank 0
        self.peers: Sequence[RankGroup] = ()
        self.cpu_counters: dict[int, ContainerCpu] = {}
        self.cpu_sampler = Sampler(self.cpu_counters)
        self.gpu_work = GpuWorkMeter(gpus) if gpus else None

    def start(self, container: Container, peers: Sequence[RankGroup]) -> None:
        """Rank 0 runs: its counter is found now, while it surely runs, then read every 0.1 s."""
        self.container, self.peers = container, peers
        self.cpu_counters[0] = ContainerCpu(container)
        self.cpu_counters[0].sample()
        self.cpu_sampler.start()

    def peers_started(self) -> None:
        """The other ranks were started: those of this host that already run are sampled too
        (the rest when a freeze first reads them), and the GPUs' busy time is metered."""
        for rank, peer in self._peer_containers().items():
            self.cpu_counters.setdefault(rank, ContainerCpu(peer))
        if self.gpu_work is not None:
            self.gpu_work.start()

    def _peer_containers(self) -> dict[int, Container]:
        """The containers of the ranks on this host (``Peers`` has them; other nodes' do not)."""
        found: dict[int, Container] = {}
        for group in self.peers:
            found.update(getattr(group, "containers", {}))
        return found

    def training_work(self) -> dict:
        """The ``eval_freeze`` fields of the work done so far (class 4f): ``cpu_seconds``, the
        CPU time every training container used (rank 0 and this host's other ranks, from their
        cgroups, read while frozen), and with GPUs ``gpu_work_seconds``. What could not be read
        is named in ``cpu_not_measured``, and ``cpu_seconds`` is then None (ranks on other nodes
        are never read: their agents keep no counter of the runner's)."""
        containers = {0: self.container, **self._peer_containers()}
        missing = [] if all(hasattr(group, "containers") for group in self.peers) else ["the ranks on other nodes"]
        total, read, stale = 0.0, 0, []
        for rank, container in sorted(containers.items()):
            counter = self.cpu_counters.setdefault(rank, ContainerCpu(container))
            if (seconds := counter.seconds()) is None:
                missing.append(f"rank {rank} ({counter.problem or 'its cgroup is gone'})")
            else:
                total, read = total + seconds, read + 1
                if counter.stale:
                    stale.append(rank)
        # Only the whole run's time is judged: a part of it is kept beside, under its own name.
        fields: dict = {"cpu_seconds": None if missing else round(total, 6)}
        if missing:
            fields.update(cpu_seconds_partial=round(total, 6) if read else None,
                          cpu_not_measured="; ".join(missing)[:300])
        if stale:  # gone before its request was handled: its last reading (at most 0.1 s old)
            fields["cpu_last_reading_ranks"] = stale
        if self.gpu_work is not None:
            fields["gpu_work_seconds"] = self.gpu_work.seconds()
        return fields

    def close(self) -> None:
        self.cpu_sampler.close()
        if self.gpu_work is not None:
            self.gpu_work.close()
