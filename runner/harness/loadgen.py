"""MLPerf LoadGen scenarios around a backend's batch-1 ``predict``: SingleStream
(latency percentiles) and Offline (throughput), beside the harness' own per-item pass.

``mlperf_loadgen`` is not in the entry's image: the runner mounts its own copy of the
pinned wheel at ``/opt/runner/site`` (read-only) and puts it on this process' path.
LoadGen times each query itself, from issue to ``QuerySamplesComplete``; the items are
converted to float32 when LoadGen loads them, before any query, so the conversion is
outside its clock as it is outside the per-item pass.

Each scenario writes LoadGen's own ``mlperf_log_summary.txt`` and ``mlperf_log_detail.txt``
to ``<backend>/loadgen/<scenario>/``; the host reads the figures from the detail log and
checks them against the ``loadgen_start``/``loadgen_stop`` window it stamped itself.

Two sets of settings (``PROFILES``). ``dawnbench``, the default: the claim is DAWNBench's
per-item figure, and LoadGen runs beside it at a bounded cost (about a second per scenario
for a small model, three at most), so its percentiles are a cross-check, not an MLPerf
result. ``mlperf``: MLPerf Inference's minimums (``mlperf.conf``: 600 s per scenario,
SingleStream 1024 queries, Offline 24,576 samples, no maximum), for a result that claims
MLPerf compliance. The settings used are recorded with the figures.
"""

from __future__ import annotations

import gc
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import mllog
from .errors import HarnessError

SCENARIOS = ("single_stream", "offline")
# Items LoadGen may hold in memory at once (float32), so an ImageNet-sized set does not
# need tens of GB: the sample set is every item when it fits, else the first ones.
LOADED_BYTES_CAP = 1 << 30
# An audit.config in the working directory (the entry's folder) would change the test;
# LoadGen is pointed at a file that never exists instead.
NO_AUDIT_CONFIG = "/nonexistent/runner-no-audit.config"
# MLPerf Inference's minimums (mlperf.conf: ``*.*.min_duration = 600000``, SingleStream's
# spec default of 1024 queries, ``resnet50.Offline.min_query_count = 24576``, which LoadGen
# reads as the Offline query's minimum sample count). A maximum of 0 is LoadGen's "none".
MLPERF_MIN_DURATION_MS = 600_000
MLPERF_SINGLE_STREAM_MIN_QUERIES = 1024
MLPERF_OFFLINE_MIN_SAMPLES = 24_576


@dataclass(frozen=True)
class LoadgenSettings:
    """The explicit settings of both scenarios; recorded in info.json as they were used.
    The defaults are the ``dawnbench`` profile: a few seconds in all for a small model."""

    profile: str = "dawnbench"
    single_stream_min_query_count: int = 128
    single_stream_min_duration_ms: int = 1000
    single_stream_max_duration_ms: int = 3000
    offline_min_query_count: int = 1
    offline_min_duration_ms: int = 500
    offline_max_duration_ms: int = 3000
    # Offline's one query is sized for this multiple of the rate SingleStream measured, so
    # it outlasts min_duration even when a shared machine slows down between the scenarios.
    offline_qps_margin: float = 2.0
    seed_note: str = "LoadGen's default RNG seeds (qsl, sample index, schedule)"

    @property
    def mlperf_minimums(self) -> bool:
        """Whether these settings meet MLPerf Inference's minimums (what a result claiming
        MLPerf compliance needs)."""
        return meets_mlperf_minimums(asdict(self))

    def record(self) -> dict:
        return {**asdict(self), "mlperf_minimums": self.mlperf_minimums}


def meets_mlperf_minimums(settings: dict | None) -> bool:
    """From the recorded numbers, not the profile's name."""
    if not isinstance(settings, dict):
        return False

    def at_least(key: str, floor: int) -> bool:
        value = settings.get(key)
        return isinstance(value, (int, float)) and value >= floor

    def uncapped(key: str) -> bool:  # 0 is "no maximum"; a cap must not cut the minimum short
        value = settings.get(key)
        return isinstance(value, (int, float)) and (value == 0 or value >= MLPERF_MIN_DURATION_MS)

    return (at_least("single_stream_min_query_count", MLPERF_SINGLE_STREAM_MIN_QUERIES)
            and at_least("single_stream_min_duration_ms", MLPERF_MIN_DURATION_MS)
            and uncapped("single_stream_max_duration_ms")
            and at_least("offline_min_query_count", MLPERF_OFFLINE_MIN_SAMPLES)
            and at_least("offline_min_duration_ms", MLPERF_MIN_DURATION_MS)
            and uncapped("offline_max_duration_ms"))


DAWNBENCH = LoadgenSettings()
MLPERF = LoadgenSettings(
    profile="mlperf",
    single_stream_min_query_count=MLPERF_SINGLE_STREAM_MIN_QUERIES,
    single_stream_min_duration_ms=MLPERF_MIN_DURATION_MS,
    single_stream_max_duration_ms=0,
    offline_min_query_count=MLPERF_OFFLINE_MIN_SAMPLES,
    offline_min_duration_ms=MLPERF_MIN_DURATION_MS,
    offline_max_duration_ms=0,
    offline_qps_margin=1.1,  # ten minutes is long enough that noise evens out
)
PROFILES = {"dawnbench": DAWNBENCH, "mlperf": MLPERF}


def check_available() -> str:
    """LoadGen's module version, or a HarnessError before any work."""
    try:
        import mlperf_loadgen  # noqa: F401  # lazy: optional (mlperf_loadgen: mounted only for --loadgen)
    except ImportError as exc:
        raise HarnessError(
            f"--loadgen needs mlperf_loadgen, which this Python cannot import ({exc}); "
            "the runner mounts it at /opt/runner/site"
        ) from None
    from importlib import metadata  # lazy: start-up (importlib.metadata, for --loadgen only)

    try:
        return metadata.version("mlcommons-loadgen")
    except metadata.PackageNotFoundError:
        return "unknown"


def sample_count(images: np.ndarray) -> int:
    per_item = int(np.prod(images.shape[1:])) * 4
    return max(1, min(len(images), LOADED_BYTES_CAP // max(per_item, 1)))


def _run_scenario(lg, scenario: str, predict: Callable, images: np.ndarray, out_dir: Path,
                  settings: LoadgenSettings, expected_latency_s: float, backend: str) -> dict:
    n_loaded = sample_count(images)
    loaded: dict[int, np.ndarray] = {}

    def load(indices):
        for i in indices:
            loaded[i] = np.ascontiguousarray(images[i : i + 1], dtype=np.float32)

    def unload(indices):
        for i in indices:
            loaded.pop(i, None)

    failures: list[str] = []

    def issue(queries):
        # Offline hands over every query at once; each is still one batch-1 call. An
        # exception must not cross into LoadGen's C++ thread (it would end the process):
        # the query is completed and the first failure is raised after the test.
        for q in queries:
            if not failures:
                try:
                    predict(loaded[q.index])
                except Exception as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
            lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0)])

    test = lg.TestSettings()
    test.mode = lg.TestMode.PerformanceOnly
    if scenario == "single_stream":
        test.scenario = lg.TestScenario.SingleStream
        test.single_stream_expected_latency_ns = max(1, int(expected_latency_s * 1e9))
        test.min_query_count = settings.single_stream_min_query_count
        test.min_duration_ms = settings.single_stream_min_duration_ms
        test.max_duration_ms = settings.single_stream_max_duration_ms
    else:
        test.scenario = lg.TestScenario.Offline
        # LoadGen sizes its one Offline query from this (about qps x min_duration samples);
        # aiming above the rate just measured keeps the query long enough to meet
        # min_duration when this shared machine slows down between the scenarios.
        test.offline_expected_qps = settings.offline_qps_margin / max(expected_latency_s, 1e-9)
        test.min_query_count = settings.offline_min_query_count
        test.min_duration_ms = settings.offline_min_duration_ms
        test.max_duration_ms = settings.offline_max_duration_ms
    test.performance_sample_count_override = n_loaded

    out_dir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(out_dir)
    log.log_output.copy_summary_to_stdout = False  # its lines must not reach the host's parser
    log.log_output.copy_detail_to_stdout = False

    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(len(images), n_loaded, load, unload)
    gc.collect()
    gc.disable()
    try:
        mllog.emit("loadgen_start", event_type="INTERVAL_START", backend=backend, scenario=scenario)
        lg.StartTestWithLogSettings(sut, qsl, test, log, NO_AUDIT_CONFIG)
        mllog.emit("loadgen_stop", event_type="INTERVAL_END", backend=backend, scenario=scenario)
    finally:
        gc.enable()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    if failures:
        raise HarnessError(f"the backend failed under LoadGen {scenario}: {failures[0]}")
    return {"performance_sample_count": n_loaded,
            "expected_latency_ns": int(expected_latency_s * 1e9)}


def run_loadgen(predict: Callable, images: np.ndarray, out_dir: Path, *, backend: str,
                expected_latency_s: float, settings: LoadgenSettings = DAWNBENCH) -> dict:
    """Run both scenarios; returns what info.json records under ``loadgen``."""
    import mlperf_loadgen as lg  # lazy: optional (mlperf_loadgen: mounted only for --loadgen)

    record: dict = {"version": check_available(), "settings": settings.record(),
                    "audit_config": NO_AUDIT_CONFIG, "scenarios": {}}
    for scenario in SCENARIOS:
        record["scenarios"][scenario] = _run_scenario(
            lg, scenario, predict, images, out_dir / scenario, settings, expected_latency_s, backend)
        # Offline is sized from the rate LoadGen itself just saw in SingleStream.
        expected_latency_s = _measured_latency_s(out_dir / scenario) or expected_latency_s
    return record


def _measured_latency_s(folder: Path) -> float | None:
    """1 / SingleStream's queries per second (with LoadGen's overhead), from its detail log."""
    try:
        lines = (folder / "mlperf_log_detail.txt").read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if '"result_qps_with_loadgen_overhead"' in line:
            try:
                qps = float(json.loads(line[line.index("{"):])["value"])
            except (ValueError, KeyError):
                return None
            return 1.0 / qps if qps > 0 else None
    return None
