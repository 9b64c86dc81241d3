"""DAWNBench's batch-1 latency: every evaluation item, one at a time, after a warm-up.

Each item's latency is ``time.perf_counter_ns()`` (CLOCK_MONOTONIC on Linux) around the
backend's single-item call, which includes the host->device copy and bringing the
ranked classes back to the host. Converting the stored uint8 item to float32 happens
before the clock starts: DAWNBench allows preloaded data.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from . import mllog

CLOCK = "time.perf_counter_ns (CLOCK_MONOTONIC)"
# How far a timed pass is, a tenth at a time, printed between two items (never inside one's timing).
PROGRESS_PREFIX = "harness progress:"
PROGRESS_LINES = 10

# What a backend's predict returns for one item: the top class, or the top-k classes best first
# (a Union, not ``|``: the alias is evaluated at import, in the entry's image's Python).
Ranked = Union[int, np.ndarray]
Predict = Callable[[np.ndarray], Ranked]  # one 1xCxHxW float32 item -> class or ranked classes


@dataclass
class TimedPass:
    predictions: np.ndarray  # int64 (N,) or (N, k)
    latencies_ns: np.ndarray  # int64 (N,)
    warmup_count: int
    warmup_seconds: float
    window_ns: int  # the harness' own clock from infer_start to infer_stop


def progress(backend: str, done: int, n: int) -> None:
    """After item ``done`` (1-based) of ``n``, outside its timing: a line a tenth of the way
    (the host shows how far the timed pass is)."""
    every = max(n // PROGRESS_LINES, 1)
    if done % every == 0:
        print(f"{PROGRESS_PREFIX} {backend} {done}/{n} items", flush=True)


def item(images: np.ndarray, index: int) -> np.ndarray:
    return np.ascontiguousarray(images[index : index + 1], dtype=np.float32)


def warm_up(predict: Predict, images: np.ndarray, count: int) -> float:
    """Run ``count`` untimed items (cycling through the set); returns the seconds spent."""
    start = time.perf_counter()
    for i in range(count):
        predict(item(images, i % len(images)))
    return time.perf_counter() - start


def timed_pass(predict: Predict, images: np.ndarray, *, warmup: int, topk: int, backend: str) -> TimedPass:
    n = len(images)
    warmup_seconds = warm_up(predict, images, warmup)
    predictions = np.zeros((n,) if topk == 1 else (n, topk), dtype=np.int64)
    latencies = np.zeros(n, dtype=np.int64)
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()  # a collection inside the pass would land on one unlucky item
    try:
        mllog.emit("infer_start", event_type="INTERVAL_START", backend=backend, count=n)
        window_start = clock()
        for i in range(n):
            x = item(images, i)
            t0 = clock()
            ranked = predict(x)
            t1 = clock()
            predictions[i] = ranked
            latencies[i] = t1 - t0
            progress(backend, i + 1, n)
        window_ns = clock() - window_start
        mllog.emit("infer_stop", event_type="INTERVAL_END", backend=backend, count=n)
    finally:
        gc.enable()
    return TimedPass(predictions, latencies, warmup, warmup_seconds, window_ns)
