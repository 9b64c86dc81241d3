"""Class 2c on a real GPU: a process that queued a long burst of matmuls and was then
stopped (SIGSTOP, what docker pause's freezer does) keeps the GPU busy; the runner's idle
wait (NvmlGpuReader) sees the tail and returns only once the GPU is idle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from runner.run.gpu_freeze import NvmlGpuReader, wait_until_idle

QUEUE = textwrap.dedent("""
    import sys, torch
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    for _ in range(int(sys.argv[1])):
        c = a @ b
    print("queued", flush=True)
    torch.cuda.synchronize()
""")


def test_the_idle_wait_covers_work_queued_before_the_pause(torch_cuda, nvml):
    proc = subprocess.Popen([sys.executable, "-c", QUEUE, "2500"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "queued"
        os.kill(proc.pid, signal.SIGSTOP)  # the freeze: no CPU work of the process runs any more
        paused = time.monotonic()
        reader = NvmlGpuReader()
        try:
            first = reader.read([0])[0]
            tail = wait_until_idle(reader, [0], settle_s=0.25, interval_s=0.02, limit_s=120)
            after = reader.read([0])[0]
        finally:
            reader.close()
        waited = time.monotonic() - paused
        print(f"first reading {first}; tail {tail.tail_seconds:.2f} s, busy {tail.busy_seconds:.2f} s, "
              f"{tail.busy_samples}/{tail.samples} busy samples")
        assert first.busy  # the GPU kept computing after the stop
        assert tail.idle and tail.busy_seconds > 0.5 and tail.tail_seconds >= tail.busy_seconds + 0.25
        assert waited >= tail.tail_seconds
        assert after.sm_percent == 0
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_an_idle_gpu_is_seen_idle_within_the_settle_time(torch_cuda, nvml):
    time.sleep(1.5)  # let NVML's averaging window drain
    reader = NvmlGpuReader()
    try:
        tail = wait_until_idle(reader, [0], settle_s=0.25, interval_s=0.02, limit_s=30)
    finally:
        reader.close()
    assert tail.idle and tail.tail_seconds < 2.0
