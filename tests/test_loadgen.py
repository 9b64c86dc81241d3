"""LoadGen without Docker: the harness' scenarios on the host's LoadGen, the host's reading
of LoadGen's logs against its own window, and the runner-owned site folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from conftest import SHARED_WHEELHOUSE, copy_wheel_into

from runner import paths
from runner.entry_build.lockfile import parse_lock
from runner.errors import UserError
from runner.inference import loadgen as host_loadgen

sys.path.insert(0, str(paths.harness_dir().parent))  # the harness is imported as ``harness``
from harness.loadgen import LoadgenSettings, run_loadgen  # noqa: E402

QUICK = LoadgenSettings(single_stream_min_query_count=64, single_stream_min_duration_ms=300,
                        single_stream_max_duration_ms=5000, offline_min_duration_ms=300,
                        offline_max_duration_ms=5000)


@pytest.fixture(scope="module")
def loadgen_run(tmp_path_factory):
    """Both scenarios around a predict that takes about 0.2 ms, on 300 items."""
    import time

    backend_dir = tmp_path_factory.mktemp("run") / "torch"
    images = np.random.default_rng(0).integers(0, 255, (300, 1, 4, 4), dtype=np.uint8)

    def predict(x):
        assert x.dtype == np.float32 and x.shape == (1, 1, 4, 4)
        end = time.perf_counter() + 0.0002
        while time.perf_counter() < end:
            pass
        return 0

    record = run_loadgen(predict, images, backend_dir / "loadgen", backend="torch",
                         expected_latency_s=0.0002, settings=QUICK)
    return backend_dir, {"loadgen": record}


def test_loadgen_figures_are_read_from_its_own_logs_and_fit_the_host_window(loadgen_run):
    backend_dir, info = loadgen_run
    assert info["loadgen"]["version"] == "6.0.17"
    assert info["loadgen"]["settings"]["single_stream_min_query_count"] == 64
    rec = host_loadgen.loadgen_record(backend_dir, info, {"single_stream": 30.0, "offline": 30.0}, 0.1)
    single, offline = rec["single_stream"], rec["offline"]
    assert single["problem"] is None and offline["problem"] is None
    assert single["valid"] and single["query_count"] >= 64 and single["performance_sample_count"] == 300
    assert 0.2 <= single["p50_ms"] <= single["p90_ms"] <= single["max_ms"]
    assert offline["valid"] and 0 < offline["samples_per_s"] <= 1 / 0.0002
    for scenario in ("single_stream", "offline"):
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
            assert (backend_dir / "loadgen" / scenario / name).is_file()

    # result.json's schema types the record: a figure that is not a number is refused.
    import jsonschema

    from runner.results.schema import RESULT_SCHEMA

    backend = {"passed_gate": True, "gate_reason": None, "scores": {}, "count": 1, "latency_ms": None, "loadgen": rec}
    inference = RESULT_SCHEMA["properties"]["inference"]
    jsonschema.validate({"torch": json.loads(json.dumps(backend))}, inference)
    single["p90_ms"] = "fast"
    with pytest.raises(jsonschema.ValidationError, match="'fast' is not of type"):
        jsonschema.validate({"torch": backend}, inference)


def test_loadgen_figures_that_do_not_fit_the_host_window_are_flagged(loadgen_run):
    backend_dir, info = loadgen_run
    rec = host_loadgen.loadgen_record(backend_dir, info, {"single_stream": 0.01, "offline": None}, 0.0)
    assert "more than the 0.010 s the host saw" in rec["single_stream"]["problem"]
    assert "no host-stamped loadgen_start/loadgen_stop" in rec["offline"]["problem"]
    assert host_loadgen.loadgen_record(backend_dir, {}, {}, 0.1) is None  # LoadGen did not run
    failed = host_loadgen.loadgen_record(backend_dir, {"loadgen": {"error": "boom"}}, {}, 0.1)
    assert failed["error"] == "boom"


def test_harness_refuses_loadgen_before_any_work_when_it_cannot_import_it(tmp_path):
    # A Python whose path lacks LoadGen (an entry image without the runner's site mount).
    env = {"PYTHONPATH": str(paths.harness_dir().parent), "PATH": os.environ["PATH"]}
    code = ("import sys; sys.modules['mlperf_loadgen'] = None; "
            "from harness.cli import main; "
            "sys.exit(main(['--builder', 'm:f', '--weights', 'w', '--backends', 'torch', '--loadgen', "
            f"'--out', '{tmp_path / 'out'}']))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "--loadgen needs mlperf_loadgen" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_site_folder_holds_the_pinned_wheel_unpacked_once(private_home):
    (pin,) = parse_lock(host_loadgen.lock_path())
    assert pin.key == "mlcommons-loadgen" and len(pin.hashes) == 1
    stored = SHARED_WHEELHOUSE / "sha256" / pin.hashes[0]
    if stored.is_dir():  # seed the private wheelhouse; otherwise site_dir downloads it
        copy_wheel_into(private_home, next(stored.iterdir()))
    site = host_loadgen.site_dir()
    assert site.parent == paths.harness_site_dir()
    module = next(site.glob("mlperf_loadgen*.so"))
    assert stat.S_IMODE(module.stat().st_mode) == 0o644 and stat.S_IMODE(site.stat().st_mode) == 0o755
    assert json.loads((site / ".complete").read_text())[0].startswith("mlcommons_loadgen-6.0.17-cp311")
    mtime = module.stat().st_mtime_ns
    assert host_loadgen.site_dir() == site and module.stat().st_mtime_ns == mtime  # not unpacked again

    # A wheel changed in the wheelhouse is refused, not unpacked.
    wheel = next((private_home / "wheelhouse" / "sha256" / pin.hashes[0]).iterdir())
    wheel.chmod(0o644)
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    with pytest.raises(UserError, match="which the lock does not allow"):
        host_loadgen.site_dir()


def test_a_backend_failing_under_loadgen_is_reported_not_fatal(tmp_path):
    from harness.errors import HarnessError

    def predict(x):
        raise RuntimeError("out of memory")

    images = np.zeros((20, 1, 2, 2), dtype=np.uint8)
    with pytest.raises(HarnessError, match="failed under LoadGen single_stream: RuntimeError: out of memory"):
        run_loadgen(predict, images, tmp_path / "loadgen", backend="torch", expected_latency_s=0.001,
                    settings=QUICK)


# --- issue 26 item 3: LoadGen at the cost it is worth -----------------------------------

def test_default_settings_take_a_few_seconds_and_say_they_are_not_mlperfs():
    from harness.loadgen import DAWNBENCH, MLPERF, PROFILES

    assert LoadgenSettings() == DAWNBENCH == PROFILES["dawnbench"]
    # Each scenario stops at its maximum whatever the model: a few seconds per backend.
    assert 0 < DAWNBENCH.single_stream_max_duration_ms <= 3000
    assert 0 < DAWNBENCH.offline_max_duration_ms <= 3000
    assert DAWNBENCH.single_stream_min_duration_ms + DAWNBENCH.offline_min_duration_ms <= 2000
    assert DAWNBENCH.single_stream_min_query_count >= 100  # enough queries for a p99
    record = DAWNBENCH.record()
    assert record["profile"] == "dawnbench" and record["mlperf_minimums"] is False
    assert not host_loadgen.claims_mlperf_minimums({"settings": record})
    # Records written before the profiles (5 s / 2 s minimums) never met MLPerf's either.
    old = {"single_stream_min_query_count": 1024, "single_stream_min_duration_ms": 5000,
           "single_stream_max_duration_ms": 20000, "offline_min_duration_ms": 2000,
           "offline_max_duration_ms": 20000, "seed_note": "..."}
    assert not host_loadgen.claims_mlperf_minimums({"settings": old})


def test_mlperf_profile_keeps_mlperfs_minimums():
    from harness.loadgen import MLPERF, PROFILES

    assert PROFILES["mlperf"] is MLPERF
    # mlperf.conf: *.SingleStream.min_duration = 600000, *.Offline.min_duration = 600000,
    # resnet50.Offline.min_query_count = 24576; SingleStream's spec minimum is 1024 queries.
    assert (MLPERF.single_stream_min_query_count, MLPERF.single_stream_min_duration_ms) == (1024, 600_000)
    assert (MLPERF.offline_min_query_count, MLPERF.offline_min_duration_ms) == (24_576, 600_000)
    assert MLPERF.single_stream_max_duration_ms == MLPERF.offline_max_duration_ms == 0  # no maximum
    assert MLPERF.record()["mlperf_minimums"] is True
    assert host_loadgen.claims_mlperf_minimums({"settings": MLPERF.record()})
    # Read from the numbers, not the name: a record calling itself mlperf with a cap is not.
    capped = {**MLPERF.record(), "offline_max_duration_ms": 20_000}
    assert not host_loadgen.claims_mlperf_minimums({"settings": capped})


def test_default_settings_run_in_a_few_seconds_and_are_recorded(tmp_path):
    """The default profile on a 0.2 ms model over 2,000 items: both scenarios well under the
    16 s the 5 s / 2 s minimums (x 2 backends) cost, and the settings are in the record."""
    import time

    from harness.loadgen import DAWNBENCH

    images = np.random.default_rng(0).integers(0, 255, (2000, 1, 4, 4), dtype=np.uint8)

    def predict(x):
        end = time.perf_counter() + 0.0002
        while time.perf_counter() < end:
            pass
        return 0

    started = time.monotonic()
    record = run_loadgen(predict, images, tmp_path / "torch" / "loadgen", backend="torch",
                         expected_latency_s=0.0002)
    elapsed = time.monotonic() - started
    assert elapsed < 2 * (DAWNBENCH.single_stream_max_duration_ms + DAWNBENCH.offline_max_duration_ms) / 1000
    assert record["settings"] == DAWNBENCH.record()
    rec = host_loadgen.loadgen_record(tmp_path / "torch", {"loadgen": record},
                                      {"single_stream": 30.0, "offline": 30.0}, 0.1)
    assert rec["settings"]["profile"] == "dawnbench" and rec["settings"]["mlperf_minimums"] is False
    assert rec["single_stream"]["problem"] is None and rec["single_stream"]["query_count"] >= 128
    assert rec["offline"]["problem"] is None and rec["offline"]["samples_per_s"] > 0
    print(f"default LoadGen settings, both scenarios: {elapsed:.2f} s")


def test_loadgen_mlperf_flag_reaches_the_harness(tmp_path):
    from pathlib import Path

    from harness.cli import parse_args
    from runner.cli import parser as runner_parser
    from runner.cli.reproduce import loadgen_option
    from runner.inference.phase import harness_command
    from runner.manifest import load_entry
    from runner.options import ReproduceOptions
    from runner.plan import LOCAL, PLAN_FILE, SLURM, make_plan, plan_of_task
    from runner.slurm.submit import task_arguments

    parser = runner_parser()
    entry_dir = paths.repo_root() / "entries" / "mnist-cnn-cpu"
    default = parser.parse_args(["reproduce", str(entry_dir)])
    mlperf = parser.parse_args(["reproduce", str(entry_dir), "--loadgen-mlperf"])
    off = parser.parse_args(["reproduce", str(entry_dir), "--no-loadgen"])
    assert (loadgen_option(default), loadgen_option(mlperf), loadgen_option(off)) == (True, "mlperf", False)
    with pytest.raises(SystemExit):
        parser.parse_args(["reproduce", str(entry_dir), "--no-loadgen", "--loadgen-mlperf"])

    entry = load_entry(entry_dir)
    for option, profile in ((True, "dawnbench"), ("mlperf", "mlperf")):
        cmd = harness_command(entry, ["torch"], threads=1, with_loadgen=option)
        assert "--loadgen" in cmd and cmd[cmd.index("--loadgen-settings") + 1] == profile
        assert parse_args(cmd[3:]).loadgen_settings == profile  # the harness accepts what it is given
    assert "--loadgen" not in harness_command(entry, ["torch"], threads=1, with_loadgen=False)
    with pytest.raises(ValueError, match="unknown LoadGen settings"):
        harness_command(entry, ["torch"], threads=1, with_loadgen="quick")
    # A Slurm task runs the submitter's plan: with the settings the submit host asked for.
    for option in ("mlperf", True, False):
        make_plan(entry_dir, ReproduceOptions(loadgen=option, seed=5, runs=2), SLURM).write(tmp_path)
        assert task_arguments(Path(entry_dir), tmp_path / PLAN_FILE)[-2:] == ["--plan", str(tmp_path / PLAN_FILE)]
        task = plan_of_task(tmp_path / PLAN_FILE, 6)
        assert (task.options.loadgen, task.seeds, task.placement, task.options.sign) == (option, (6,), LOCAL, False)
