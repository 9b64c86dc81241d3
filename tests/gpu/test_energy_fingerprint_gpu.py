"""NVML energy, the GPU sharing sampler, the fingerprint and `runner doctor`'s GPU checks
on a real GPU."""

from __future__ import annotations

import time

from runner.energy import EnergyMeter, NvmlEnergy, window_energy


def _burn(torch, seconds: float) -> None:
    a = torch.randn(4096, 4096, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()


def test_the_energy_counter_counts_a_busy_gpu(torch_cuda, nvml):
    src = NvmlEnergy([0])
    assert "counter" in src.method  # Volta and later: an H100 has it
    meter = EnergyMeter([0], sources=[src], missing={}).start()
    t0 = time.monotonic()
    _burn(torch_cuda, 2.0)
    t1 = time.monotonic()
    series = meter.stop()
    joules = window_energy(series, [(t0, t1)])["gpu"]["joules"]
    print(f"{joules:.1f} J over {t1 - t0:.2f} s ({joules / (t1 - t0):.0f} W)")
    assert joules > 50 * (t1 - t0)  # a busy data-centre GPU draws far more than 50 W


def test_the_sharing_sampler_sees_this_process_as_another_tenant(torch_cuda, nvml):
    from runner.run.gpu_sharing import GpuSharingSampler

    torch_cuda.zeros(1, device="cuda")  # a context on GPU 0
    sampler = GpuSharingSampler([0], lambda pid: False, interval_s=0.1).start()
    time.sleep(0.5)
    summary = sampler.stop()
    print(summary)
    assert summary.error is None and summary.samples >= 2 and summary.mig_enabled is False
    # This test process is the runner's own pid and is left out; whatever else holds a
    # context on the GPU is named.
    assert summary.problem() is None or "other processes" in summary.problem()


def test_the_fingerprint_reads_every_field(nvml):
    from runner.fingerprint.gpu import capture_gpu

    gpu = capture_gpu()
    assert gpu["gpus"] and gpu["gpus"][0]["name"]
    assert not any(d.get("unreadable") for d in gpu["gpus"]), [d.get("unreadable") for d in gpu["gpus"]]


def test_doctor_finds_what_a_gpu_host_must_provide(nvml):
    from runner.cli.doctor import gpu_host_checks

    rows = gpu_host_checks()
    print(rows)
    states = {label: state for label, state, _ in rows}
    for label in ("GPU utilisation (freeze idle wait)", "GPU processes (sharing)",
                  "GPU throttle reasons (sharing)", "GPU energy counter (energy)"):
        assert states[label] == "ok", rows
