"""The host side of the inference phase: gate, wall-window check, statistics, preflight,
and (with the real engine) the whole phase in a container."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from runner import paths
from runner.errors import UserError
from runner.inference import (
    TRANSPORT_SLACK_S, check_backends_available, cost_per_10k_usd, evaluate_backend,
    harness_command, latency_stats_ms,
)
from runner.inference.phase import Windows
from runner.manifest import load_entry
from runner.tasks import Task, get_task

N = 200
TASK = Task("small", "top1", 0.9, N, 10, (1, 28, 28), ("top1Accuracy",))
LABELS = np.arange(N, dtype=np.int64) % 10
DEFAULT_ENTRY = paths.repo_root() / "entries" / "mnist-cnn-cpu"


def write_backend(folder: Path, predictions: np.ndarray, latencies_ns: np.ndarray, **info) -> Path:
    folder.mkdir(parents=True)
    np.save(folder / "predictions.npy", predictions)
    np.save(folder / "latencies_ns.npy", latencies_ns)
    (folder / "info.json").write_text(json.dumps({"backend": folder.name, "warmup": {"count": 7}, **info}))
    return folder


def evaluate(folder: Path, window: float | None, usd_per_hour: float = 0.1008) -> dict:
    return evaluate_backend(folder.name, folder, TASK, LABELS, window, usd_per_hour)


def test_latency_statistics_in_milliseconds():
    stats = latency_stats_ms(np.arange(1, 101, dtype=np.int64) * 1_000_000)  # 1..100 ms
    assert stats == {"mean": 50.5, "p50": 50.5, "p90": 90.1, "p99": 99.01, "max": 100.0}


def test_cost_of_ten_thousand_items():
    # 0.2 ms per item -> 2 s for 10,000 items -> 2/3600 h at $0.1008/h
    assert cost_per_10k_usd(0.0002, 0.1008) == pytest.approx(2 / 3600 * 0.1008)


def test_a_backend_that_meets_the_threshold_inside_its_window_gets_a_claim(tmp_path):
    folder = write_backend(tmp_path / "torch", LABELS.copy(), np.full(N, 250_000, np.int64))
    rec = evaluate(folder, window=0.06)  # 200 x 0.25 ms = 0.05 s timed
    assert rec["passed_gate"] and rec["gate_reason"] is None and rec["error"] is None
    assert rec["scores"] == {"top1": 1.0} and rec["count"] == N and rec["warmup"] == 7
    assert rec["latency_ms"]["mean"] == 0.25 and rec["latency_ms"]["max"] == 0.25
    assert rec["throughput_per_s"] == 4000
    assert rec["cost_per_10k_usd"] == pytest.approx(0.00025 * 10_000 / 3600 * 0.1008)
    assert rec["timed_seconds"] == pytest.approx(0.05) and rec["window_seconds"] == 0.06


def test_a_wrong_count_fails_the_gate_with_the_reason(tmp_path):
    folder = write_backend(tmp_path / "onnxruntime", LABELS[:-1].copy(), np.full(N - 1, 1000, np.int64))
    rec = evaluate(folder, window=1.0)
    assert not rec["passed_gate"]
    assert rec["gate_reason"] == f"onnxruntime predicted {N - 1} items; the evaluation set has {N}"
    assert rec["latency_ms"] is None and rec["throughput_per_s"] is None


def test_predictions_below_the_threshold_get_no_latency_claim(tmp_path):
    preds = LABELS.copy()
    preds[: N // 5] = (preds[: N // 5] + 1) % 10  # 80% right, threshold 90%
    rec = evaluate(write_backend(tmp_path / "torch", preds, np.full(N, 1000, np.int64)), window=1.0)
    assert not rec["passed_gate"] and rec["scores"]["top1"] == pytest.approx(0.8)
    assert "top1 0.8000 misses the threshold 0.9" in rec["gate_reason"]
    assert rec["latency_ms"] is None and rec["cost_per_10k_usd"] is None


def test_latencies_that_do_not_fit_the_host_window_get_no_claim(tmp_path):
    folder = write_backend(tmp_path / "torch", LABELS.copy(), np.full(N, 1_000_000, np.int64))  # 0.2 s
    rec = evaluate(folder, window=0.2 - TRANSPORT_SLACK_S - 0.01)
    assert not rec["passed_gate"] and "more than the" in rec["gate_reason"]
    assert rec["scores"] == {"top1": 1.0} and rec["latency_ms"] is None
    assert evaluate(folder, window=0.2)["passed_gate"]  # the same files inside a wide enough window
    missing = evaluate(folder, window=None)
    assert not missing["passed_gate"] and "infer_start/infer_stop" in missing["gate_reason"]


def test_non_positive_latencies_are_refused(tmp_path):
    lat = np.full(N, 1000, np.int64)
    lat[3] = 0
    rec = evaluate(write_backend(tmp_path / "torch", LABELS.copy(), lat), window=1.0)
    assert not rec["passed_gate"] and "non-positive" in rec["gate_reason"]


def test_harness_failures_are_errors_not_gate_misses(tmp_path):
    failed = tmp_path / "tensorrt"
    failed.mkdir()
    (failed / "info.json").write_text(json.dumps({"backend": "tensorrt", "error": "no CUDA"}))
    rec = evaluate(failed, window=None)
    assert not rec["passed_gate"] and rec["error"] == "no CUDA" and "no CUDA" in rec["gate_reason"]
    nothing = evaluate(tmp_path / "onnxruntime", window=None)
    assert not nothing["passed_gate"] and nothing["error"] == "no info.json"


def test_windows_are_stamped_per_backend_from_mllog_lines():
    w = Windows()
    w.on_line('noise', 0.5)
    w.on_line(':::MLLOG {"key": "infer_start", "metadata": {"backend": "torch"}}', 1.0)
    w.on_line(':::MLLOG {"key": "infer_stop", "metadata": {"backend": "torch"}}', 3.5)
    w.on_line(':::MLLOG {"key": "infer_start", "metadata": {"backend": "onnxruntime"}}', 4.0)
    w.on_line("harness: error: backend onnxruntime: boom", 4.2)
    assert w.window("torch") == 2.5 and w.window("onnxruntime") is None
    assert w.errors == ["backend onnxruntime: boom"] and len(w.events) == 3


def fingerprint(gpus: int, nvidia_runtime: bool) -> dict:
    return {"gpu": {"gpus": [{"index": i} for i in range(gpus)]}, "docker": {"nvidia_runtime": nvidia_runtime}}


@pytest.mark.parametrize("backend", ["tensorrt", "onnxruntime-cuda", "onnxruntime-tensorrt"])
def test_gpu_backends_are_refused_before_any_work_without_a_gpu(backend):
    with pytest.raises(UserError, match="needs an NVIDIA GPU") as err:
        check_backends_available(["torch", backend], fingerprint(0, False))
    assert backend in str(err.value) and "Fix:" in str(err.value)
    with pytest.raises(UserError, match="NVIDIA Container Toolkit"):
        check_backends_available([backend], fingerprint(1, False))  # this host has no hook either
    check_backends_available([backend], fingerprint(1, True))


def test_this_host_really_has_no_gpu_for_tensorrt():
    """NVML, not a stand-in: this machine has no NVIDIA driver."""
    with pytest.raises(UserError, match="needs an NVIDIA GPU"):
        check_backends_available(["tensorrt"], None)


def test_cpu_backends_and_unknown_names():
    check_backends_available(["torch", "onnxruntime"], None)
    with pytest.raises(UserError, match="unknown inference backend 'openvino'"):
        check_backends_available(["openvino"], None)


def test_harness_command_follows_the_manifest():
    entry = load_entry(DEFAULT_ENTRY)
    cmd = harness_command(entry, ["torch", "onnxruntime"], threads=1)
    spec = entry.inference
    assert cmd[:3] == ["python3", "-m", "harness"]
    assert cmd[cmd.index("--weights") + 1] == f"/output/{spec.weights}"
    assert cmd[cmd.index("--warmup") + 1] == str(spec.warmup)
    assert cmd[cmd.index("--topk") + 1] == "1"
    imagenet = dataclasses.replace(entry, task=get_task("imagenet"),
                                   inference=dataclasses.replace(spec, fp16=True))
    cmd = harness_command(imagenet, ["tensorrt"], threads=2)
    assert cmd[cmd.index("--topk") + 1] == "5" and "--fp16" in cmd


def test_the_inference_container_is_made_from_the_plan(tmp_path, monkeypatch):
    """``inference_spec``: the plan's image, backends, limits, threads and LoadGen choice; the
    trained model's folder read-only at /output (a re-inference reads the result's while its
    plan's folder takes the new files); a writable /inference in the plan's folder."""
    from runner.inference import TrainedModel, inference_spec, loadgen
    from runner.options import ReproduceOptions
    from runner.plan import RunData, make_plan

    monkeypatch.setattr(loadgen, "site_dir", lambda: tmp_path / "site")

    def plan_of(backends: list[str], with_loadgen: bool | str):
        return make_plan(DEFAULT_ENTRY, ReproduceOptions(seed=1, loadgen=with_loadgen)).resolved(
            gpus=0, backends=backends, image="sha256:img",
            data=RunData(tmp_path / "train", tmp_path / "eval", "sha256:0"),
        ).for_run(1, tmp_path / "work", tmp_path / "scratch")

    plan = plan_of(["torch", "onnxruntime"], True)
    model = TrainedModel(tmp_path / "result" / "output", LABELS)
    spec = inference_spec(plan, model)
    mounts = {m.container: (m.host, m.read_only) for m in spec.mounts}
    threads = plan.entry.inference.threads
    assert (spec.image, spec.label, spec.gpus, spec.workdir) == ("sha256:img", "infer", 0, "/entry")
    assert mounts["/output"] == (model.output_dir, True) and mounts["/data/eval"] == (tmp_path / "eval", True)
    assert mounts["/inference"] == (tmp_path / "work" / "inference", False)
    assert (tmp_path / "work" / "inference").is_dir() and mounts[loadgen.SITE_MOUNT] == (tmp_path / "site", True)
    assert (spec.cpus, spec.memory) == (plan.limits.cpus, plan.limits.memory) == (2, "8g")  # the profile's
    assert spec.command == harness_command(plan.entry, ["torch", "onnxruntime"], threads, with_loadgen=True)
    assert spec.env["RUNNER_THREADS"] == spec.env["OMP_NUM_THREADS"] == str(threads)
    assert spec.env["PYTHONPATH"] == f"/opt/runner:{loadgen.SITE_MOUNT}"

    spec = inference_spec(plan_of(["tensorrt"], False), model)
    assert spec.gpus == 1 and "--loadgen" not in spec.command and spec.env["PYTHONPATH"] == "/opt/runner"
    assert loadgen.SITE_MOUNT not in {m.container for m in spec.mounts}


# --- the whole phase, in a real container -----------------------------------------------

@pytest.fixture
def shared_tmp():
    """A folder the container's unprivileged user can read (pytest's tmp_path is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="runner-test-infer-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.docker
def test_inference_phase_in_the_entry_image(engine, docker_client, shared_tmp):
    import torch
    import yaml

    from conftest import make_entry
    from runner.entry_build import build_entry
    from runner.data.store import StagedData
    from runner.inference import TrainedModel, run_inference
    from runner.options import ReproduceOptions
    from runner.plan import RunData, make_plan
    from runner.profiles import load_profile
    from bands_model import MODEL_SOURCE, trained_bands

    # An entry with the default entry's image recipe and a tiny model, for MNIST's 10,000 items.
    folder = make_entry(
        shared_tmp / "infer-probe",
        dockerfile=(DEFAULT_ENTRY / "Dockerfile").read_text(),
        lock=(DEFAULT_ENTRY / "requirements.lock").read_text(),
        files={"bands.py": MODEL_SOURCE},
    )
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["inference"].update(builder="bands:build", warmup=50)
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    entry = load_entry(folder)
    built = build_entry(entry, engine)

    model = trained_bands(folder)
    result_dir = shared_tmp / "result"
    (result_dir / "output" / "model").mkdir(parents=True)
    torch.save(model.state_dict(), result_dir / "output" / entry.inference.weights)

    n = entry.task.eval_size
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, n).astype(np.int64)
    images = rng.integers(0, 40, (n, 1, 28, 28)).astype(np.uint8)
    for i, c in enumerate(labels):
        images[i, 0, 2 * c + 4 : 2 * c + 6, :] = 200
    data_root = shared_tmp / "data"
    for sub in ("eval", "labels"):
        (data_root / sub).mkdir(parents=True)
    np.save(data_root / "eval" / "images.npy", images)
    np.save(data_root / "labels" / "eval_labels.npy", labels)
    staged = StagedData(task="mnist", root=data_root, train_dir=data_root / "train",
                        eval_dir=data_root / "eval", labels=data_root / "labels",
                        digest="sha256:test", source="test")
    os.chmod(data_root / "eval" / "images.npy", 0o644)

    profile = load_profile(entry.hardware_profile)
    backends = ["torch", "onnxruntime"]
    plan = make_plan(folder, ReproduceOptions(seed=1, backends=backends)).resolved(
        gpus=0, backends=backends, image=built.image_id,
        data=RunData(staged.train_dir, staged.eval_dir, staged.digest)).for_run(1, result_dir, shared_tmp / "scratch")
    records = run_inference(engine, plan, TrainedModel(plan.output_dir, labels))
    log = (result_dir / "logs" / "infer.log").read_text()
    for backend in ("torch", "onnxruntime"):
        rec = records[backend]
        assert rec.passed_gate, (rec.gate_reason, log[-2000:])
        assert rec.count == n and rec.score("top1") == 1.0
        assert len(np.load(result_dir / "inference" / backend / "latencies_ns.npy")) == n
        assert 0 < rec.timed_seconds <= rec.window_seconds + TRANSPORT_SLACK_S
        assert rec.cost_per_10k_usd == pytest.approx(
            rec.mean_ms / 1e3 * 10_000 / 3600 * profile.price.usd_per_hour)
        assert rec.info["warmup"]["count"] == 50
    assert records["onnxruntime"].info["model_sha256"] == records["onnxruntime"].info["onnx"]["sha256"]
    assert (result_dir / "inference" / "model.onnx").is_file()
    events = [json.loads(line) for line in (result_dir / "inference" / "events.jsonl").read_text().splitlines()]
    assert [e["key"] for e in events].count("infer_start") == 2
    assert [e["key"] for e in events].count("loadgen_start") == 4  # two scenarios per backend

    # LoadGen ran from the runner's site folder (the image has no LoadGen) on every item.
    for backend in ("torch", "onnxruntime"):
        lg = records[backend].loadgen
        single, offline = lg["single_stream"], lg["offline"]
        assert lg["version"] == "6.0.17" and lg["settings"]["profile"] == "dawnbench"  # the default
        assert lg["settings"]["single_stream_min_query_count"] == 128 and not lg["settings"]["mlperf_minimums"]
        assert single["problem"] is None and offline["problem"] is None, (single, offline)
        assert single["valid"], single  # Offline's validity (min duration met) depends on the machine's load
        assert single["performance_sample_count"] == n
        assert 0 < single["p50_ms"] <= single["p90_ms"] <= single["p99_ms"]
        assert single["query_count"] >= 128 and offline["samples_per_s"] > 0
        # Bounded: SingleStream stops issuing at its 3 s maximum; Offline's one query (about 1 s
        # of items) is not cut short, so a loaded machine may stretch it.
        assert single["window_seconds"] < 3 + 1 and offline["window_seconds"] < 10
        assert single["mean_ms"] / 1e3 * single["query_count"] <= single["window_seconds"] + TRANSPORT_SLACK_S
        for scenario in ("single_stream", "offline"):
            folder = result_dir / "inference" / backend / "loadgen" / scenario
            assert "MLPerf Results Summary" in (folder / "mlperf_log_summary.txt").read_text()
            assert ":::MLLOG" in (folder / "mlperf_log_detail.txt").read_text()
            assert lg["files"][scenario]["mlperf_log_detail.txt"] == (
                f"inference/{backend}/loadgen/{scenario}/mlperf_log_detail.txt")
    import docker.errors

    with pytest.raises(docker.errors.ContainerError, match="mlperf_loadgen"):  # the image alone lacks it
        docker_client.containers.run(built.image_id, ["python3", "-c", "import mlperf_loadgen"],
                                     network_disabled=True, remove=True)


# --- `runner reinfer`: which result, and replacing its inference only on success ----------

def test_runner_infer_picks_the_latest_result_and_refuses_what_it_cannot_rerun(tmp_path, monkeypatch):
    from runner.reinference import _read_result, latest_result

    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path))
    with pytest.raises(UserError, match="no results for mnist-cnn-cpu"):
        latest_result("mnist-cnn-cpu")
    from runner.fingerprint import capture_host
    from tests.synthetic_result import make_result_folder, stage_mnist_stand_in

    staged = stage_mnist_stand_in(tmp_path / "home")
    for run_id in ("20261121T000000Z-s0-aaaaaa", "20261122T000000Z-s0-bbbbbb"):
        folder = make_result_folder(tmp_path / "mnist-cnn-cpu" / run_id, staged, capture_host(None))
        result = json.loads((folder / "result.json").read_text())
        result["smoke"] = run_id.endswith("b")
        (folder / "result.json").write_text(json.dumps(result))
        if not result["smoke"]:
            (folder / "output" / "model" / "weights.pt").unlink()  # training did not finish
    newest = latest_result("mnist-cnn-cpu")  # the newest full run, not the newer smoke run
    assert newest.name.startswith("20261121")
    entry = load_entry(DEFAULT_ENTRY)
    with pytest.raises(UserError, match="smoke run"):
        _read_result(newest.parent / "20261122T000000Z-s0-bbbbbb", entry)
    with pytest.raises(UserError, match="no trained model"):
        _read_result(newest, entry)
    record = json.loads((newest / "result.json").read_text())
    (newest / "result.json").write_text(json.dumps({**record, "image": None, "data": None}))  # a Slurm task that died
    with pytest.raises(UserError, match="a run that never started"):
        _read_result(newest, entry)


def test_swap_in_replaces_inference_and_result_together(tmp_path):
    from runner.reinference import swap_in

    result_dir = tmp_path / "run"
    (result_dir / "inference" / "torch").mkdir(parents=True)
    (result_dir / "inference" / "torch" / "info.json").write_text("old")
    (result_dir / "logs").mkdir()
    (result_dir / "logs" / "infer.log").write_text("old log")
    work = result_dir / ".infer-x"
    (work / "inference" / "onnxruntime").mkdir(parents=True)
    (work / "inference" / "onnxruntime" / "info.json").write_text("new")
    (work / "logs").mkdir()
    (work / "logs" / "infer.log").write_text("new log")
    from runner.fingerprint import capture_host
    from runner.results.record import Result
    from tests.synthetic_result import make_result_folder, stage_mnist_stand_in

    before = Result.read(make_result_folder(tmp_path / "20261122T000000Z-s0-cccccc",
                                            stage_mnist_stand_in(tmp_path / "home"), capture_host(None)))
    from runner.results.inference import BackendRun

    # Only onnxruntime is timed again: torch's files and record are kept (a per-backend merge).
    kept = swap_in(result_dir, work, before, {"onnxruntime": BackendRun.from_dict("onnxruntime", {"passed_gate": True})})
    assert kept == ["torch"]
    assert (result_dir / "inference" / "onnxruntime" / "info.json").read_text() == "new"
    assert (result_dir / "inference" / "torch" / "info.json").read_text() == "old"
    assert (result_dir / "logs" / "infer.log").read_text() == "old log\n--- runner reinfer onnxruntime ---\nnew log"
    after = json.loads((result_dir / "result.json").read_text())
    assert after["inference"]["onnxruntime"] == {"passed_gate": True}
    assert after["inference"]["torch"] == before.to_dict()["inference"]["torch"]
    assert after["run_id"] == before.run_id and after["training"] == before.to_dict()["training"]
    assert sorted(p.name for p in result_dir.iterdir()) == [".infer-x", "inference", "logs", "result.json"]


def test_runner_infer_refuses_a_gpu_backend_here_before_any_work(tmp_path, monkeypatch, capsys):
    from runner.cli import main

    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path))  # no results: the GPU check must come first
    assert main(["reinfer", str(DEFAULT_ENTRY), "--backend", "tensorrt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("runner: error: backend tensorrt needs an NVIDIA GPU") and "Fix:" in err
    assert not list(tmp_path.iterdir())


def test_one_backend_table_drives_the_schema_the_preflight_and_smoke_runs():
    """Every list of backends is derived from the harness' table: none can drift."""
    from runner.harness.backends import CPU_BACKENDS, GPU_BACKENDS, REGISTRY
    from runner.manifest.schema import ENTRY_SCHEMA
    from runner.inference import preflight

    enum = ENTRY_SCHEMA["properties"]["inference"]["properties"]["backends"]["items"]["enum"]
    assert enum == list(REGISTRY)
    assert preflight.GPU_BACKENDS is GPU_BACKENDS
    assert set(CPU_BACKENDS) | GPU_BACKENDS == set(REGISTRY) and not set(CPU_BACKENDS) & GPU_BACKENDS
    for name, spec in REGISTRY.items():  # a GPU backend is refused here, a CPU one is not
        if spec.needs_gpu:
            with pytest.raises(UserError):
                check_backends_available([name], fingerprint(0, False))
        else:
            check_backends_available([name], fingerprint(0, False))
