"""Energy as a metric: joules of the training window and of the timed inference pass.

Two kinds of source, each read on the host by one sampler thread (``EnergyMeter``):

- ``gpu``: the run's GPUs through NVML. NVML's total-energy counter
  (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded; Volta and
  later) where every one of the run's GPUs has it, else power samples
  (``nvmlDeviceGetPowerUsage``) integrated by the trapezoid rule between samples. The
  method is recorded.
- ``cpu``: the host's CPU packages through RAPL (``/sys/class/powercap/*/energy_uj`` of the
  top-level ``package-N`` domains, with their wrap-around at ``max_energy_range_uj``). A
  host that exposes no RAPL (a VM, an ARM host, a kernel without ``intel_rapl``) or hides
  it from this user says so: "not measured: <reason>".

The meter keeps a series of (host monotonic seconds, cumulative joules per source); a
window's energy is the difference of the series interpolated at its ends. The training
window is the TTA window: launch to the crossing evaluation's end, the frozen windows
excluded (the GPU tail after each pause counts, as it does for time).
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runner.errors import RunnerError

INTERVAL_S = 0.1
POWERCAP = Path("/sys/class/powercap")


class NotMeasured(RunnerError):
    """A source that cannot be read here; the message is the reason."""

    default_fix = ("read the energy where its source can be read (an NVIDIA driver's NVML for GPUs, "
                   "/sys/class/powercap's RAPL counters for CPUs); `runner doctor` says which it finds")


class Source(Protocol):
    kind: str  # "gpu" or "cpu"
    method: str

    def read(self, now: float) -> float:
        """Cumulative joules since the source was opened."""


# -- GPU: NVML ---------------------------------------------------------------------------
class NvmlEnergy:
    kind = "gpu"

    def __init__(self, indices: list[int], nvml=None):
        if not indices:
            raise NotMeasured("the run has no GPUs")
        if nvml is None:
            try:
                import pynvml  # lazy: optional (pynvml: no package or no driver, no GPU)
            except ImportError:
                raise NotMeasured("nvidia-ml-py (pynvml) is not installed") from None
            nvml = pynvml
        self.nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise NotMeasured(f"NVML unavailable ({type(exc).__name__}): no NVIDIA driver on this host") from None
        try:
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        except nvml.NVMLError as exc:
            raise NotMeasured(f"NVML cannot open the run's GPUs {indices} ({type(exc).__name__})") from None
        self.indices = list(indices)
        try:
            self.start_mj = [nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
            self.method = "nvml total-energy counter (nvmlDeviceGetTotalEnergyConsumption)"
            self.counter = True
        except nvml.NVMLError:
            try:
                self._last: tuple[float | None, float] = (None, sum(self._watts()))
            except nvml.NVMLError as exc:
                raise NotMeasured(f"NVML reports neither an energy counter nor power for GPUs {indices} "
                                  f"({type(exc).__name__})") from None
            self.method = f"nvml power samples (nvmlDeviceGetPowerUsage) integrated every {INTERVAL_S:g} s"
            self.counter = False
            self.integrated = 0.0

    def _watts(self) -> list[float]:
        return [self.nvml.nvmlDeviceGetPowerUsage(h) / 1000.0 for h in self.handles]

    def read(self, now: float) -> float:
        if self.counter:
            values = [self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
            return sum(v - s for v, s in zip(values, self.start_mj)) / 1000.0
        watts = sum(self._watts())
        last_t, last_w = self._last
        if last_t is not None:
            self.integrated += (now - last_t) * (watts + last_w) / 2
        self._last = (now, watts)
        return self.integrated

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down is best effort
            pass


# -- CPU: RAPL ---------------------------------------------------------------------------
@dataclass
class _Domain:
    name: str
    energy: Path
    max_uj: int
    last_uj: int
    total_uj: int = 0


class RaplEnergy:
    kind = "cpu"

    def __init__(self, root: Path = POWERCAP):
        if not root.is_dir():
            raise NotMeasured(f"{root} does not exist on this host: the kernel exposes no RAPL "
                              "(a VM, a non-x86 host, or no intel_rapl driver)")
        self.domains: list[_Domain] = []
        for zone in sorted(root.glob("*:*")):
            if zone.name.count(":") != 1:  # subzones (core, uncore, dram) are inside their package
                continue
            try:
                name = (zone / "name").read_text().strip()
            except OSError:
                continue
            if not name.startswith("package"):
                continue  # psys counts the platform, a superset: packages only
            try:
                value = int((zone / "energy_uj").read_text())
                max_uj = int((zone / "max_energy_range_uj").read_text())
            except PermissionError:
                raise NotMeasured(f"{zone}/energy_uj is not readable by this user (root only since "
                                  "Linux 5.10's CVE-2020-8694 fix); run the runner as root") from None
            except (OSError, ValueError) as exc:
                raise NotMeasured(f"{zone}/energy_uj cannot be read ({exc})") from None
            self.domains.append(_Domain(name, zone / "energy_uj", max_uj, value))
        if not self.domains:
            raise NotMeasured(f"{root} has no RAPL package domain on this host")
        self.method = f"RAPL {', '.join(d.name for d in self.domains)} ({root})"

    def read(self, now: float) -> float:
        for d in self.domains:
            value = int(d.energy.read_text())
            delta = value - d.last_uj
            if delta < 0:  # the counter wrapped
                delta += d.max_uj
            d.total_uj += delta
            d.last_uj = value
        return sum(d.total_uj for d in self.domains) / 1e6

    def close(self) -> None:
        pass


def open_sources(gpu_indices: list[int], *, nvml=None, powercap: Path = POWERCAP) -> tuple[list, dict[str, str]]:
    """The sources that can be read here, and for each kind that cannot, why not."""
    sources, missing = [], {}
    for kind, make in (("gpu", lambda: NvmlEnergy(gpu_indices, nvml)), ("cpu", lambda: RaplEnergy(powercap))):
        try:
            sources.append(make())
        except NotMeasured as exc:
            missing[kind] = str(exc)
    return sources, missing


# -- the meter ---------------------------------------------------------------------------
@dataclass
class EnergySeries:
    methods: dict[str, str]  # kind -> how it was measured
    missing: dict[str, str]  # kind -> why it was not measured
    times: list[float] = field(default_factory=list)  # host monotonic seconds
    joules: dict[str, list[float]] = field(default_factory=dict)  # kind -> cumulative joules
    error: str | None = None

    def at(self, kind: str, t: float) -> float | None:
        """Cumulative joules of ``kind`` at ``t``, interpolated; None outside the series."""
        values, times = self.joules.get(kind), self.times
        if not values or len(times) < 2 or t < times[0] - 1e-9 or t > times[-1] + 1e-9:
            return None

        i = max(1, min(len(times) - 1, bisect.bisect_left(times, t)))
        t0, t1, v0, v1 = times[i - 1], times[i], values[i - 1], values[i]
        return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    def between(self, kind: str, intervals: list[tuple[float, float]]) -> float | None:
        total = 0.0
        for a, b in intervals:
            ja, jb = self.at(kind, a), self.at(kind, b)
            if ja is None or jb is None:
                return None
            total += jb - ja
        return total

    def tsv(self, origin: float = 0.0) -> str:
        kinds = sorted(self.joules)
        rows = ["seconds\t" + "\t".join(f"{k}_joules" for k in kinds)]
        for i, t in enumerate(self.times):
            rows.append(f"{t - origin:.6f}\t" + "\t".join(f"{self.joules[k][i]:.6f}" for k in kinds))
        return "\n".join(rows) + "\n"


class EnergyMeter:
    """``start()`` before the window, ``stop()`` after it: the series in between."""

    def __init__(self, gpu_indices: list[int], *, interval_s: float = INTERVAL_S, sources=None,
                 missing: dict[str, str] | None = None, clock=time.monotonic):
        if sources is None:
            sources, missing = open_sources(gpu_indices)
        self.sources, self.clock, self.interval_s = sources, clock, interval_s
        self.series = EnergySeries({s.kind: s.method for s in sources}, dict(missing or {}),
                                   joules={s.kind: [] for s in sources})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _sample(self) -> None:
        now = self.clock()
        values = [s.read(now) for s in self.sources]
        with self._lock:
            self.series.times.append(now)
            for s, v in zip(self.sources, values):
                self.series.joules[s.kind].append(v)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                self._sample()
        except Exception as exc:  # noqa: BLE001 - a meter failure is reported, never fatal to the run
            self.series.error = f"{type(exc).__name__}: {exc}"

    def start(self) -> EnergyMeter:
        if self.sources:
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="runner-energy", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> EnergySeries:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self.series.error is None:
                try:
                    self._sample()
                except Exception as exc:  # noqa: BLE001
                    self.series.error = f"{type(exc).__name__}: {exc}"
        for s in self.sources:
            s.close()
        return self.series


# -- figures -----------------------------------------------------------------------------
def training_intervals(line, through: int | None) -> list[tuple[float, float]]:
    """The TTA window on the training clock, frozen windows excluded: launch to the end of
    evaluation ``through`` (None: to the container's exit)."""
    end = line.evaluations[through].stop if through is not None else line.run_stop
    if end is None:
        return []
    evaluations = line.evaluations[: through + 1] if through is not None else line.evaluations
    intervals, t = [], line.clock_start
    for e in evaluations:
        if e.excluded:
            intervals.append((t, e.start))
            t = e.stop
    intervals.append((t, end))
    return [(a, b) for a, b in intervals if b > a]


def _kind_record(series: EnergySeries, kind: str, joules: float | None, why: str | None) -> dict:
    if kind in series.missing:
        return {"joules": None, "method": None, "not_measured": series.missing[kind]}
    if joules is None:
        why = why or series.error or "the window is outside the sampled series"
        return {"joules": None, "method": series.methods.get(kind), "not_measured": why}
    return {"joules": round(joules, 3), "method": series.methods.get(kind), "not_measured": None}


def window_energy(series: EnergySeries, intervals: list[tuple[float, float]] | None, why: str | None = None) -> dict:
    """``{"gpu": {...}, "cpu": {...}, "joules": total of what was measured}``, intervals on the
    series' clock; ``intervals`` None: there was no window (``why``)."""
    def joules(kind: str) -> float | None:
        if intervals is None or kind not in series.joules:
            return None
        return series.between(kind, intervals)

    record: dict[str, Any] = {kind: _kind_record(series, kind, joules(kind), why) for kind in ("gpu", "cpu")}
    measured = [r["joules"] for r in record.values() if r["joules"] is not None]
    record["joules"] = round(sum(measured), 3) if measured else None
    record["measured"] = sorted(k for k in ("gpu", "cpu") if record[k]["joules"] is not None)
    return record


def training_energy(series: EnergySeries, line, crossing: int | None, origin: float) -> dict:
    """result.json's ``energy.training``: the training window (frozen time excluded) and,
    when the threshold was reached, joules-to-accuracy. ``origin``: the host monotonic
    time of the training clock's zero."""
    shift = lambda iv: [(a + origin, b + origin) for a, b in iv]  # noqa: E731
    whole = window_energy(series, shift(training_intervals(line, None)))
    record = {"window": whole, "joules_to_accuracy": None}
    if crossing is not None:
        record["joules_to_accuracy"] = window_energy(series, shift(training_intervals(line, crossing)))["joules"]
    return record


def per_10k(joules: float | None, items: int | None) -> float | None:
    if joules is None or not items:
        return None
    return round(joules / items * 10_000, 3)
