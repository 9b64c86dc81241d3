"""Multi-process training on one host: one locked-down container per rank, one clock.

An entry whose manifest asks for ``processes_per_node > 1`` gets one container per process
(rank), on a Docker network of the run's own that is ``internal`` (no gateway, no route
out): the ranks reach each other by container name and nothing else. Each rank gets what
``torchrun`` would give it (``MASTER_ADDR`` = rank 0's container, ``MASTER_PORT``,
``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``) and one core of the host.

One clock: the host stamps t=0 just before it starts rank 0's container, every line of
every rank is stamped against it, and only rank 0's events become the run's events (they
drive TTA); every rank's output is kept in its own log (rank 0: ``logs/train.log``, the
others: ``logs/train-rank<r>.log``). When any rank ends badly the others are stopped, since
a collective would otherwise wait for the dead peer until the timeout.

The lock-down is the run contract's (see ``runner.run.container``) except the network.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import docker
from docker.types import DeviceRequest

from runner.errors import UserError
from runner.run.container import (
    CONTAINER_USER,
    MANAGED_LABEL,
    ContainerOutcome,
    ContainerSpec,
    Mount,
    prepare_writable,
)
from runner.events import Event, parse_line
from runner.run.training import TrainingInputs, TrainingRun

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
        except docker.errors.NotFound:
            pass


def _create_rank(client: docker.DockerClient, spec: ContainerSpec, network: str, name: str,
                 core: int, gpu: int | None):
    # As runner.run.container._create, but on the run's internal network with a name peers
    # can resolve, pinned to one core and, on GPU hosts, given one GPU of its own.
    gpus = [DeviceRequest(device_ids=[str(gpu)], capabilities=[["gpu"]])] if gpu is not None else None
    return client.containers.create(
        spec.image,
        command=spec.command,
        name=name,
        hostname=name,
        user=CONTAINER_USER,
        working_dir=spec.workdir,
        environment=spec.env,
        network=network,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        read_only=True,
        tmpfs={"/scratch": "rw,size=2g,mode=1777", "/tmp": "rw,size=512m,mode=1777"},
        shm_size="1g",
        pids_limit=4096,
        cpuset_cpus=str(core),
        mem_limit=spec.memory,
        memswap_limit=spec.memory,
        device_requests=gpus,
        volumes={
            str(m.host): {"bind": m.container, "mode": "ro" if m.read_only else "rw"}
            for m in spec.mounts
        },
        labels={MANAGED_LABEL: f"{spec.label}-rank"},
        detach=True,
    )


def _pump(container, log_path: Path, t0: list[float], on_line, failures: list) -> None:
    """Copy one rank's output to its log, each line stamped on the shared clock."""
    try:
        stream = container.attach(stdout=True, stderr=True, stream=True, logs=True)
        pending = b""
        with open(log_path, "a", buffering=1) as log:
            for chunk in stream:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    now = time.monotonic() - t0[0]
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    log.write(f"[{now:10.3f}] {line}\n")
                    on_line(line, now)
            if pending:
                now = time.monotonic() - t0[0]
                line = pending.decode("utf-8", "replace")
                log.write(f"[{now:10.3f}] {line}\n")
                on_line(line, now)
    except BaseException as exc:  # surfaced by the caller
        failures.append(exc)


def _exit_code(container) -> int | None:
    try:
        container.reload()
    except docker.errors.NotFound:
        return None
    if container.status in ("exited", "dead"):
        return container.attrs["State"]["ExitCode"]
    return None


def run_multiprocess_training(client: docker.DockerClient, inputs: TrainingInputs,
                              world_size: int) -> TrainingRun:
    """Train with ``world_size`` ranks on this host; rank 0's events are the run's events.
    Each rank gets one core and, when ``inputs.gpus``, one GPU (rank modulo the GPUs)."""
    output_dir = inputs.result_dir / "output"
    prepare_writable(output_dir)
    run_name = f"runner-{inputs.result_dir.name}".lower()
    cores = os.cpu_count() or 1
    events: list[Event] = []

    def rank0_line(line: str, t: float) -> None:
        if (ev := parse_line(line, len(events), t)) is not None:
            events.append(ev)

    mounts = [Mount(inputs.train_dir, "/data/train"), Mount(inputs.eval_dir, "/data/eval"),
              Mount(output_dir, "/output", read_only=False)]
    t0 = [time.monotonic()]
    codes: list[int | None] = [None] * world_size
    failures: list[BaseException] = []
    timed_out = interrupted = False
    error: str | None = None
    with internal_network(client, run_name) as network:
        containers = []
        try:
            for rank in range(world_size):
                spec = ContainerSpec(
                    image=inputs.image, command=inputs.command, mounts=mounts,
                    env=rank_env(inputs.env, run_name, rank, world_size),
                    memory=inputs.memory, timeout_s=inputs.timeout_s, label="train",
                )
                gpu = rank % inputs.gpus if inputs.gpus else None
                containers.append(_create_rank(client, spec, network.name,
                                               rank_name(run_name, rank), rank % cores, gpu))
            readers = [
                threading.Thread(
                    target=_pump, daemon=True, name=f"runner-rank{rank}-output",
                    args=(c, rank_log(inputs.result_dir, rank), t0,
                          rank0_line if rank == 0 else (lambda line, t: None), failures),
                )
                for rank, c in enumerate(containers)
            ]
            rank_log(inputs.result_dir, 0).parent.mkdir(parents=True, exist_ok=True)
            for reader in readers:
                reader.start()
            t0[0] = time.monotonic()  # the run's clock starts with rank 0
            for c in containers:
                c.start()
            deadline = t0[0] + inputs.timeout_s
            while any(r.is_alive() for r in readers):
                time.sleep(0.2)
                seen = [_exit_code(c) for c in containers]
                if any(code not in (None, 0) for code in seen):
                    codes = seen  # before the peers are stopped, which gives them codes too
                    break  # a rank failed: its peers would wait for it until the timeout
                if time.monotonic() > deadline:
                    timed_out = True
                    break
            for c in containers:
                try:
                    c.stop(timeout=2)
                except docker.errors.APIError:
                    pass
            ended = [c.wait(timeout=60).get("StatusCode") for c in containers]
            if not any(code not in (None, 0) for code in codes):
                codes = ended
        except KeyboardInterrupt:
            interrupted = True
        except docker.errors.APIError as exc:
            error = f"engine error: {exc.explanation or exc}"
        finally:
            wall = time.monotonic() - t0[0]
            for c in containers:
                try:
                    c.remove(force=True)
                except docker.errors.APIError:  # gone already, or being removed
                    pass
    failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
    if error is None and not (timed_out or interrupted):
        if failures:
            error = f"output stream failed: {failures[0]}"
        elif failed and failed[0][0] != 0:
            error = f"rank {failed[0][0]} exited with code {failed[0][1]}"
    exit_code = failed[0][1] if failed else (codes[0] if not (timed_out or interrupted) else None)
    return TrainingRun(events, ContainerOutcome(exit_code, timed_out, interrupted, wall, error))
