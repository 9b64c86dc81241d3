"""A freeze that covers the GPU (threat-model class 2c).

``docker pause`` (the cgroup freezer) stops the entry's processes, but kernels they
queued on a GPU before the pause keep running: 500 queued matmuls kept an H100 at 100 %
for 6.7 s after a SIGSTOP. An entry could queue training work just before its
``eval_request`` and have it done inside the excluded window.

So after the pause, the excluded window starts only once the run's GPUs are idle. The
host reads NVML (through a ``GpuReader``) every ``interval_s``: device utilisation (SM
and memory controller) and the per-process utilisation samples of the processes on the
run's GPUs. The GPUs count as idle once every reading has said idle for ``settle_s``;
the window starts at the end of that settle time, so the whole busy tail *and* the settle
time count as training time. NVML's utilisation is an average over its last sample period
(1/6 s to 1 s), so a zero reading after busy work already lags the true end: both errors
lean towards counting more time, never less.

If the GPUs are not idle within ``limit_s`` (queued work longer than that, or another
process on the GPU) the evaluation is not excluded at all: it counts, like an evaluation
on an engine that cannot freeze.

The logic is separate from NVML: ``wait_until_idle`` takes any ``GpuReader`` (the tests
use a fake one that is busy for N samples), and ``NvmlGpuReader`` is the real reader.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Protocol

DEFAULT_SETTLE_S = 0.25
DEFAULT_INTERVAL_S = 0.02
DEFAULT_LIMIT_S = 300.0


def settings() -> tuple[float, float, float]:
    """(settle, interval, limit) seconds, from the environment (RUNNER_GPU_SETTLE_S, ...)."""
    return (float(os.environ.get("RUNNER_GPU_SETTLE_S", DEFAULT_SETTLE_S)),
            float(os.environ.get("RUNNER_GPU_IDLE_INTERVAL_S", DEFAULT_INTERVAL_S)),
            float(os.environ.get("RUNNER_GPU_IDLE_LIMIT_S", DEFAULT_LIMIT_S)))


@dataclass(frozen=True)
class GpuActivity:
    """One reading of one GPU."""

    index: int
    sm_percent: int
    memory_percent: int
    active_pids: tuple[int, ...] = ()  # processes with SM or memory activity since the last reading

    @property
    def busy(self) -> bool:
        return self.sm_percent > 0 or self.memory_percent > 0 or bool(self.active_pids)


class GpuReader(Protocol):
    def read(self, indices: list[int]) -> list[GpuActivity]: ...


@dataclass
class GpuTail:
    """What the wait saw after one pause: recorded in the ``eval_freeze`` event."""

    idle: bool  # the GPUs settled idle within the limit
    tail_seconds: float  # pause -> the excluded window's start (busy tail + settle time)
    busy_seconds: float  # pause -> the last busy reading
    samples: int
    busy_samples: int
    gpus: list[int] = field(default_factory=list)
    error: str | None = None  # the reader failed: nothing is excluded

    def event_fields(self) -> dict:
        return {
            "gpu_tail_seconds": round(self.tail_seconds, 6),
            "gpu_idle": self.idle,
            "gpu_busy_seconds": round(self.busy_seconds, 6),
            "gpu_samples": self.samples,
            "gpu_busy_samples": self.busy_samples,
            **({"gpu_error": self.error} if self.error else {}),
        }

    def to_dict(self) -> dict:
        return asdict(self)


def wait_until_idle(reader: GpuReader, indices: list[int], *, settle_s: float = DEFAULT_SETTLE_S,
                    interval_s: float = DEFAULT_INTERVAL_S, limit_s: float = DEFAULT_LIMIT_S,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> GpuTail:
    """Read ``indices`` until every reading has been idle for ``settle_s``; the time from
    the call (just after the pause) to then is the tail that counts as training."""
    start = clock()
    samples = busy_samples = 0
    last_busy = start
    idle_since: float | None = None
    while True:
        now = clock()
        try:
            readings = reader.read(indices)
        except Exception as exc:  # a reader that fails cannot show the GPU idle
            return GpuTail(False, now - start, now - start, samples, busy_samples, list(indices),
                           f"{type(exc).__name__}: {exc}")
        samples += 1
        if any(r.busy for r in readings):
            busy_samples += 1
            last_busy = now
            idle_since = None
        elif idle_since is None:
            idle_since = now
        if idle_since is not None and now - idle_since >= settle_s:
            return GpuTail(True, now - start, last_busy - start, samples, busy_samples, list(indices))
        if now - start >= limit_s:
            return GpuTail(False, now - start, last_busy - start, samples, busy_samples, list(indices))
        sleep(interval_s)


class NvmlGpuReader:
    """The real reader: NVML's utilisation rates and per-process utilisation samples."""

    def __init__(self, nvml=None):
        if nvml is None:
            import pynvml  # lazy: optional (pynvml: no package or no driver, no GPU)
            nvml = pynvml
        self.nvml = nvml
        nvml.nvmlInit()
        self._last_ts: dict[int, int] = {}

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def _active_pids(self, index: int, handle) -> tuple[int, ...]:
        nvml = self.nvml
        last = self._last_ts.get(index, 0)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, last)
        except nvml.NVMLError:  # NotFound: no sample since ``last``; NotSupported: older boards
            return ()
        active = []
        for s in samples:
            self._last_ts[index] = max(self._last_ts.get(index, 0), int(s.timeStamp))
            if s.smUtil > 0 or s.memUtil > 0:
                active.append(int(s.pid))
        return tuple(sorted(set(active)))

    def read(self, indices: list[int]) -> list[GpuActivity]:
        nvml = self.nvml
        out = []
        for index in indices:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            rates = nvml.nvmlDeviceGetUtilizationRates(handle)
            out.append(GpuActivity(index, int(rates.gpu), int(rates.memory), self._active_pids(index, handle)))
        return out


def run_gpu_indices(gpus: int) -> list[int]:
    """The run's GPUs as NVML indices: Docker's ``--gpus N`` gives a container devices 0..N-1,
    and the runner gives its evaluator those same ids (``gpu_ids``)."""
    return list(range(gpus))


class GpuFreeze:
    """One per training run with GPUs: ``after_pause()`` waits for the run's GPUs to be idle."""

    def __init__(self, gpus: int, reader: GpuReader | None = None):
        self.indices = run_gpu_indices(gpus)
        self.reader = reader
        self.problem: str | None = None

    def _reader(self) -> GpuReader | None:
        if self.reader is None and self.problem is None:
            try:
                self.reader = NvmlGpuReader()
            except Exception as exc:  # no NVML: the freeze cannot be shown to cover the GPU
                self.problem = f"NVML unavailable ({type(exc).__name__}: {exc})"
        return self.reader

    def after_pause(self) -> GpuTail:
        reader = self._reader()
        if reader is None:
            return GpuTail(False, 0.0, 0.0, 0, 0, list(self.indices), self.problem)
        settle, interval, limit = settings()
        return wait_until_idle(reader, self.indices, settle_s=settle, interval_s=interval, limit_s=limit)

    def close(self) -> None:
        if isinstance(self.reader, NvmlGpuReader):
            self.reader.close()


class GpuWorkMeter:
    """The run's GPU busy time while it trains (evidence of training, class 4f): a thread reads
    the run's GPUs every ``interval_s`` and adds, per GPU, its utilisation times the time since
    the last reading (NVML's ``utilization.gpu``: the share of its last sample period in which
    a kernel ran). ``seconds()`` is the sum so far over the run's GPUs, read at each freeze;
    None when no reading could be made (no NVML): the busy time is then not measured."""

    def __init__(self, gpus: int, reader: GpuReader | None = None, interval_s: float = 0.1,
                 clock: Callable[[], float] = time.monotonic):
        self.indices, self.reader, self.interval_s, self.clock = run_gpu_indices(gpus), reader, interval_s, clock
        self.busy = 0.0
        self.readings = 0
        self._last: float | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="runner-gpu-work", daemon=True)

    def sample(self) -> None:
        """One reading, added to the sum (the thread's step; the tests call it directly)."""
        if self.reader is None:  # NVML's, made in the thread: a failure there ends the loop
            self.reader = NvmlGpuReader()
        readings = self.reader.read(self.indices)
        now = self.clock()
        with self._lock:
            if self._last is not None:
                self.busy += sum(min(100, max(0, r.sm_percent)) for r in readings) / 100 * (now - self._last)
            self._last = now
            self.readings += 1

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.sample()
                self._stop.wait(self.interval_s)
        except Exception:  # noqa: BLE001 - no NVML, or a reader that failed: what was read stands
            return

    def start(self) -> None:
        self._thread.start()

    def seconds(self) -> float | None:
        with self._lock:
            return round(self.busy, 6) if self.readings > 1 else None

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if isinstance(self.reader, NvmlGpuReader):
            self.reader.close()
