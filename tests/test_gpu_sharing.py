"""Was the GPU the run's alone (runner.run.gpu_sharing)? With a fake NVML tenancy reader;
the real one runs in tests/gpu."""

from __future__ import annotations

from runner.run.gpu_sharing import GpuSharingSampler, TenancySample, reasons


class Reader:
    def __init__(self, samples):
        self.samples, self.n = samples, 0

    def read(self, indices):
        s = self.samples[min(self.n, len(self.samples) - 1)]
        self.n += 1
        return [TenancySample(i, *s) for i in indices]


def _summary(samples, own=lambda pid: pid == 10, n=4):
    sampler = GpuSharingSampler([0], own, Reader(samples))
    for _ in range(n):
        sampler.sample_once()
    return sampler.stop()


def test_a_gpu_with_only_the_runs_processes_is_conforming():
    s = _summary([((10,), reasons(0x4), False)])
    assert s.problem() is None and s.shared_fraction == 0 and s.throttle_fractions == {"sw_power_cap": 1.0}
    assert s.mig_enabled is False


def test_another_process_on_the_gpu_is_non_conforming_with_the_figure():
    s = _summary([((10,), (), False), ((10, 77), (), False)])
    assert s.other_pids == [77] and s.shared_fraction == 0.75
    assert "other processes (77)" in s.problem() and "75% of 4 samples" in s.problem()


def test_mig_and_throttling_by_another_tenant_are_non_conforming():
    assert "MIG is enabled" in _summary([((10,), (), True)]).problem()
    problem = _summary([((10,), reasons(0x10), False)]).problem()
    assert "sync_boost" in problem and "another tenant" in problem


def test_a_sampler_that_cannot_read_nvml_says_so():
    sampler = GpuSharingSampler([0], lambda pid: True)
    sampler.start()  # this host: no NVML
    s = sampler.stop()
    assert s.samples == 0 and "NVML unavailable" in s.error and "not measured" in s.problem()
