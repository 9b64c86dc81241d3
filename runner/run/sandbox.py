"""A command of the runner's harness run in a container of a run's own image, for a study:
locked down like every container the runner starts (no network, non-root, read-only root,
no capabilities, owner labels), with the harness mounted read-only, the inputs the study
names read-only, and one writable folder under a byte quota, read by the host alone once the
container is gone. What comes back is the entry's code's answer (its builder runs there):
each study parses it with bounds.

Used by the run's draw of its initial weights (``python3 -m harness init-shapes``), the
roofline study's count (``python3 -m harness flops``) and the generalization study's features
(``python3 -m harness features``).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from runner import paths
from runner.engine.containers import ContainerSpec, Mount, run_container
from runner.plan import Limits
from runner.errors import UserError
from runner.run.output_quota import OutputQuota

HARNESS_MOUNT = "/opt/runner/harness"


@dataclass(frozen=True)
class HarnessJob:
    """One command of the harness in a run's image: its arguments (after ``python3 -m
    harness``), its mounts, its one writable folder ``out`` (made with ``prepare_writable``)
    and that folder's quota, the container's limits (the plan's ``Limits``; no GPU), and how a
    failure is told (``what`` failed, ``fix``)."""

    arguments: list[str]
    mounts: list[Mount]
    out: Path
    quota_bytes: int
    limits: Limits
    label: str
    what: str
    fix: str
    log_path: Path | None = None


def harness_limits(cpus: float | None, memory: str | int | None, timeout_s: float) -> Limits:
    """A harness container's limits: the run's cores and memory, its own time-out."""
    return Limits(cpus=cpus, memory=memory, gpus=0, threads=threads_of(cpus), timeout_s=timeout_s)


def run_harness(engine, image_id: str, job: HarnessJob) -> None:
    """Run ``python3 -m harness ARGUMENTS...`` in ``image_id`` with the job's mounts (the
    harness is added) and its ``out`` folder; raise a one-line ``UserError`` saying what
    failed (and the fix) unless it exited 0 within the quota."""
    out, quota_bytes, label, log_path, what, fix = job.out, job.quota_bytes, job.label, job.log_path, job.what, job.fix
    spec = ContainerSpec(
        image=image_id,
        entrypoint=["python3"],  # the harness, whatever ENTRYPOINT the image names
        command=["-m", "harness", *job.arguments],
        mounts=[Mount(paths.harness_dir(), HARNESS_MOUNT), *job.mounts],
        env={"PYTHONPATH": "/opt/runner", "PYTHONDONTWRITEBYTECODE": "1",
             "OMP_NUM_THREADS": str(job.limits.threads), "HOME": "/tmp"},
        workdir="/entry",
        cpus=job.limits.cpus,
        memory=job.limits.memory,
        timeout_s=job.limits.timeout_s,
        label=label,
    )
    errors: list[str] = []

    def on_line(line: str, _t: float) -> None:
        if line.startswith("harness: error:") and len(errors) < 5:
            # The entry's output: shown to the user, so printable characters only.
            said = line.removeprefix("harness: error:").strip()[:500]
            errors.append("".join(c if c.isprintable() else "?" for c in said))

    cancel = threading.Event()
    quota = OutputQuota(out, cancel.set, limit_bytes=quota_bytes).start()
    with tempfile.TemporaryDirectory(prefix=f"runner-{label}-log-") as tmp:
        try:
            outcome = run_container(engine, spec, on_line, log_path or Path(tmp) / f"{label}.log", cancel=cancel)
        finally:
            over = quota.stop()
    if over:
        raise UserError(f"{what} in the entry's image {image_id[:19]} was stopped: it wrote over {quota_bytes:,} "
                        "bytes where the runner expected less", "the answer is the entry's own code's; check its builder")
    if outcome.interrupted:
        raise KeyboardInterrupt
    if not outcome.ok:
        why = "; ".join(errors) or outcome.reason() or "unknown"
        raise UserError(f"{what} in the entry's image {image_id[:19]} failed: {why}",
                        f"see {log_path}" if log_path else fix)


def threads_of(cpus: float | None) -> int:
    """The harness's threads: the profile's whole cores, else one."""
    return int(cpus) if cpus and float(cpus).is_integer() else 1


def read_small_text(path: Path, limit: int) -> str:
    """A text file a container wrote, read without following links or blocking on a FIFO,
    only if it is a regular file of at most ``limit`` bytes of UTF-8; ValueError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"no readable {path.name}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise ValueError(f"{path.name} is not a regular file under {limit} bytes")
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise ValueError(f"{path.name} is over {limit} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path.name} is not UTF-8") from None


def read_small_json(path: Path, limit: int) -> object:
    """A small JSON file a container wrote (``read_small_text``), with finite numbers only."""
    def constant(name: str):
        raise ValueError(f"{path.name} holds {name}, not a number")

    try:
        return json.loads(read_small_text(path, limit), parse_constant=constant)
    except RecursionError:
        raise ValueError(f"{path.name} is nested too deep") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path.name} is not JSON: {exc.msg}") from None
