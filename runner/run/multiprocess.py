"""Multi-process training: one locked-down container per rank, one clock.

An entry whose manifest asks for ``processes_per_node > 1`` gets one container per process
(rank). On one host, rank 0 has no network at all (as any run) and every other rank joins
rank 0's network namespace: the only interface they share is loopback, so the ranks reach
each other on 127.0.0.1 and nothing else, with no bridge, no name service and no firewall
rule of the engine's to rely on. (An internal bridge network did that job before; under
Podman 4.3 its traffic between containers is dropped on any host where Docker has set the
FORWARD policy to DROP, since netavark adds no accept rule for internal networks.) Each rank
gets what ``torchrun`` would give it (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``), one core of its host and,
on GPU hosts, one GPU.

One clock: rank 0 is the run's ordinary training container (``runner.run.training``), so
its launcher stamps the start, its events drive TTA, and the runner's evaluations of its
checkpoints freeze every rank. The other ranks start as soon as rank 0 runs; each one's
output is kept in ``logs/train-rank<r>.log``. When any rank ends badly, rank 0 is stopped,
since a collective would otherwise wait for the dead peer until the timeout.

A run spanning nodes (``nodes > 1``) uses the same pieces on every node: ``Peers`` runs a
node's ranks, each on the cluster's network under a name the other nodes resolve
(``runner.run.allocation``, ``runner.run.remote_nodes``, ``runner.run.node_agent``).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

from runner.engine.containers import ContainerOutcome, ContainerSpec, run_container
from runner.engine.interface import Container, Engine, EngineError

RENDEZVOUS_PORT = 29500
LOOPBACK = "127.0.0.1"


def rank_name(run_name: str, rank: int) -> str:
    return f"{run_name}-rank{rank}"


def rank_env(env: dict[str, str], run_name: str, rank: int, world_size: int,
             per_node: int | None = None, across_nodes: bool = False) -> dict[str, str]:
    """torchrun's variables for one rank, and one thread per rank's core. ``per_node``: the
    ranks of each node (default: every rank on one host); rank r runs on node r // per_node.
    On one host the ranks meet on loopback; ``across_nodes``, on the cluster network by name."""
    per_node = per_node or world_size
    return {
        **env,
        "MASTER_ADDR": rank_name(run_name, 0) if across_nodes else LOOPBACK,
        "MASTER_PORT": str(RENDEZVOUS_PORT),
        "WORLD_SIZE": str(world_size),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % per_node),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(rank // per_node),
        # the cluster network (the container's only interface), or the shared loopback
        "GLOO_SOCKET_IFNAME": "eth0" if across_nodes else "lo",
        "RUNNER_THREADS": "1",
    }


def rank_spec(spec: ContainerSpec, run_name: str, network: str | None, rank: int, world_size: int,
              gpus: int, per_node: int | None = None) -> ContainerSpec:
    """Rank ``rank``'s container, one core (and GPU): on the cluster ``network`` when the run
    spans nodes, else in rank 0's network namespace (rank 0 itself: no network). Consecutive
    ranks of one node get distinct cores and GPUs (rank modulo the node's count)."""
    across = network is not None
    return replace(
        spec, env=rank_env(spec.env, run_name, rank, world_size, per_node, across_nodes=across),
        network=network, network_of=None if across or rank == 0 else rank_name(run_name, 0),
        name=rank_name(run_name, rank), core=rank % (os.cpu_count() or 1),
        gpu_ids=[str(rank % gpus)] if gpus else None, gpus=0,
    )


def rank_log(result_dir: Path, rank: int) -> Path:
    return result_dir / "logs" / ("train.log" if rank == 0 else f"train-rank{rank}.log")


class Peers:
    """Ranks of a run other than rank 0 on this host, each in its own thread through
    ``run_container`` (``ranks``: their numbers, default 1, 2, ...)."""

    def __init__(self, engine: Engine, specs: list[ContainerSpec], result_dir: Path,
                 on_failure, ranks: list[int] | None = None):
        self.engine, self.specs, self.result_dir = engine, specs, result_dir
        self.ranks = ranks or list(range(1, len(specs) + 1))
        self.on_failure = on_failure  # on_failure("rank r", why), once per rank that ends badly
        self.containers: dict[int, Container] = {}
        self.outcomes: dict[int, ContainerOutcome] = {}
        self.cancel = threading.Event()
        self.threads: list[threading.Thread] = []
        self.running = {rank: threading.Event() for rank in self.ranks}  # started, or ended
        self._lock = threading.Lock()

    def _run(self, rank: int, spec: ContainerSpec) -> None:
        def started(container: Container, clock) -> None:
            with self._lock:
                self.containers[rank] = container
            self.running[rank].set()

        try:
            outcome = run_container(self.engine, spec, lambda line, t: None, rank_log(self.result_dir, rank),
                                    on_started=started, cancel=self.cancel)
        except EngineError as exc:  # the container could not even be created
            outcome = ContainerOutcome(None, False, False, 0.0, f"engine error: {exc}")
        finally:
            self.running[rank].set()
        self.outcomes[rank] = outcome
        if not outcome.ok and not self.cancel.is_set():
            self.on_failure(f"rank {rank}", outcome.reason())

    def start(self) -> None:
        for rank, spec in zip(self.ranks, self.specs):
            thread = threading.Thread(target=self._run, args=(rank, spec), daemon=True, name=f"runner-rank{rank}")
            thread.start()
            self.threads.append(thread)

    def wait_running(self, timeout_s: float = 120) -> bool:
        """Wait until every rank's container runs (or ended): a pause then misses none."""
        deadline = time.monotonic() + timeout_s
        return all(event.wait(max(0.0, deadline - time.monotonic())) for event in self.running.values())

    def each(self, action: str) -> dict[int, str]:
        """``pause`` (freeze) or ``unpause`` (thaw) every peer (the evaluations freeze every rank);
        each rank's state as the engine then reports it ("paused", "running", "exited", ...).
        (The words are those the runner sends a node agent.)
        A pause first waits for every container to run: one that started after the freeze
        would work in excluded time."""
        if action == "pause":
            self.wait_running()
        with self._lock:
            containers = dict(self.containers)
        states = {}
        for rank, container in sorted(containers.items()):
            try:
                if action == "pause":
                    container.freeze()
                else:
                    container.thaw()
                states[rank] = container.state().status
            except EngineError:
                states[rank] = "exited"  # it ended meanwhile: nothing left to freeze
        return states

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
