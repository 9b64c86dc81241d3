"""Multi-process training on one host: one locked-down container per rank, one clock.

An entry whose manifest asks for ``processes_per_node > 1`` gets one container per process
(rank) on a Docker network of the run's own that is ``internal`` (no gateway, no route
out): the ranks reach each other by container name and nothing else. Each rank gets what
``torchrun`` would give it (``MASTER_ADDR`` = rank 0's container, ``MASTER_PORT``,
``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``), one core of the host and,
on GPU hosts, one GPU.

One clock: rank 0 is the run's ordinary training container (``runner.run.training``), so
its launcher stamps the start, its events drive TTA, and the runner's evaluations of its
checkpoints freeze every rank. The other ranks start as soon as rank 0 runs; each one's
output is kept in ``logs/train-rank<r>.log``. When any rank ends badly, rank 0 is stopped,
since a collective would otherwise wait for the dead peer until the timeout.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import docker

from runner.errors import UserError
from runner.run.container import MANAGED_LABEL, ContainerOutcome, ContainerSpec, run_container

RENDEZVOUS_PORT = 29500


def check_one_host(nodes: int) -> None:
    """Runs spanning machines need a cluster's network and allocation (docs/cluster.md)."""
    if nodes > 1:
        raise UserError(
            f"the entry asks for {nodes} nodes; this runner starts the processes of one run "
            "on one host only",
            "set nodes: 1 (and processes_per_node to the processes one host runs)",
        )


def rank_name(run_name: str, rank: int) -> str:
    return f"{run_name}-rank{rank}"


def rank_env(env: dict[str, str], run_name: str, rank: int, world_size: int) -> dict[str, str]:
    """torchrun's variables for one rank on one host, and one thread per rank's core."""
    return {
        **env,
        "MASTER_ADDR": rank_name(run_name, 0),
        "MASTER_PORT": str(RENDEZVOUS_PORT),
        "WORLD_SIZE": str(world_size),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GLOO_SOCKET_IFNAME": "eth0",  # the run's network, the container's only interface
        "RUNNER_THREADS": "1",
    }


def rank_spec(spec: ContainerSpec, run_name: str, network: str, rank: int, world_size: int,
              gpus: int) -> ContainerSpec:
    """Rank ``rank``'s container: the run's spec on the run's network, one core (and GPU)."""
    return replace(
        spec, env=rank_env(spec.env, run_name, rank, world_size), network=network,
        name=rank_name(run_name, rank), core=rank % (os.cpu_count() or 1),
        gpu_ids=[str(rank % gpus)] if gpus else None, gpus=0,
    )


def rank_log(result_dir: Path, rank: int) -> Path:
    return result_dir / "logs" / ("train.log" if rank == 0 else f"train-rank{rank}.log")


@contextmanager
def internal_network(client: docker.DockerClient, name: str):
    """A bridge network with no route out, removed with the run."""
    network = client.networks.create(name, driver="bridge", internal=True,
                                     labels={MANAGED_LABEL: "network"})
    try:
        yield network
    finally:
        try:
            network.remove()
        except docker.errors.APIError:  # gone, or still in use by a container being removed
            pass


class Peers:
    """Ranks 1.. of a run, each in its own thread through ``run_container``."""

    def __init__(self, client: docker.DockerClient, specs: list[ContainerSpec], result_dir: Path,
                 on_failure):
        self.client, self.specs, self.result_dir = client, specs, result_dir
        self.on_failure = on_failure  # called once when a rank ends badly (stops rank 0)
        self.containers: list = []
        self.outcomes: dict[int, ContainerOutcome] = {}
        self.cancel = threading.Event()
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _run(self, rank: int, spec: ContainerSpec) -> None:
        def started(container, clock) -> None:
            with self._lock:
                self.containers.append(container)

        outcome = run_container(self.client, spec, lambda line, t: None, rank_log(self.result_dir, rank),
                                on_started=started, cancel=self.cancel)
        self.outcomes[rank] = outcome
        if not outcome.ok and not self.cancel.is_set():
            self.on_failure(rank, outcome)

    def start(self) -> None:
        for rank, spec in enumerate(self.specs, start=1):
            thread = threading.Thread(target=self._run, args=(rank, spec), daemon=True, name=f"runner-rank{rank}")
            thread.start()
            self.threads.append(thread)

    def each(self, action: str) -> None:
        """``pause`` or ``unpause`` every peer (the evaluations freeze every rank)."""
        with self._lock:
            containers = list(self.containers)
        for container in containers:
            try:
                getattr(container, action)()
            except docker.errors.APIError:
                pass  # it ended meanwhile

    def stop(self, grace_s: float = 60) -> str | None:
        """Wait for the peers to end (rank 0 has); the first failure, in words, or None."""
        for thread in self.threads:
            thread.join(timeout=grace_s)
        self.cancel.set()
        for thread in self.threads:
            thread.join(timeout=30)
        for rank in sorted(self.outcomes):
            if (why := self.outcomes[rank].reason()) and why != "interrupted":
                return f"rank {rank}: {why}"
        return None
