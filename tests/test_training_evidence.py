"""Evidence of training (class 4f): the training containers' CPU time to the crossing, read
from their cgroups, against one forward pass of the scored model over the training set."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.engine.interface import ContainerState
from runner.run.cpu_usage import ContainerCpu, counter_file, read_seconds
from runner.run.gpu_freeze import GpuActivity, GpuWorkMeter
from runner.score.evaluations import ScoredEvaluation
from runner.score.training_evidence import FRACTION, training_evidence


def scored(cpu: float | None, predict_cpu: float | None = 0.5, count: int = 10_000,
           probe: bool = True) -> ScoredEvaluation:
    return ScoredEvaluation(0, 1, 1.0, 1.1, "evaluations/0/clean.npy", count, {"top1": 0.99}, True,
                            probe_predictions="evaluations/0/probe.npy" if probe else None,
                            probe_items=2000 if probe else None, cpu_seconds=cpu,
                            predict_cpu_seconds=predict_cpu)


def test_a_crossing_before_one_forward_pass_over_the_training_set_is_class_4():
    # 12,000 items in 0.5 CPU-s: 60,000 training items are 2.5 CPU-s of forward pass.
    record, problem = training_evidence([scored(1.2)], 0, 60_000, 10_000)
    assert record["forward_pass_cpu_seconds"] == pytest.approx(2.5)
    assert record["floor_cpu_seconds"] == pytest.approx(FRACTION * 2.5)
    assert record["ratio"] == pytest.approx(1.2 / 2.5, abs=1e-4)
    assert "class 4" in problem and "no evidence of training" in problem
    assert "1.20 CPU-seconds" in problem and "2.50 CPU-seconds for 60000 items" in problem


def test_a_run_that_trained_is_above_the_floor_and_a_small_training_set_lowers_it():
    record, problem = training_evidence([scored(30.0)], 0, 60_000, 10_000)
    assert problem is None and record["ratio"] == pytest.approx(12.0)
    # the same start-up-only work on a smoke set of 2,048 items is far above its floor
    assert training_evidence([scored(1.2)], 0, 2048, 10_000)[1] is None


def test_unmeasured_figures_are_not_recorded_rather_than_judged():
    for s, n in ((scored(None), 60_000), (scored(1.0, predict_cpu=None), 60_000), (scored(1.0), None)):
        record, problem = training_evidence([s], 0, n, 10_000)
        assert problem is None and record["ratio"] is None
        assert record["not_measured"].startswith("not recorded: ")
    assert training_evidence([scored(1.0)], None, 60_000, 10_000) == (None, None)


def test_the_cgroup_counter_is_found_from_the_containers_process(tmp_path: Path):
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "7").mkdir(parents=True)
    # cgroup v1 (cgroupfs driver): cpuacct.usage in nanoseconds
    (proc / "7" / "cgroup").write_text("4:memory:/docker/abc\n2:cpuacct:/docker/abc\n1:cpu:/docker/abc\n0::/\n")
    v1 = root / "cpuacct" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "cpuacct.usage").write_text("2500000000\n")
    assert counter_file(7, proc, root) == v1 / "cpuacct.usage"
    assert read_seconds(v1 / "cpuacct.usage") == 2.5
    # cgroup v2 (systemd driver): cpu.stat's usage_usec
    (proc / "7" / "cgroup").write_text("0::/system.slice/docker-abc.scope\n")
    v2 = root / "system.slice" / "docker-abc.scope"
    v2.mkdir(parents=True)
    (v2 / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert counter_file(7, proc, root) == v2 / "cpu.stat"
    assert read_seconds(v2 / "cpu.stat") == 1.5
    assert counter_file(8, proc, root) is None  # a process gone: not measured


def test_a_container_whose_counter_cannot_be_read_says_so():
    class Gone:
        def state(self):
            raise RuntimeError("gone")

    cpu = ContainerCpu(Gone())
    assert cpu.seconds() is None and "could not be found" in cpu.problem


def test_a_container_gone_before_its_request_is_handled_keeps_its_last_reading(tmp_path: Path):
    """An entry that exits the moment it asks for an evaluation removes its cgroup before the
    runner handles the request: the reading sampled while it ran stands (a lower bound), so
    its CPU time is never 'not measured' (cheat-no-training did exactly this)."""
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text("2:cpuacct:/docker/abc\n")
    usage = root / "cpuacct" / "docker" / "abc" / "cpuacct.usage"
    usage.parent.mkdir(parents=True)
    usage.write_text("300000000\n")

    class Running:
        def state(self):
            return ContainerState("running", pid=7)

    cpu = ContainerCpu(Running(), proc, root)
    cpu.sample()
    usage.write_text("400000000\n")
    cpu.sample()
    usage.unlink()  # the container exited: its cgroup is gone
    assert cpu.seconds() == 0.4 and cpu.stale


def test_gpu_busy_time_adds_utilisation_over_the_time_between_readings():
    readings = iter([[GpuActivity(0, 0, 0), GpuActivity(1, 0, 0)],
                     [GpuActivity(0, 100, 50), GpuActivity(1, 50, 0)],
                     [GpuActivity(0, 20, 0), GpuActivity(1, 0, 0)]])
    times = iter([0.0, 0.5, 1.5])

    class Reader:
        def read(self, indices):
            return next(readings)

    meter = GpuWorkMeter(2, Reader(), clock=lambda: next(times))
    meter.sample()
    assert meter.seconds() is None  # one reading: nothing measured yet
    meter.sample()
    meter.sample()
    assert meter.seconds() == pytest.approx(0.5 * 1.5 + 1.0 * 0.2)
