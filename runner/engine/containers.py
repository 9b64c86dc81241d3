"""Start an entry's container locked down, stream its output with host timestamps,
and always remove it.

The lock-down is the run contract's: no network, a non-root user, every capability
dropped, no-new-privileges, a read-only root with tmpfs scratch, CPU/memory limits and
the profile's GPUs. Timestamps are the host's monotonic clock, taken as each line arrives.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import docker
from docker.types import DeviceRequest

from runner.engine import labels as ownership
from runner.engine.kinds import create_options, current

# Every container the runner starts carries this label, so an orphan left by a killed
# runner can be found and removed by the next run.
MANAGED_LABEL = "dev.runner.container"
CONTAINER_USER = "1000:1000"
# What every container gets beside no network, user, capabilities and a read-only root.
TMPFS = {"/scratch": "rw,size=2g,mode=1777", "/tmp": "rw,size=512m,mode=1777"}
SHM_SIZE = "1g"
PIDS_LIMIT = 4096
# The longest output line kept whole; longer lines are cut (and say so) in log and events.
MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True)
class Mount:
    host: Path
    container: str
    read_only: bool = True


@dataclass
class ContainerSpec:
    image: str
    command: list[str]
    mounts: list[Mount]
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/entry"
    cpus: float | None = None
    memory: str | int | None = None
    gpus: int = 0
    timeout_s: float = 3600
    label: str = "train"
    entrypoint: list[str] | None = None  # overrides the image's ENTRYPOINT (the launcher)
    # Multi-process runs only. On one host, every rank joins rank 0's network namespace
    # (``network_of``: rank 0's name), which has no interface but loopback: the ranks reach
    # each other on 127.0.0.1 and nothing else. Across nodes, the cluster's internal network
    # (``network``) and a name the other nodes resolve. Each rank: one core, its GPU ids.
    # Otherwise: no network at all.
    network: str | None = None
    network_of: str | None = None
    name: str | None = None
    core: int | None = None
    gpu_ids: list[str] | None = None
    # The CPU weight against the other containers (the engine's default: 1024). The evaluator
    # starts beside the entry at the lowest weight, so it takes only cycles the entry leaves idle.
    cpu_shares: int | None = None


@dataclass
class ContainerOutcome:
    exit_code: int | None
    timed_out: bool
    interrupted: bool
    wall_seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.interrupted) and self.error is None

    def reason(self) -> str | None:
        """Why the run is incomplete, in words for result.json; None when it ended well."""
        if self.interrupted:
            return "interrupted"
        if self.timed_out:
            return f"timed out after {self.wall_seconds:.0f} s"
        if self.error:
            return self.error
        if self.exit_code:
            return f"container exited with code {self.exit_code}"
        return None


def prepare_writable(path: Path) -> None:
    """Create a host folder the container's unprivileged user can write to."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        uid, gid = (int(x) for x in CONTAINER_USER.split(":"))
        os.chown(path, uid, gid)


def owned_labels(role: str) -> dict[str, str]:
    """Labels for any container the runner creates: a runner killed mid-way leaves it
    behind, and the next run's ``remove_orphans`` can then prove it orphaned."""
    return {MANAGED_LABEL: role, **ownership.container_labels()}


def remove_orphans(client: docker.DockerClient) -> int:
    """Remove containers of earlier runs whose runner was killed before it could clean up.

    Only containers this host can prove orphaned: labelled by a runner on this host whose
    process is gone (or whose pid now belongs to another process). Containers of live runs,
    of other hosts sharing the engine, or without owner labels are never touched."""
    removed = 0
    listed = client.containers.list(all=True, filters={"label": MANAGED_LABEL})
    # Newest first: a rank that joined rank 0's network namespace goes before rank 0.
    for c in sorted(listed, key=lambda c: str(c.attrs.get("Created", "")), reverse=True):
        owner = ownership.owner_from_labels(c.labels or {})
        if owner is None or not owner.gone():
            continue
        try:
            c.remove(force=True)
            removed += 1
        except docker.errors.APIError as exc:  # gone, or being removed by someone else
            if exc.status_code not in (404, 409):
                raise
    return removed


def cpu_limits(cpus: float | None) -> dict:
    """Whole cores are given as a cpuset: pinned cores have no CFS quota to hit, and a
    quota throttles multi-threaded math libraries in bursts that skew timing. Fractions
    of a core can only be a quota."""
    if not cpus:
        return {}
    host = os.cpu_count() or 1
    if float(cpus).is_integer() and cpus <= host:
        return {"cpuset_cpus": f"0-{int(cpus) - 1}"}
    return {"nano_cpus": int(cpus * 1e9)}


def _create(client: docker.DockerClient, spec: ContainerSpec):
    cdi = current().name == "podman"  # Podman takes GPUs as CDI devices, not device requests
    devices = None
    if cdi and (spec.gpu_ids or spec.gpus):
        ids = spec.gpu_ids or [str(i) for i in range(spec.gpus)]
        devices, device_requests = [f"nvidia.com/gpu={i}" for i in ids], None
    elif spec.gpu_ids:
        device_requests = [DeviceRequest(device_ids=spec.gpu_ids, capabilities=[["gpu"]])]
    elif spec.gpus:
        device_requests = [DeviceRequest(count=spec.gpus, capabilities=[["gpu"]])]
    else:
        device_requests = None
    if spec.network:
        network = {"network": spec.network, "hostname": spec.name}
    elif spec.network_of:  # the namespace, hostname and /etc/hosts of that container
        network = {"network_mode": f"container:{spec.network_of}"}
    else:
        network = {"network_mode": "none"}
    if spec.name:
        network["name"] = spec.name
    cpus = {"cpuset_cpus": str(spec.core)} if spec.core is not None else cpu_limits(spec.cpus)
    return client.containers.create(
        spec.image,
        command=spec.command,
        entrypoint=spec.entrypoint,
        user=CONTAINER_USER,
        working_dir=spec.workdir,
        environment=spec.env,
        **network,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        read_only=True,
        tmpfs=dict(TMPFS),
        shm_size=SHM_SIZE,
        pids_limit=PIDS_LIMIT,
        **cpus,
        **({"cpu_shares": spec.cpu_shares} if spec.cpu_shares else {}),
        mem_limit=spec.memory,
        memswap_limit=spec.memory,  # no swap: a memory limit that swaps would skew timing
        device_requests=device_requests,
        **({"devices": devices} if devices else {}),
        volumes={
            str(m.host): {"bind": m.container, "mode": "ro" if m.read_only else "rw"}
            for m in spec.mounts
        },
        labels=owned_labels(spec.label),
        detach=True,
        **create_options(),  # what the engine in use needs on every container (runner.engine.kinds)
    )


def run_container(
    client: docker.DockerClient,
    spec: ContainerSpec,
    on_line: Callable[[str, float], None],
    log_path: Path,
    *,
    on_started: Callable[[object, Callable[[], float]], None] | None = None,
    cancel: threading.Event | None = None,
    before_remove: Callable[[bool], None] | None = None,
) -> ContainerOutcome:
    """Run ``spec`` to its end, calling ``on_line(line, t)`` for every output line, where
    ``t`` is host monotonic seconds since just before the container started.

    ``on_started(container, clock)`` is called once the container runs, before any line
    is read; ``clock()`` gives the time on the same scale as ``t``. Setting ``cancel``
    stops and removes the container (recorded as interrupted). ``before_remove(ended)`` is
    called once the container has stopped, before it is removed (``ended``: it ran to its
    end, not timed out or interrupted): containers that share its network namespace must
    be gone first, since an engine may refuse to remove a namespace still in use."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    container = _create(client, spec)
    stream = container.attach(stdout=True, stderr=True, stream=True, logs=True)
    failure: list[BaseException] = []
    t0 = time.monotonic()

    def pump() -> None:
        # Linear in the output's size: each chunk is split once, and a partial line is kept
        # only up to MAX_LINE_BYTES (the rest of an over-long line is counted, not kept).
        partial = bytearray()
        dropped = 0  # bytes cut from the current over-long line

        def emit(raw: bytes, now: float) -> None:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if dropped:
                line += f" [... {dropped} more bytes cut by the runner]"
            log.write(f"[{now:10.3f}] {line}\n")
            try:
                on_line(line, now)
            except Exception as exc:  # a consumer's bug must not stop the reading,
                if not failure:  # but the outcome says so (first failure only)
                    failure.append(exc)

        try:
            with open(log_path, "a", buffering=1) as log:
                for chunk in stream:
                    now = time.monotonic() - t0
                    start = 0
                    while (end := chunk.find(b"\n", start)) >= 0:
                        room = MAX_LINE_BYTES - len(partial)
                        piece = chunk[start:end]
                        dropped += max(0, len(piece) - room)
                        partial += piece[:room]
                        emit(bytes(partial), now)
                        partial.clear()
                        dropped = 0
                        start = end + 1
                    rest = chunk[start:]
                    room = MAX_LINE_BYTES - len(partial)
                    dropped += max(0, len(rest) - room)
                    partial += rest[:room]
                if partial or dropped:
                    emit(bytes(partial), time.monotonic() - t0)
        except BaseException as exc:  # surfaced in the main thread
            failure.append(exc)

    reader = threading.Thread(target=pump, name=f"runner-{spec.label}-output", daemon=True)
    timed_out = interrupted = False
    exit_code: int | None = None
    error: str | None = None
    try:
        t0 = time.monotonic()
        container.start()
        if on_started is not None:
            on_started(container, lambda: time.monotonic() - t0)
        reader.start()
        deadline = t0 + spec.timeout_s
        while reader.is_alive():
            reader.join(timeout=0.2)
            if cancel is not None and cancel.is_set():
                interrupted = True
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
        if not (timed_out or interrupted):  # a cancelled container is removed at once below
            exit_code = container.wait(timeout=60).get("StatusCode")
    except KeyboardInterrupt:
        interrupted = True
    except docker.errors.APIError as exc:
        error = f"engine error: {exc.explanation or exc}"
    finally:
        wall = time.monotonic() - t0
        try:
            if before_remove is not None:
                before_remove(not (timed_out or interrupted) and error is None)
            container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # e.g. a removal already in progress
            error = error or f"engine error while removing the container: {exc.explanation or exc}"
        reader.join(timeout=5)
    if failure and error is None:
        error = f"output stream failed: {failure[0]}"
    return ContainerOutcome(exit_code, timed_out, interrupted, wall, error)
