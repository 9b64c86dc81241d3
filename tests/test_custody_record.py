"""The runner signs only what it measured (issue 45, item 4).

The auditor's forgery: in a signed result folder, delete ``bundle/``, flip a checkpoint's
bytes, edit ``plan.json``, change the TTA and the cross-seed record, then ``runner bundle
sign`` it. The runner keeps its own record of every file a run measured, outside the folder
(``runner.bundle.measured``, written where the run is signed), and signs a folder again only
as that record says. The folders are synthetic (``tests/synthetic_result.py``), signed the way
a run's end signs them (``runner.bundle.sign_folder``)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from synthetic_result import add_plan, honest_plan, make_result_folder, reinference_work, stage_mnist_stand_in

from runner import keys
from runner.bundle import make_bundle, sign_folder
from runner.bundle.filelist import BUNDLE_DIR, ENVELOPE, read_manifest
from runner.bundle.measured import measured_record, record_path, require_measured
from runner.cli import main
from runner.errors import UserError
from runner.fingerprint import capture_host

RUNNER = Path(__file__).resolve().parents[1] / "runner"
RUN_ID = "20261122T010203Z-s0-record"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A home with a key, and a result folder signed by the run's own signing step."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        pair = keys.generate(home / "keys")
        mp.setenv(keys.ENV_VAR, str(pair.private))
        staged = stage_mnist_stand_in(home)
        folder = make_result_folder(tmp_path_factory.mktemp("results") / RUN_ID, staged, capture_host())
        add_plan(folder, honest_plan(folder))
        sign_folder(folder)
    return home, folder, pair


@pytest.fixture
def run(base, tmp_path, monkeypatch):
    """This test's copy of the home (the record, the key, its ledger) and of the folder."""
    home, folder, pair = base
    shutil.copytree(home, tmp_path / "home")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(keys.ENV_VAR, str(tmp_path / "home" / pair.private.relative_to(home)))
    target = tmp_path / "results" / "mnist-cnn-cpu" / folder.name
    shutil.copytree(folder, target)
    return target


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, *needles: str) -> str:
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and "error:" in lines[0], err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def forge(folder: Path) -> str:
    """The auditor's edits; returns the checkpoint flipped."""
    shutil.rmtree(folder / BUNDLE_DIR)
    checkpoint = sorted((folder / "checkpoints").iterdir())[0]
    data = bytearray(checkpoint.read_bytes())
    data[100] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    plan = json.loads((folder / "plan.json").read_text())
    plan["limits"]["cpus"] = 64.0
    (folder / "plan.json").write_text(json.dumps(plan))
    result = json.loads((folder / "result.json").read_text())
    result["training"]["tta_seconds"] = 0.5
    result["training"]["cross_seed"] = {"runs": 5, "independent": True}
    (folder / "result.json").write_text(json.dumps(result))
    return checkpoint.relative_to(folder).as_posix()


def test_the_run_end_records_every_signed_file_outside_the_folder(run):
    record = measured_record(run)
    assert record is not None and record_path(RUN_ID).is_file()
    assert record["files"] == read_manifest(run)  # the bundle's file list, bundle/ itself left out
    assert record["run_id"] == RUN_ID and record["entry"] == "mnist-cnn-cpu" and record["folder"]
    assert not any(path.startswith(BUNDLE_DIR + "/") for path in record["files"])


def test_the_forged_folder_is_refused_naming_what_changed(run, capsys):
    """Before: signed, and then verified."""
    checkpoint = forge(run)
    before = snapshot(run)
    code, _, err = cli(capsys, "bundle", "sign", str(run))
    line = one_line_error(code, err, "is not what this runner measured", f"{checkpoint} changed", "plan.json changed",
                          "result.json changed (", "training.tta_seconds", "-> 0.5", "training.cross_seed",
                          "signing it again refused")
    assert "bundle sign" not in line.split("Fix:")[-1], line
    assert snapshot(run) == before and not (run / BUNDLE_DIR).exists()  # nothing written, nothing signed


@pytest.mark.parametrize("edit", ["tta", "checkpoint", "added"])
def test_each_edit_alone_is_refused_without_a_bundle(run, capsys, edit):
    shutil.rmtree(run / BUNDLE_DIR)
    if edit == "tta":
        result = json.loads((run / "result.json").read_text())
        result["training"]["tta_seconds"] = 0.5
        (run / "result.json").write_text(json.dumps(result, indent=2))
        named = "result.json changed (training.tta_seconds"
    elif edit == "checkpoint":
        next((run / "checkpoints").iterdir()).write_bytes(b"other bytes")
        named = "changed"
    else:
        (run / "output" / "extra.bin").write_bytes(b"\0")
        named = "output/extra.bin added"
    code, _, err = cli(capsys, "bundle", "sign", str(run))
    one_line_error(code, err, named, "signing it again refused")


def test_an_untouched_folder_whose_bundle_was_deleted_is_signed_again(run, capsys):
    shutil.rmtree(run / BUNDLE_DIR)
    code, out, err = cli(capsys, "bundle", "sign", str(run))
    assert code == 0, (out, err)
    assert (run / ENVELOPE).is_file()
    assert measured_record(run)["files"] == read_manifest(run)  # the record follows the new signature


def test_a_folder_this_host_never_measured_is_refused(run, capsys, tmp_path, monkeypatch):
    record_path(RUN_ID).unlink()
    before = snapshot(run)
    code, _, err = cli(capsys, "bundle", "sign", str(run))
    one_line_error(code, err, f"this runner did not measure run {RUN_ID}", "it signs only runs it measured")
    assert snapshot(run) == before
    # Nor one made by hand and bundled without a key: an unsigned manifest is no measurement.
    shutil.rmtree(run / BUNDLE_DIR)
    make_bundle(run, None)
    code, _, err = cli(capsys, "bundle", "sign", str(run))
    one_line_error(code, err, "did not measure run")


def test_a_folder_signed_by_another_key_is_still_refused(run, capsys, tmp_path):
    make_bundle(run, keys.load_signer(keys.generate(tmp_path / "theirs").private))
    code, _, err = cli(capsys, "bundle", "sign", str(run))
    one_line_error(code, err, "not by this runner's key")


def test_reinfer_refuses_a_forged_folder_without_a_bundle(run, capsys):
    """Before: refused with "sign it with `runner bundle sign` first"."""
    from runner.paths import repo_root

    forge(run)
    code, _, err = cli(capsys, "reinfer", str(repo_root() / "entries" / "mnist-cnn-cpu"), "--backend", "torch",
                       "--result", str(run))
    line = one_line_error(code, err, "has no bundle", "re-inference refused")
    assert "bundle sign" not in line, line


def _reinfer_in_place(folder: Path) -> list[Path]:
    """What ``runner reinfer`` writes before it signs: a new backend swapped in (``swap_in``).
    Returns the final model's evaluations it added (none: the run timed its model)."""
    from runner.reinference import swap_in
    from runner.results.inference import BackendRun
    from runner.results.record import Result

    work = reinference_work(folder)
    swap_in(folder, work, Result.read(folder),
            {"onnxruntime": BackendRun.from_dict("onnxruntime", {"passed_gate": True})})
    shutil.rmtree(work)
    return []


def test_reinfer_signs_an_intact_folder_again_and_updates_the_record(run):
    from runner.reinference import ACTION, sign_reinferred

    require_measured(run, ACTION)  # reinfer's check before a byte is written
    before = measured_record(run)
    sign_reinferred(run, _reinfer_in_place(run))
    after = measured_record(run)
    assert after["files"] == read_manifest(run)
    assert after["files"]["inference/onnxruntime/info.json"] and "inference/onnxruntime/info.json" not in before["files"]
    assert after["files"]["result.json"] != before["files"]["result.json"]
    assert "onnxruntime" in after["result"]["inference"]


@pytest.mark.parametrize("edit, named", [("plan", "plan.json changed"),
                                         ("tta", "result.json changed (training.tta_seconds")])
def test_reinfer_refuses_to_sign_what_changed_beside_its_own_files(run, edit, named):
    """An edit made while the harness ran is not signed with the new inference."""
    from runner.reinference import sign_reinferred

    _reinfer_in_place(run)
    if edit == "plan":
        (run / "plan.json").write_text("{}")
    else:
        result = json.loads((run / "result.json").read_text())
        result["training"]["tta_seconds"] = 0.5
        (run / "result.json").write_text(json.dumps(result))
    with pytest.raises(UserError) as caught:
        sign_reinferred(run, [])
    assert named in caught.value.problem and "re-inference refused" in caught.value.problem


def _user_error_fixes():
    """Every literal text in a UserError's second argument (its fix) under runner/."""
    for path in sorted(RUNNER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "UserError":
                fix = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "fix"),
                                                                   None)
                if fix is not None:
                    for sub in ast.walk(fix):
                        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                            yield path.relative_to(RUNNER.parent), sub.value


def test_no_refusal_advises_signing_again():
    offenders = [f"{path}: {text}" for path, text in _user_error_fixes() if "bundle sign" in text]
    assert offenders == [], offenders
    assert any(True for _ in _user_error_fixes())  # the scan finds fixes at all


def test_the_runner_signs_only_through_sign_folder_or_sign_again():
    """``make_bundle`` is called by the bundle package alone: every signing path of the runner
    goes through the record (``sign_folder`` at a run's end, ``sign_again`` later)."""
    callers = []
    for path in sorted(RUNNER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "make_bundle":
                callers.append(path.relative_to(RUNNER).as_posix())
    assert set(callers) == {"bundle/__init__.py"}, callers
