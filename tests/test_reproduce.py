"""``runner reproduce`` against the real engine, with the contract-probe test entry."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
import yaml

from runner.cli import main
from runner.results import RESULT_SCHEMA
from runner.results.layout import SMOKE_DIR, entry_runs
from runner.score.training_evidence import FRACTION

pytestmark = pytest.mark.docker
PROBE = Path(__file__).parent / "entries" / "contract-probe"


@pytest.fixture
def results(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    monkeypatch.setenv("RUNNER_RESULTS", str(folder))
    return folder


def probe_entry(tmp_path: Path, mode: str, builder: str | None = None) -> Path:
    """The probe entry, running in ``mode`` (its image layers are shared across modes), with
    another of its builders if given."""
    folder = tmp_path / "contract-probe"
    shutil.copytree(PROBE, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["train"]["command"] = ["python3", "/entry/probe.py", mode]
    if builder:
        manifest["inference"]["builder"] = builder
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    return folder


def assert_the_builder_ran_only_after_the_entry(result: dict) -> None:
    """The probe's ``twice`` mode with ``tiny:build_with_heartbeat``: the builder's thread beats
    from the first evaluation on. Evaluations run after the training container exited, so no
    beat falls before its exit; the evaluator was ready and frozen while the entry ran (it
    started beside it, at the lowest CPU weight)."""
    origin = result["training"]["wall_clock_start_unix_ms"] / 1000
    ours = [e for e in events(result) if e.get("origin") == "runner"]
    stamps = {(e["key"], e["metadata"].get("index")): origin + e["t"] for e in ours
              if e["key"] in ("eval_freeze", "eval_thaw", "container_exit")}
    thawed, frozen_again, exited = stamps[("eval_thaw", 0)], stamps[("eval_freeze", 1)], stamps[("container_exit", None)]
    assert frozen_again - thawed > 2.5  # the entry worked 3 s between its two requests
    assert thawed - stamps[("eval_freeze", 0)] < 1.0  # a frozen window holds the copy only
    log = Path(result["_folder"], "logs", "evaluator.log").read_text()
    beats = [float(m) for m in re.findall(r"\] heartbeat (\d+\.\d+)$", log, re.MULTILINE)]
    assert beats, "the builder never ran"
    early = [b for b in beats if b < exited - 0.05]
    assert early == [], f"{len(early)} heartbeats before the training container exited"
    (start,) = [e for e in ours if e["key"] == "evaluator_start"]
    assert start["metadata"]["ready_at"] < start["metadata"]["frozen_at"] < exited - origin


def assert_the_training_cpu_time_is_recorded_at_each_freeze(result: dict) -> None:
    """The probe's ``twice`` mode spends 3 CPU-seconds between its two requests: the runner's
    freezes read the training container's cgroup (class 4f), and the evaluator's answers carry
    its own CPU time to predict."""
    freezes = [e["metadata"] for e in events(result) if e["key"] == "eval_freeze" and e.get("origin") == "runner"]
    first, second = (f["cpu_seconds"] for f in freezes)
    assert 0 < first and 2.8 < second - first < 4.5, freezes
    thaws = [e["metadata"] for e in events(result) if e["key"] == "eval_thaw" and e.get("origin") == "runner"]
    assert all(t["predict_cpu_seconds"] > 0 for t in thaws), thaws
    evidence = result["training"]["evidence"]
    if evidence is not None:  # the smoke threshold crossed: the ratio is recorded
        assert evidence["cpu_seconds"] > 0 and evidence["ratio"] >= FRACTION


def only_result(results: Path) -> dict:
    """The one result of the probe, checked against the published result.json schema."""
    (folder,) = entry_runs(results, "contract-probe")
    result = json.loads((folder / "result.json").read_text())
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
    return result | {"_folder": str(folder)}


def own_containers(engine, result: dict) -> list:
    """Containers of this result's run (the engine may hold other runs' containers), on any engine."""
    return engine.owned(Path(result["_folder"]).name)


def events(result: dict) -> list[dict]:
    lines = Path(result["_folder"], "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_sandbox_hides_labels_and_locks_the_container_down(
    engine, tmp_path, results, host_load_is_not_the_subject
):
    assert main(["reproduce", str(probe_entry(tmp_path, "sandbox")), "--no-infer"]) == 0
    result = only_result(results)
    (probe,) = [e["metadata"] for e in events(result) if e["key"] == "sandbox_probe"]
    # Only the training split is mounted: evaluation inputs go to the runner's evaluator,
    # and the evaluation labels never leave the host.
    assert [f for f in probe["files"] if f.endswith(".npy")] == [
        "/data/train/images.npy", "/data/train/labels.npy"
    ]
    assert probe["network"] is False
    assert probe["uid"] == 1000
    assert int(probe["cap_eff"], 16) == 0
    assert (probe["write_root"], probe["write_data"]) == (False, False)
    assert (probe["write_output"], probe["write_scratch"]) == (True, True)
    assert "RUNNER_SEED" in probe["env"]
    assert probe["cpus"] == 2  # the cpu-2core-x86 profile's limit, as a cpuset
    # An untrained model on real MNIST: complete, evaluated by the runner, far from the threshold.
    assert result["status"] == "complete" and result["conforming"], result["nonconforming_reasons"]
    (evaluation,) = result["training"]["evaluations"]
    assert evaluation["count"] == 10_000 and evaluation["scores"]["top1"] < 0.3
    assert evaluation["excluded"] and len(evaluation["checkpoint_sha256"]) == 64
    assert result["training"]["reached"] is False and result["cost"]["training_usd"] is None
    assert result["training"]["launch_stamp"] == "launcher"


def test_an_entry_that_reaches_for_the_network_fails(engine, tmp_path, results):
    assert main(["reproduce", str(probe_entry(tmp_path, "network")), "--smoke", "--no-infer"]) == 1
    result = only_result(results)
    assert result["status"] == "incomplete"
    assert "exited with code 1" in result["incomplete_reason"]
    log = Path(result["_folder"], "logs", "train.log").read_text()
    assert "URLError" in log


def test_a_build_that_fails_ends_the_inspection_read_ahead(engine, tmp_path, results, monkeypatch):
    """The read-ahead reads for one run: when that run's build fails it stops, instead of
    reading on beside whatever the process does next (in one process, two threads compressing
    at once once crashed the interpreter)."""
    import threading

    folder = probe_entry(tmp_path, "train")
    with open(folder / "Dockerfile", "a") as f:
        f.write("RUN false\n")
    given: list[threading.Event] = []

    def read_ahead(engine, base_id, wheels, images, labels, stop):
        given.append(stop)
        stop.wait(120)  # a long read, which only the run's end cuts short

    monkeypatch.setattr("runner.reproduce.read_ahead", read_ahead)
    assert main(["reproduce", str(folder), "--smoke", "--no-infer"]) != 0
    for thread in threading.enumerate():
        if thread.name == "inspection read-ahead":
            thread.join(10)
            assert not thread.is_alive()
    assert len(given) == 1 and given[0].is_set()


def test_checkpoints_the_runner_cannot_evaluate_are_recorded_not_scored(engine, tmp_path, results):
    assert main(["reproduce", str(probe_entry(tmp_path, "badckpt")), "--smoke", "--no-infer"]) == 0
    result = only_result(results)
    missing, outside = result["training"]["evaluations"]
    assert "cannot be read" in missing["problem"] and not missing["meets"]
    assert "leaves /output" in outside["problem"] and not outside["meets"]
    assert result["training"]["reached"] is False
    assert not result["conforming"]  # a smoke run never is


@pytest.mark.parametrize("full_curve", [False, True])
def test_after_the_crossing_checkpoints_are_evaluated_only_for_the_whole_curve(
    engine, tmp_path, results, host_load_is_not_the_subject, full_curve
):
    flags = ["--full-curve"] if full_curve else []
    assert main(["reproduce", str(probe_entry(tmp_path, "cross")), "--smoke", "--no-infer", *flags]) == 0
    result = only_result(results)
    training = result["training"]
    assert training["reached"] and training["crossing"] == 0
    freezes = [e for e in events(result) if e["key"] == "eval_freeze"]
    if full_curve:
        assert [e["epoch"] for e in training["evaluations"]] == [1, 2] and len(freezes) == 2
        assert not any("after the crossing" in note for note in training["notes"])
    else:  # the clock stopped at epoch 1: epoch 2 is neither frozen nor evaluated, and that is said
        assert [e["epoch"] for e in training["evaluations"]] == [1] and len(freezes) == 1
        assert any(note.startswith("1 evaluation request(s) after the crossing") for note in training["notes"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_run_killed_midway_keeps_an_incomplete_result_and_no_container(
    engine, tmp_path, results, sig
):
    entry = probe_entry(tmp_path, "sleep")
    env = {**os.environ, "RUNNER_RESULTS": str(results)}
    # A shell running this suite in the background (`cmd &`) leaves SIGINT ignored, and the
    # child would inherit that: give it the default disposition, as a terminal would.
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "reproduce", str(entry), "--smoke", "--no-infer"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    log = None
    while time.monotonic() < deadline:
        logs = list(results.glob("contract-probe/**/logs/train.log"))
        if logs and "epoch_start" in logs[0].read_text():
            log = logs[0]
            break
        assert proc.poll() is None, proc.stdout.read().decode()
        time.sleep(0.2)
    assert log is not None, "the run never started"
    proc.send_signal(sig)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, out
    assert "Traceback" not in out
    result = only_result(results)
    assert (result["status"], result["incomplete_reason"]) == ("incomplete", "interrupted")
    assert [e["key"] for e in events(result)][:3] == ["launch", "run_start", "epoch_start"]
    assert own_containers(engine, result) == []  # others' runs may share the engine


REPO = Path(__file__).resolve().parent.parent


def test_gpu_entry_without_its_gpu_is_refused_with_the_fix(engine, results, capsys):
    assert main(["reproduce", str(REPO / "entries" / "resnet9-v100")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("runner: error: this host does not match hardware profile 'aws-p3.2xlarge'")
    assert "gpu.count: expected 1, found 0" in err and "--smoke" in err
    assert not (results / "resnet9-v100").exists()


def test_gpu_entry_smoke_runs_on_cpu_and_is_non_conforming(engine, results):
    assert main(["reproduce", str(REPO / "entries" / "resnet9-v100"), "--smoke"]) == 0
    (folder,) = entry_runs(results, "resnet9-v100")
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "complete" and result["smoke"]
    assert not result["conforming"]
    assert any(r.startswith("smoke run") for r in result["nonconforming_reasons"])
    assert result["training"]["evaluations"][0]["count"] == 512
    # Three steps of training: the gate must refuse a latency claim, and say why.
    for backend in result["inference"].values():
        assert not backend["passed_gate"] and "misses the threshold" in backend["gate_reason"]


def test_a_timeout_keeps_an_incomplete_result_and_no_container(engine, tmp_path, results):
    entry = probe_entry(tmp_path, "sleep")
    assert main(["reproduce", str(entry), "--smoke", "--no-infer", "--timeout-minutes", "0.1"]) == 1
    result = only_result(results)
    assert result["status"] == "incomplete"
    reason = result["incomplete_reason"]
    assert reason.startswith("timed out after ") and int(reason.split()[3]) >= 6
    assert "epoch_start" in [e["key"] for e in events(result)]
    assert own_containers(engine, result) == []  # others' runs may share the engine


def test_runs_repeat_with_successive_seeds_and_are_summarised(engine, tmp_path, results, monkeypatch):
    from runner import keys
    from runner.bundle.filelist import read_manifest
    from runner.bundle.measured import measured_record
    from runner.keys.ledger import read_ledger

    import runner.bundle as bundle
    import runner.results.record as record

    pair = keys.generate(tmp_path / "key")  # a fresh key: its ledger holds these runs alone
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    entry = probe_entry(tmp_path, "sandbox")
    # Each run's record is finished in memory (across seeds too), then written once and signed once.
    writes, signatures = Counter(), Counter()
    write_json, sign = record.write_json, bundle._sign

    def counted_write(path, data):
        if Path(path).name == "result.json":
            writes[Path(path).parent.name] += 1
        return write_json(path, data)

    def counted_sign(result_dir, *args):
        assert (Path(result_dir) / "result.json").is_file()  # the signature covers the written record
        signatures[Path(result_dir).name] += 1
        return sign(result_dir, *args)

    monkeypatch.setattr(record, "write_json", counted_write)
    monkeypatch.setattr(bundle, "_sign", counted_sign)
    assert main(["reproduce", str(entry), "--smoke", "--no-infer", "--runs", "2", "--seed", "7"]) == 0
    folders = entry_runs(results, "contract-probe")
    assert writes == signatures == Counter({f.name: 1 for f in folders}), (writes, signatures)
    # Each finished folder (compared across seeds first) is signed once, and the runner's record
    # of what it measured is what was signed.
    assert sorted(line["run_id"] for line in read_ledger(pair.keyid)) == sorted(f.name for f in folders)
    for folder in folders:
        assert measured_record(folder)["files"] == read_manifest(folder)
    seeds = [json.loads((f / "result.json").read_text())["seed"] for f in folders]
    assert sorted(seeds) == [7, 8]
    assert {f.parent for f in folders} == {results / "contract-probe" / SMOKE_DIR}  # smoke runs kept apart
    (summary,) = (results / "contract-probe" / SMOKE_DIR).glob("runs-*.json")
    data = json.loads(summary.read_text())
    assert (data["runs"], data["reached"], data["median_tta_seconds"]) == (2, 0, None)
    assert sorted(data["run_ids"]) == [f.name for f in folders]


def test_the_builder_runs_only_after_the_entry_and_the_timings_say_where_time_went(
        engine, tmp_path, results):
    """The evaluator runs the entry's builder; nothing of it may run while the entry does: it
    is asked only after the training container exited. And the result's timings split the
    run into its phases."""
    main(["reproduce", str(probe_entry(tmp_path, "twice", "tiny:build_with_heartbeat")),
          "--smoke", "--no-infer", "--seed", "3"])
    result = only_result(results)
    assert_the_builder_ran_only_after_the_entry(result)
    assert_the_training_cpu_time_is_recorded_at_each_freeze(result)

    timings = result["timings"]
    names = [p["name"] for p in timings["phases"]]
    assert names[:2] == ["preflight", "fingerprint"] and "training" in names and names[-1] == "writing"
    # the host's load: before a build (its image may be built already) and before training
    assert names[names.index("result folder") - 1] == "host load check"
    training = next(p for p in timings["phases"] if p["name"] == "training")
    parts = training["parts"]
    assert [e["index"] for e in parts["evaluations"]] == [0, 1]
    assert parts["frozen_seconds"] == pytest.approx(sum(e["frozen_seconds"] for e in parts["evaluations"]), abs=1e-3)
    assert parts["entry_running_seconds"] > 2.5  # the 3 s sleep ran on the clock
    assert training["seconds"] >= parts["launch_seconds"] + parts["entry_running_seconds"] + parts["frozen_seconds"]
    assert timings["total_seconds"] == pytest.approx(sum(p["seconds"] for p in timings["phases"]), abs=1e-3)
