"""A run's record is finished in memory and written once, then the folder is signed once
(``runner.reproduce.finish_runs`` -> ``runner.bundle.finish_folder``): nothing is written into
the folder after its signature, the signature covers the written record, and a folder whose
files changed between the end of its run and its finishing is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_result import add_plan, honest_plan, make_result_folder, stage_mnist_stand_in

from runner import keys
from runner.bundle.filelist import ENVELOPE, file_digests, read_manifest
from runner.bundle.measured import measured_record, record_measured
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.options import ReproduceOptions
from runner.plan import make_plan
from runner.reproduce import EndedRun, finish_runs
from runner.results.record import RESULT_FILE, Result

ENTRY = Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu"
RUN_ID = "20261127T010203Z-s3-finish"


@pytest.fixture
def ended(tmp_path, monkeypatch):
    """A run as it ends: its folder without result.json (the record in memory) and the
    runner's record of its files."""
    home = tmp_path / "home"
    monkeypatch.setenv("RUNNER_HOME", str(home))
    pair = keys.generate(home / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    folder = make_result_folder(tmp_path / "results" / RUN_ID, stage_mnist_stand_in(home), capture_host(), seed=3)
    add_plan(folder, honest_plan(folder))
    result = Result.read(folder)
    (folder / RESULT_FILE).unlink()
    record_measured(folder, result=result.to_dict())
    return EndedRun(folder, result), pair


def _plan(sign: bool = True):
    return make_plan(ENTRY, ReproduceOptions(seed=3, sign=sign))


def test_the_record_is_written_once_with_its_ledger_place_and_then_signed(ended, monkeypatch):
    run, pair = ended
    before = {p: d for p, d in file_digests(run.folder).items()}
    writes = []
    write = Result.write
    monkeypatch.setattr(Result, "write", lambda self, folder: (writes.append(folder), write(self, folder))[1])
    signing = finish_runs([run], None, _plan())
    assert writes == [run.folder] and run.folder in signing
    written = Result.read(run.folder)
    assert written.ledger is not None and written.training.cross_seed is not None  # both before the write
    manifest = read_manifest(run.folder)
    assert manifest[RESULT_FILE] == file_digests(run.folder)[RESULT_FILE]  # the signature covers the record
    assert {p: d for p, d in manifest.items() if p != RESULT_FILE} == before  # nothing else changed
    assert (run.folder / ENVELOPE).is_file() and measured_record(run.folder)["files"] == manifest


def test_without_signing_the_record_is_written_once_and_no_bundle_made(ended):
    run, _ = ended
    assert finish_runs([run], None, _plan(sign=False)) == {}
    assert Result.read(run.folder).run_id == RUN_ID and not (run.folder / ENVELOPE).exists()
    assert measured_record(run.folder)["files"] == file_digests(run.folder)


@pytest.mark.parametrize("tamper", ["changed", "planted"])
def test_a_folder_changed_after_its_run_ended_is_not_written_or_signed(ended, tamper):
    run, _ = ended
    if tamper == "changed":
        (run.folder / "curve.tsv").write_text("epoch\thours\ttop1Accuracy\n1\t0.0001\t99.9\n")
    else:  # a result.json put where the runner writes its own
        (run.folder / RESULT_FILE).write_text("{}")
    with pytest.raises(UserError, match="is not what this runner measured") as err:
        finish_runs([run], None, _plan())
    assert ("curve.tsv changed" if tamper == "changed" else "result.json added") in err.value.problem
    assert not (run.folder / ENVELOPE).exists()
