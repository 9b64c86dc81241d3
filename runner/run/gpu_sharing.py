"""Was the GPU the run's alone? The GPU side of ``runner.run.contention``.

While the run trains, a sampler thread reads NVML every ~0.5 s for each of the run's GPUs:

- the processes holding a context on it (compute and graphics), leaving out the run's own
  containers' processes (by their cgroup, as the CPU sampler does);
- the clock throttle reasons (``nvmlDeviceGetCurrentClocksEventReasons``);
- MIG mode (a GPU partitioned into MIG instances is shared by construction).

A run that shared its GPU (another process on it in more than ``RUNNER_MAX_GPU_SHARED``
of the samples, default: any), ran on a MIG-enabled GPU, or was throttled for a reason
another tenant causes (sync boost: held to another GPU's clocks; the external power brake)
in more than ``RUNNER_MAX_GPU_THROTTLED`` of the samples is non-conforming, with the
figure. Thermal and power-cap throttling the run causes itself are recorded, not judged.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass, field
from typing import Callable, Protocol

INTERVAL_S = 0.5
DEFAULT_MAX_SHARED = 0.0
DEFAULT_MAX_THROTTLED = 0.05

# NVML's clock event (throttle) reason bits.
THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
OTHER_TENANT_REASONS = ("sync_boost", "hw_power_brake_slowdown")


def thresholds() -> tuple[float, float]:
    return (float(os.environ.get("RUNNER_MAX_GPU_SHARED", DEFAULT_MAX_SHARED)),
            float(os.environ.get("RUNNER_MAX_GPU_THROTTLED", DEFAULT_MAX_THROTTLED)))


@dataclass(frozen=True)
class TenancySample:
    index: int
    pids: tuple[int, ...]
    throttle_reasons: tuple[str, ...]
    mig_enabled: bool | None


class TenancyReader(Protocol):
    def read(self, indices: list[int]) -> list[TenancySample]: ...


def reasons(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_BITS.items() if mask & bit)


class NvmlTenancyReader:
    def __init__(self, nvml=None):
        if nvml is None:
            import pynvml  # lazy: optional (pynvml: no package or no driver, no GPU)
            nvml = pynvml
        self.nvml = nvml
        nvml.nvmlInit()

    def _pids(self, handle) -> tuple[int, ...]:
        nvml, pids = self.nvml, set[int]()
        for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            try:
                pids.update(int(p.pid) for p in getattr(nvml, fn)(handle))
            except (nvml.NVMLError, AttributeError):
                pass
        return tuple(sorted(pids))

    def read(self, indices: list[int]) -> list[TenancySample]:
        nvml, out = self.nvml, []
        for index in indices:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            try:
                mask = int(fn(handle))
            except nvml.NVMLError:
                mask = 0
            try:
                mig = bool(nvml.nvmlDeviceGetMigMode(handle)[0] == nvml.NVML_DEVICE_MIG_ENABLE)
            except (nvml.NVMLError, AttributeError):
                mig = None
            out.append(TenancySample(index, self._pids(handle), reasons(mask), mig))
        return out

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass


@dataclass
class GpuSharingSummary:
    gpus: list[int]
    samples: int
    shared_fraction: float  # samples with another process on a run GPU
    other_pids: list[int] = field(default_factory=list)
    throttle_fractions: dict[str, float] = field(default_factory=dict)
    mig_enabled: bool | None = None
    error: str | None = None

    def problem(self) -> str | None:
        max_shared, max_throttled = thresholds()
        where = f"GPU {','.join(map(str, self.gpus))}"
        if self.error and not self.samples:
            return f"GPU sharing not measured on {where}: {self.error}"
        if self.mig_enabled:
            return f"GPU sharing: MIG is enabled on {where}, so the GPU is partitioned and shared"
        if self.samples and self.shared_fraction > max_shared:
            return (f"GPU sharing: other processes ({', '.join(map(str, self.other_pids[:8]))}) were on {where} in "
                    f"{self.shared_fraction:.0%} of {self.samples} samples (threshold {max_shared:.0%}, RUNNER_MAX_GPU_SHARED)")
        for reason in OTHER_TENANT_REASONS:
            share = self.throttle_fractions.get(reason, 0.0)
            if share > max_throttled:
                return (f"GPU throttled by another tenant: {reason} in {share:.0%} of {self.samples} samples on "
                        f"{where} (threshold {max_throttled:.0%}, RUNNER_MAX_GPU_THROTTLED)")
        return None

    def to_dict(self) -> dict:
        return asdict(self)


class GpuSharingSampler:
    """``start()`` before training, ``stop()`` after it. ``is_own(pid)``: is that host pid one
    of the run's containers' processes?"""

    def __init__(self, gpus: list[int], is_own: Callable[[int], bool], reader: TenancyReader | None = None,
                 interval_s: float = INTERVAL_S):
        self.gpus, self.is_own, self.reader, self.interval_s = gpus, is_own, reader, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = self.shared = 0
        self.other: set[int] = set()
        self.throttled: dict[str, int] = {}
        self.mig: bool | None = None
        self.error: str | None = None

    def sample_once(self) -> None:
        if self.reader is None:  # start() makes it; a caller that did not start the sampler has none yet
            self.reader = NvmlTenancyReader()
        readings = self.reader.read(self.gpus)
        self.samples += 1
        others = {p for r in readings for p in r.pids if p != os.getpid() and not self.is_own(p)}
        if others:
            self.shared += 1
            self.other |= others
        for name in {n for r in readings for n in r.throttle_reasons}:
            self.throttled[name] = self.throttled.get(name, 0) + 1
        if any(r.mig_enabled for r in readings):
            self.mig = True
        elif self.mig is None and all(r.mig_enabled is False for r in readings):
            self.mig = False

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                self.sample_once()
        except Exception as exc:  # noqa: BLE001 - a sampler failure is reported, never fatal
            self.error = f"{type(exc).__name__}: {exc}"

    def start(self) -> GpuSharingSampler:
        if self.reader is None:
            try:
                self.reader = NvmlTenancyReader()
            except Exception as exc:  # noqa: BLE001
                self.error = f"NVML unavailable ({type(exc).__name__}: {exc})"
                return self
        try:
            self.sample_once()
        except Exception as exc:  # noqa: BLE001
            self.error = f"{type(exc).__name__}: {exc}"
            return self
        self._thread = threading.Thread(target=self._loop, name="runner-gpu-sharing", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> GpuSharingSummary:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if isinstance(self.reader, NvmlTenancyReader):
            self.reader.close()
        n = self.samples
        return GpuSharingSummary(
            gpus=list(self.gpus), samples=n, shared_fraction=self.shared / n if n else 0.0,
            other_pids=sorted(self.other), throttle_fractions={k: round(v / n, 4) for k, v in sorted(self.throttled.items())},
            mig_enabled=self.mig, error=self.error,
        )
