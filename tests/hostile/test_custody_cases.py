"""Custody of signed results (issue 37): nothing writes into a signed result or signs it
again after an edit, re-inference loses no backend, and an MLPerf export cannot count one run
twice. Each case is the issue's own, against a signed result folder made by the project's
functions; every refusal is one line naming what changed, with the folder left as it was."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from synthetic_result import make_result_folder, reinference_work, stage_mnist_stand_in

from runner import keys
from runner.bundle import make_bundle, pack
from runner.bundle.filelist import ENVELOPE
from runner.fingerprint import capture_host

from hostile_helpers import DEFAULT_ENTRY, assert_one_line_error, run_cli, signed_result


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A signed current-format result (with its plan) and the key that signed it."""
    pair = keys.generate(tmp_path_factory.mktemp("keys"))
    folder, home = signed_result(tmp_path_factory, "20261122T010203Z-s0-custod", keys.load_signer(pair.private),
                                 with_plan=True)
    yield folder, pair, home


@pytest.fixture
def copy(signed, tmp_path, monkeypatch):
    """A copy of the signed result, with this runner's key being the one that signed it."""
    folder, pair, home = signed
    monkeypatch.setenv("RUNNER_HOME", str(home))
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    target = tmp_path / "results" / "mnist-cnn-cpu" / folder.name
    shutil.copytree(folder, target)
    return target


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _edit_plan(folder: Path) -> None:
    plan = json.loads((folder / "plan.json").read_text())
    plan.update(seed=7, seeds=[7], network="host", limits={**plan["limits"], "cpus": 64.0, "memory": "200g"})
    plan["data"].update(train_dir="/etc", eval_dir=str(Path(os.environ["RUNNER_HOME"]) / "keys"))
    (folder / "plan.json").write_text(json.dumps(plan))


def _flip_checkpoint(folder: Path) -> None:
    path = next((folder / "checkpoints").iterdir())
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


def _random_weights(folder: Path) -> None:
    (folder / "output" / "model" / "weights.pt").write_bytes(np.random.default_rng(1).bytes(4096))


def _edit_tta(folder: Path) -> None:
    result = json.loads((folder / "result.json").read_text())
    result["training"]["tta_seconds"] = 0.5
    (folder / "result.json").write_text(json.dumps(result))


EDITS = [(_edit_plan, "plan.json"), (_flip_checkpoint, "checkpoints/"), (_random_weights, "output/model/weights.pt"),
         (_edit_tta, "result.json")]


@pytest.mark.parametrize("edit, named", EDITS, ids=[e.__name__.lstrip("_") for e, _ in EDITS])
def test_reinfer_refuses_an_edited_signed_result_naming_the_changed_file(copy, capsys, edit, named):
    """Before: each edited copy was re-signed and then verified 18/18."""
    edit(copy)
    before = _snapshot(copy)
    code, out, err = run_cli(capsys, "reinfer", str(DEFAULT_ENTRY), "--backend", "torch", "--result", str(copy))
    assert_one_line_error(code, out, err, "is not what was signed", "changed: " + named, "re-inference refused")
    assert _snapshot(copy) == before  # nothing written, nothing signed


def test_bundle_sign_refuses_an_edited_signed_result(copy, capsys):
    _edit_plan(copy)
    before = _snapshot(copy)
    code, out, err = run_cli(capsys, "bundle", "sign", str(copy))
    assert_one_line_error(code, out, err, "changed: plan.json", "signing it again refused")
    assert _snapshot(copy) == before


def test_reinfer_refuses_a_result_signed_by_another_key(copy, tmp_path, monkeypatch, capsys):
    """An edit signed by its editor's own key is intact under that key: re-signing it with this
    runner's key would vouch for it."""
    _edit_tta(copy)
    make_bundle(copy, keys.load_signer(keys.generate(tmp_path / "theirs").private))
    code, out, err = run_cli(capsys, "reinfer", str(DEFAULT_ENTRY), "--backend", "torch", "--result", str(copy))
    assert_one_line_error(code, out, err, "not by this runner's key", "a result you did not run")


def test_audit_replay_verifies_first_and_refuses_an_edited_plan(copy, capsys):
    """Before: "replayed: the bundle's predictions are what its models give", rc 0."""
    _edit_plan(copy)
    code, out, err = run_cli(capsys, "audit", str(copy), "--replay")
    line = assert_one_line_error(code, out, err, "fails runner verify", "file-digests", "plan", "not replayed")
    assert "✗ plan" in out and "seed 7" in out, (out, line)


def test_reinfer_picks_the_newest_full_result_not_a_newer_smoke_run(copy, monkeypatch):
    from runner.reinference import latest_result

    monkeypatch.setenv("RUNNER_RESULTS", str(copy.parent.parent))
    smoke = copy.parent / "20261123T000000Z-s0-smoke0"
    shutil.copytree(copy, smoke)
    result = json.loads((smoke / "result.json").read_text())
    result["smoke"] = True
    (smoke / "result.json").write_text(json.dumps(result))
    assert latest_result("mnist-cnn-cpu") == copy


def test_reinfer_merges_per_backend_and_says_exactly_what_it_replaced(copy, capsys):
    """Timing onnxruntime again keeps torch's figures and files (before: deleted, with
    "the earlier inference phase (torch) was replaced")."""
    from runner.reinference import replacement_note, swap_in
    from runner.results.inference import BackendRun
    from runner.results.record import Result

    result = Result.read(copy)
    torch_files = _snapshot(copy / "inference" / "torch")
    work = reinference_work(copy)
    kept = swap_in(copy, work, result, {"onnxruntime": BackendRun.from_dict("onnxruntime", {"passed_gate": True})})
    assert kept == ["torch"]
    after = json.loads((copy / "result.json").read_text())
    assert sorted(after["inference"]) == ["onnxruntime", "torch"]
    assert after["inference"]["torch"]["latency_ms"] == result.inference["torch"].latency_ms
    assert _snapshot(copy / "inference" / "torch") == torch_files
    events = [json.loads(line) for line in (copy / "inference" / "events.jsonl").read_text().splitlines()]
    assert [(e["key"], e["metadata"]["backend"]) for e in events] == [
        ("infer_start", "torch"), ("infer_stop", "torch"), ("infer_start", "onnxruntime"), ("infer_stop", "onnxruntime")]
    log = (copy / "logs" / "infer.log").read_text()
    assert log.startswith("harness: torch") and log.endswith("harness: onnxruntime\n")
    assert replacement_note(["onnxruntime"], ["torch"], []) == (
        "inference: replaced the earlier figures of onnxruntime; kept torch as they were")
    assert replacement_note([], [], ["torch"]) == "inference: added torch; kept no earlier backend"


# -- runner export mlperf: one run counts once ------------------------------------------------

SUBMISSION = {"org": "Test Lab", "platform": "cpu-2core-x86", "division": "open", "status": "onprem"}


@pytest.fixture
def mlperf_home(tmp_path, monkeypatch):
    from runner.mlperf.config import set_value

    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    for key, value in SUBMISSION.items():
        set_value(f"mlperf.{key}", value)


def test_export_mlperf_refuses_the_same_run_five_times(signed, mlperf_home, tmp_path, capsys):
    """Before: five byte-identical result_N.txt, which the package checker accepted."""
    folder = signed[0]
    code, out, err = run_cli(capsys, "export", "mlperf", *[str(folder)] * 5, "--out", str(tmp_path / "tree"))
    assert_one_line_error(code, out, err, "are the same run", f"run id {folder.name}", "count it twice")
    assert not (tmp_path / "tree").exists()


def test_export_mlperf_refuses_a_copy_with_another_run_id(signed, mlperf_home, tmp_path, capsys):
    folder = signed[0]
    other = tmp_path / "20261122T010209Z-s9-renamd"
    shutil.copytree(folder, other)
    result = json.loads((other / "result.json").read_text())
    result["run_id"] = other.name
    (other / "result.json").write_text(json.dumps(result))
    code, out, err = run_cli(capsys, "export", "mlperf", str(folder), str(other), "--out", str(tmp_path / "tree"))
    assert_one_line_error(code, out, err, "are the same run", "events.jsonl")


def test_export_mlperf_names_every_missing_setting_at_once(signed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "empty-home"))
    code, out, err = run_cli(capsys, "export", "mlperf", str(signed[0]), "--out", str(tmp_path / "tree"))
    assert_one_line_error(code, out, err, "mlperf.org, mlperf.platform", "which are not set",
                          "runner config set mlperf.org", "runner config set mlperf.platform")


def test_export_mlperf_reads_bundles_and_runs_the_package_checker(signed, mlperf_home, tmp_path, capsys):
    """Five different runs, given as packed bundles, each counting under the key that signed it
    (verify recomputes their scores from the data staged in this home); ``--check`` runs MLPerf's
    own package checker."""
    pytest.importorskip("mlperf_logging")
    _, pair, _ = signed
    staged = stage_mnist_stand_in(tmp_path / "home")
    bundles = []
    for seed in range(5):
        folder = make_result_folder(tmp_path / "runs" / f"20261122T01020{seed}Z-s{seed}-pack{seed:02d}", staged,
                                    capture_host(), seed=seed)
        make_bundle(folder, keys.load_signer(pair.private))
        bundles.append(pack(folder, tmp_path / f"{folder.name}.tar.gz"))
    code, out, err = run_cli(capsys, "export", "mlperf", *map(str, bundles), "--out", str(tmp_path / "tree"),
                             "--trusted-keys", str(pair.public), "--check")
    assert code == 0, (out, err)
    assert "package checker: SUCCESS" in out and "Traceback" not in out + err
    assert len(list((tmp_path / "tree" / "results" / "cpu-2core-x86" / "resnet").iterdir())) == 5
    assert (tmp_path / "tree").exists() and not (tmp_path / ENVELOPE).exists()
