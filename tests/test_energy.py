"""Energy (runner.energy): NVML's counter or integrated power with a fake NVML module (no
NVML exists here), RAPL from a powercap tree on disk (with its wrap-around), this host's
honest "not measured" reasons, and the windows: training with frozen time excluded and the
GPU tail counted, and joules per 10,000 items of a timed pass."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.energy import (POWERCAP, EnergyMeter, EnergySeries, NotMeasured, NvmlEnergy, RaplEnergy, open_sources,
                           per_10k, training_energy, training_intervals, window_energy)
from runner.events import runner_event
from runner.score.tta import CONTAINER_EXIT, EVAL_FREEZE, EVAL_THAW, LAUNCH, timeline


class FakeNvml:
    """What NVML's Python binding exposes for energy; ``counter`` False: a board without it."""

    class NVMLError(Exception):
        pass

    def __init__(self, counter: bool = True, watts: float = 300.0):
        self.counter, self.watts, self.mj = counter, watts, {0: 5_000_000, 1: 7_000_000}

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlDeviceGetHandleByIndex(self, i): return i

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.counter:
            raise self.NVMLError("NotSupported")
        return self.mj[h]

    def nvmlDeviceGetPowerUsage(self, h):
        return int(self.watts * 1000)


def test_the_nvml_counter_is_used_where_the_gpu_has_one():
    nvml = FakeNvml()
    src = NvmlEnergy([0, 1], nvml)
    assert "total-energy counter" in src.method
    nvml.mj = {0: 5_000_000 + 1500, 1: 7_000_000 + 2500}  # millijoules
    assert src.read(0.0) == pytest.approx(4.0)


def test_without_a_counter_power_samples_are_integrated_and_it_says_so():
    src = NvmlEnergy([0], FakeNvml(counter=False, watts=200.0))
    assert "power samples" in src.method and "integrated" in src.method
    src.read(10.0)
    assert src.read(12.0) == pytest.approx(400.0)  # 200 W for 2 s


def test_no_gpus_or_no_nvml_is_not_measured_with_the_reason():
    with pytest.raises(NotMeasured, match="no GPUs"):
        NvmlEnergy([], FakeNvml())
    sources, missing = open_sources([0])  # this host: no NVIDIA driver
    assert "gpu" in missing and "NVML" in missing["gpu"] or "pynvml" in missing["gpu"]


def _zone(root: Path, name: str, zone: str, uj: int, max_uj: int = 1000) -> Path:
    d = root / zone
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def test_rapl_sums_the_packages_and_survives_a_wrap(tmp_path):
    p0 = _zone(tmp_path, "package-0", "intel-rapl:0", 900)
    _zone(tmp_path, "dram", "intel-rapl:0:0", 5)  # a subzone: inside its package
    _zone(tmp_path, "psys", "intel-rapl:1", 5)  # the platform: a superset, left out
    src = RaplEnergy(tmp_path)
    assert src.method.startswith("RAPL package-0")
    (p0 / "energy_uj").write_text("100\n")  # wrapped at 1000: +200 uJ
    assert src.read(0.0) == pytest.approx(200e-6)


def test_this_host_either_reads_rapl_or_says_why_not():
    try:
        assert RaplEnergy().method.startswith("RAPL package")
    except NotMeasured as exc:  # the CPU-only test host: no /sys/class/powercap at all
        assert not POWERCAP.is_dir() and "/sys/class/powercap does not exist" in str(exc) or POWERCAP.is_dir()


def test_an_unreadable_rapl_counter_says_to_run_as_root(tmp_path):
    d = _zone(tmp_path, "package-0", "intel-rapl:0", 1)
    (d / "energy_uj").unlink()
    (d / "energy_uj").mkdir()  # reading it fails with an OSError
    with pytest.raises(NotMeasured, match="cannot be read"):
        RaplEnergy(tmp_path)


class Ramp:
    """A source whose cumulative joules are 100 J/s times the clock."""
    kind, method = "gpu", "fake"

    def read(self, now):
        return 100.0 * now

    def close(self):
        pass


def test_the_meter_samples_a_series_and_interpolates_windows():
    t = [0.0]
    meter = EnergyMeter([], sources=[Ramp()], missing={"cpu": "no RAPL"}, clock=lambda: t[0], interval_s=3600)
    meter.start()
    for now in (1.0, 2.0, 4.0):
        t[0] = now
        meter._sample()
    series = meter.stop()
    assert series.times[0] == 0.0 and series.at("gpu", 3.0) == pytest.approx(300.0)
    record = window_energy(series, [(0.5, 1.5), (3.0, 4.0)])
    assert record["gpu"]["joules"] == pytest.approx(200.0) and record["joules"] == pytest.approx(200.0)
    assert record["cpu"] == {"joules": None, "method": None, "not_measured": "no RAPL"}
    assert record["measured"] == ["gpu"]
    assert window_energy(series, None, "the backend has no timed pass")["gpu"]["not_measured"] == "the backend has no timed pass"


def test_training_energy_excludes_frozen_windows_and_counts_the_gpu_tail():
    events = [
        runner_event(0, 1.0, LAUNCH, stamp="launcher"),
        runner_event(1, 10.0, EVAL_FREEZE, index=0, frozen=True, state="frozen", gpu_tail_seconds=2.0, gpu_idle=True),
        runner_event(2, 15.0, EVAL_THAW, index=0, predictions="p0"),
        runner_event(3, 20.0, EVAL_FREEZE, index=1, frozen=True, state="frozen"),
        runner_event(4, 22.0, EVAL_THAW, index=1, predictions="p1"),
        runner_event(5, 30.0, CONTAINER_EXIT, exit_code=0),
    ]
    line = timeline(events)
    assert training_intervals(line, 1) == [(1.0, 12.0), (15.0, 20.0)]
    assert training_intervals(line, None) == [(1.0, 12.0), (15.0, 20.0), (22.0, 30.0)]
    series = EnergySeries({"gpu": "fake"}, {"cpu": "no RAPL"}, times=[1000.0, 1040.0],
                          joules={"gpu": [0.0, 4000.0]})  # 100 W, on a monotonic clock 1000 s later
    record = training_energy(series, line, crossing=1, origin=1000.0)
    assert record["joules_to_accuracy"] == pytest.approx(100 * 16)  # 11 s + 5 s on the clock
    assert record["window"]["gpu"]["joules"] == pytest.approx(100 * 24)
    assert training_energy(series, line, None, 1000.0)["joules_to_accuracy"] is None


def test_joules_per_10k_items():
    assert per_10k(5.0, 10_000) == 5.0 and per_10k(1.0, 2_000) == 5.0
    assert per_10k(None, 10) is None and per_10k(1.0, 0) is None


def test_pass_energy_uses_the_host_stamped_window():
    from runner.inference.phase import Windows, pass_energy

    windows = Windows(start={"torch": 2.0}, stop={"torch": 3.0})
    series = EnergySeries({"gpu": "fake"}, {"cpu": "no RAPL"}, times=[50.0, 60.0], joules={"gpu": [0.0, 1000.0]})
    record = pass_energy(series, windows, "torch", origin=50.0, count=10_000)
    assert record["joules"] == pytest.approx(100.0) and record["joules_per_10k_items"] == pytest.approx(100.0)
    missing = pass_energy(series, windows, "onnxruntime", origin=50.0, count=None)
    assert missing["joules"] is None and missing["gpu"]["not_measured"] == "the backend has no timed pass"


def test_a_cpu_only_run_records_why_nothing_was_measured():
    series = EnergyMeter([]).start()  # this host: no GPU for the run, no RAPL
    out = series.stop()
    record = window_energy(out, [(0.0, 1.0)])
    assert record["joules"] is None and record["measured"] == []
    assert record["gpu"]["not_measured"] == "the run has no GPUs"
    assert record["cpu"]["not_measured"]
