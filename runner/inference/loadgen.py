"""LoadGen on the host side: the runner-owned site folder the harness imports it from,
and the figures read back from LoadGen's own detail logs.

The entry's image never contains LoadGen. The runner pins the wheel (version and sha256)
in ``runner/harness/requirements.lock``, fetches it into its content-addressed wheelhouse
for the entry-image platform, and unpacks it once into
``RUNNER_HOME/harness-site/<digest>/``, which the inference container mounts read-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from runner import paths
from runner.entry_build import wheelhouse
from runner.entry_build.lockfile import parse_lock
from runner.errors import UserError

SITE_MOUNT = "/opt/runner/site"
WHEEL_PYTHON = "3.11"  # the CPython the pinned wheel is built for (requirements.lock's comment)
SCENARIOS = ("single_stream", "offline")
COMPLETE_MARKER = ".complete"
# The harness' settings profiles (runner/harness/loadgen.py): ``dawnbench`` bounds LoadGen to
# a few seconds beside the per-item figure; ``mlperf`` keeps MLPerf Inference's minimums.
DEFAULT_PROFILE = "dawnbench"
MLPERF_PROFILE = "mlperf"
PROFILES = (DEFAULT_PROFILE, MLPERF_PROFILE)


def settings_profile(with_loadgen: bool | str) -> str:
    """The profile a reproduce option names: True is the default, a string names one."""
    if with_loadgen is True:
        return DEFAULT_PROFILE
    if with_loadgen in PROFILES:
        return with_loadgen
    raise ValueError(f"unknown LoadGen settings {with_loadgen!r}; one of {', '.join(PROFILES)}")


def claims_mlperf_minimums(record: dict | None) -> bool:
    """Whether a result's ``inference.<backend>.loadgen`` ran with MLPerf's minimums, read
    from the recorded numbers (not the profile's name); records made before the profiles
    existed (5 s / 2 s minimums) never did."""
    from runner.harness.loadgen import meets_mlperf_minimums  # lazy: start-up (runner --help)

    return bool(record) and meets_mlperf_minimums((record or {}).get("settings"))


def host_problem(fingerprint: dict) -> str | None:
    """Why LoadGen cannot run under an engine that uses the host's own Python (the host
    engine, from its facts in the fingerprint): the pinned wheel is built for one Python
    (``WHEEL_PYTHON``); None when the host's is that one."""
    version = str((fingerprint.get("docker") or {}).get("version") or "")
    if version.split(".")[:2] == WHEEL_PYTHON.split("."):
        return None
    return (f"the pinned LoadGen wheel is for CPython {WHEEL_PYTHON} and the host engine's Python is "
            f"{version or 'unknown'}")


def lock_path() -> Path:
    return paths.harness_dir() / "requirements.lock"


def site_dir() -> Path:
    """The unpacked, verified LoadGen site folder (downloading the wheel the first time)."""
    pins = parse_lock(lock_path())
    wheels = wheelhouse.resolve(pins)  # re-hashes every wheel against the lock
    key = hashlib.sha256("".join(sorted(p.parent.name for p in wheels.values())).encode()).hexdigest()
    target = paths.harness_site_dir() / key[:16]
    if (target / COMPLETE_MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="unpack-", dir=target.parent) as tmp:
        staging = Path(tmp) / "site"
        for wheel in wheels.values():
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise UserError(f"wheel {wheel.name} has an unsafe path {member!r}",
                                        f"delete {wheel.parent} and pin a sound wheel")
                archive.extractall(staging)
        # The container's unprivileged user reads (and the loader maps) these files.
        for root, _, files in os.walk(staging):
            os.chmod(root, 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
        (staging / COMPLETE_MARKER).write_text(json.dumps(sorted(w.name for w in wheels.values())) + "\n")
        shutil.rmtree(target, ignore_errors=True)  # a half-unpacked folder from an interrupted run
        os.replace(staging, target)
    os.chmod(target, 0o755)
    return target


def read_detail_log(path: Path) -> dict:
    """LoadGen's ``:::MLLOG`` records from ``mlperf_log_detail.txt``, last value per key."""
    values: dict = {}
    for line in path.read_text(errors="replace").splitlines():
        start = line.find(":::MLLOG")
        if start < 0:
            continue
        try:
            record = json.loads(line[start + len(":::MLLOG"):])
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("key"), str):
            values[record["key"]] = record.get("value")
    return values


def _ms(ns) -> float | None:
    return round(float(ns) / 1e6, 6) if isinstance(ns, (int, float)) else None


def single_stream_figures(detail: dict) -> dict:
    return {
        "p50_ms": _ms(detail.get("result_50.00_percentile_latency_ns")),
        "p90_ms": _ms(detail.get("result_90.00_percentile_latency_ns")),
        "p99_ms": _ms(detail.get("result_99.00_percentile_latency_ns")),
        "mean_ms": _ms(detail.get("result_mean_latency_ns")),
        "max_ms": _ms(detail.get("result_max_latency_ns")),
        "early_stopping_p90_ms": _ms(detail.get("early_stopping_latency_ss")),
        "query_count": detail.get("result_query_count"),
        "valid": detail.get("result_validity") == "VALID",
    }


def offline_figures(detail: dict) -> dict:
    return {
        "samples_per_s": detail.get("result_samples_per_second"),
        "sample_count": detail.get("generated_samples_per_query"),
        "valid": detail.get("result_validity") == "VALID",
    }


def _busy_seconds(scenario: str, figures: dict) -> float | None:
    """Seconds LoadGen says the backend was busy; it must fit in the host's window."""
    if scenario == "single_stream" and figures["mean_ms"] and figures["query_count"]:
        return figures["mean_ms"] / 1e3 * figures["query_count"]
    if scenario == "offline" and figures["samples_per_s"] and figures["sample_count"]:
        return figures["sample_count"] / figures["samples_per_s"]
    return None


def loadgen_record(backend_dir: Path, info: dict, windows: dict[str, float | None], slack_s: float) -> dict | None:
    """``inference.<backend>.loadgen`` for result.json, or None when LoadGen did not run.

    ``windows`` maps a scenario to the seconds the host saw between its loadgen_start and
    loadgen_stop lines. A scenario whose figures do not fit that window, or whose logs are
    missing, keeps its files but gets ``problem`` instead of being trusted silently.
    """
    ran = info.get("loadgen")
    if ran is None:
        return None
    if ran.get("error"):
        return {"error": ran["error"], "settings": ran.get("settings")}
    record: dict = {"version": ran.get("version"), "settings": ran.get("settings"), "files": {}}
    for scenario in SCENARIOS:
        folder = backend_dir / "loadgen" / scenario
        detail_path = folder / "mlperf_log_detail.txt"
        if not detail_path.is_file() or not (folder / "mlperf_log_summary.txt").is_file():
            record[scenario] = {"problem": f"LoadGen wrote no logs for {scenario}"}
            continue
        detail = read_detail_log(detail_path)
        figures = single_stream_figures(detail) if scenario == "single_stream" else offline_figures(detail)
        figures.update((ran.get("scenarios") or {}).get(scenario) or {})
        window = windows.get(scenario)
        busy = _busy_seconds(scenario, figures)
        figures["window_seconds"] = window
        figures["problem"] = None
        if window is None:
            figures["problem"] = f"no host-stamped loadgen_start/loadgen_stop window for {scenario}"
        elif busy is None:
            figures["problem"] = f"LoadGen's detail log for {scenario} lacks its result figures"
        elif busy > window + slack_s:
            figures["problem"] = (f"LoadGen's {scenario} figures add up to {busy:.3f} s, more than the "
                                  f"{window:.3f} s the host saw")
        record[scenario] = figures
        record["files"][scenario] = {
            name: f"inference/{backend_dir.name}/loadgen/{scenario}/{name}"
            for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
        }
    return record
