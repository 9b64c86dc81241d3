"""Every run is remembered (issue 44, item 4): the signing key's hash-chained ledger, the
place each bundle records in it, ``runner verify``'s checks of bundles against each other and
against a published ledger, "k of N runs of this entry with this key" in ``runner ls``, and
the cross-seed checks against the key's earlier signed runs (synthetic results, no Docker)."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest
from synthetic_result import edit_result, make_result_folder, new_signer, stage_mnist_stand_in
from tests.hostile.hostile_helpers import run_cli

from runner.bundle import make_bundle
from runner.digests import sha256_file
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.keys.ledger import (
    GENESIS,
    appending,
    chain_problem,
    earlier_runs,
    ledger_path,
    line_hash,
    position_problem,
    published,
    read_ledger,
)
from runner.score.across_runs import Earlier, across_runs
from runner.tasks import get_task
from runner.verify import Auditor, verify_bundles
from runner.verify.ledger import ACROSS, LedgerClaim, across_problems

ENTRY = "mnist-cnn-cpu"
KEY = "ab" * 32


def _append(book, run_id: str, entry: str = ENTRY, smoke: bool = False, digest: str = "cd" * 32) -> dict:
    place = book.position(entry, smoke, run_id)
    book.append(place, entry=entry, smoke=smoke, run_id=run_id, seed=1, verdict={"status": "complete"},
                result_sha256=digest, folder=Path("/nowhere") / run_id)
    return place


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


# -- the chain ---------------------------------------------------------------------------------
def test_lines_chain_and_count_the_runs_of_each_entry(home):
    with appending(KEY) as book:
        first = _append(book, "r1")
        second = _append(book, "r2")
        again = _append(book, "r1")  # signed again (its result changed): a new line, not a new run
        other = _append(book, "r3", entry="other")
        smoke = _append(book, "r4", smoke=True)
    assert first == {"key_id": KEY, "index": 0, "previous": GENESIS, "entry_runs": 1}
    assert (second["index"], second["entry_runs"], again["entry_runs"], other["entry_runs"], smoke["entry_runs"]) == (
        1, 2, 2, 1, 1)
    lines = read_ledger(KEY)
    assert [line["index"] for line in lines] == [0, 1, 2, 3, 4] and chain_problem(lines) is None
    assert second["previous"] == lines[0]["hash"] == line_hash(lines[0])
    # the local folders are neither hashed nor published: the published chain is as intact
    assert chain_problem(published(lines)) is None and "folder" not in published(lines)[0]


@pytest.mark.parametrize("edit, where", [
    (lambda lines: lines[1].update(seed=99), "line 2: its hash"),
    (lambda lines: lines.pop(1), "line 2: index 2"),
    (lambda lines: lines[2].update(previous="ef" * 32), "line 3: previous"),
])
def test_a_broken_chain_is_never_appended_to_and_the_line_is_named(home, edit, where):
    with appending(KEY) as book:
        for run in ("r1", "r2", "r3"):
            _append(book, run)
    path = ledger_path(KEY)
    lines = [json.loads(raw) for raw in path.read_text().splitlines()]
    edit(lines)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(UserError) as err:
        with appending(KEY):
            pass
    assert where in str(err.value) and "Fix: restore" in str(err.value) and "\n" not in str(err.value)


def test_a_torn_last_line_is_named(home):
    with appending(KEY) as book:
        _append(book, "r1")
    with open(ledger_path(KEY), "a") as fh:
        fh.write('{"index": 1, "prev')
    with pytest.raises(UserError, match="broken at line 2: cut short"):
        read_ledger(KEY)


def _sign_many(run: int) -> None:
    for i in range(6):
        with appending(KEY) as book:
            _append(book, f"p{run}-{i}")


def test_runs_signed_at_once_chain_in_turn(home):
    """Processes signing at once (``--runs N``, Slurm tasks, two reproductions) hold the lock
    from the head's read to the append: one chain, no index twice."""
    workers = [multiprocessing.get_context("fork").Process(target=_sign_many, args=(n,)) for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert all(w.exitcode == 0 for w in workers)
    lines = read_ledger(KEY)
    assert len(lines) == 24 and chain_problem(lines) is None
    assert [line["index"] for line in lines] == list(range(24))


def test_a_place_on_its_own_is_held_to_its_index():
    good = {"key_id": KEY, "index": 3, "previous": "ef" * 32, "entry_runs": 2}
    assert position_problem(good) is None
    assert "cannot stand at index" in position_problem({**good, "entry_runs": 5})
    assert "genesis" in position_problem({**good, "index": 0, "entry_runs": 1})
    assert "genesis" in position_problem({**good, "previous": GENESIS})
    assert "entry_runs" in position_problem({**good, "entry_runs": True})


# -- bundles: their place, verify across them and against the ledger -------------------------
@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """Three runs of the entry signed in turn with one key, through the runner's own path
    (``make_bundle(..., ledger=True)``), the key's home holding its ledger."""
    root = tmp_path_factory.mktemp("ledger")
    home, results = root / "home", root / "results" / ENTRY
    signer, keys = new_signer(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        first = make_result_folder(results / "20261122T010203Z-s0-aaaaaa", staged, capture_host())
        edit_result(first, conforming=True, nonconforming_reasons=[])
        folders = [first]
        for seed, name in ((5, "20261123T010203Z-s5-bbbbbb"), (9, "20261124T010203Z-s9-cccccc")):
            folder = make_result_folder(results / name, staged, capture_host(), seed=seed)  # its own draw
            edit_result(folder, conforming=True, nonconforming_reasons=[])
            folders.append(folder)
        places = [make_bundle(folder, signer, ledger=True).ledger for folder in folders]
        lines = read_ledger(signer.public_key.keyid)
    return root, home, folders, places, lines, signer, keys, staged


@pytest.fixture
def copies(signed, tmp_path):
    """The three signed folders, copied to tamper with."""
    out = []
    for folder in signed[2]:
        shutil.copytree(folder, tmp_path / folder.name)
        out.append(tmp_path / folder.name)
    return out


def _ledger_file(signed, tmp_path, edit=None) -> Path:
    lines = published(signed[4])
    if edit:
        edit(lines)
    path = tmp_path / "published.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_each_signed_result_records_its_place_and_the_line_its_digest(signed):
    _, _, folders, places, lines, signer, _, _ = signed
    assert [p["index"] for p in places] == [0, 1, 2] and [p["entry_runs"] for p in places] == [1, 2, 3]
    for folder, place, line in zip(folders, places, lines):
        result = json.loads((folder / "result.json").read_text())
        assert result["ledger"] == place and place["key_id"] == signer.public_key.keyid
        assert line["result_sha256"] == sha256_file(folder / "result.json")
        assert line["run_id"] == folder.name and line["verdict"]["conforming"] is True
    assert places[1]["previous"] == lines[0]["hash"] and places[2]["previous"] == lines[1]["hash"]


def test_bundles_and_the_published_ledger_verify_together(signed, tmp_path):
    _, _, folders, _, _, signer, _, _ = signed
    from runner.verify.ledger import read_published

    key, lines = read_published(_ledger_file(signed, tmp_path))
    reports, across = verify_bundles(folders, Auditor(trusted_keys=[signer.public_key], ledgers={key: lines}))
    for report in reports:
        assert report.get("ledger").ok, report.get("ledger").detail
        assert "the ledger given (3 lines, intact" in report.get("ledger").detail
    assert across.name == ACROSS and across.ok and "3 of 3 runs of mnist-cnn-cpu" in across.detail


@pytest.mark.parametrize("edit, needle", [
    (lambda lines: lines.pop(), "it leaves this run out"),  # the ledger published without the last run
    (lambda lines: lines[1].update(seed=42), "broken at line 2: its hash"),  # a line edited
    (lambda lines: lines.__setitem__(slice(None), [dict(line, run_id="x") for line in lines]), "broken at line 1"),
])
def test_a_ledger_that_leaves_out_or_edits_a_run_fails_the_ledger_check(signed, tmp_path, edit, needle):
    _, _, folders, _, _, signer, _, _ = signed
    from runner.verify.ledger import read_published

    key, lines = read_published(_ledger_file(signed, tmp_path, edit))
    reports, _ = verify_bundles(folders, Auditor(trusted_keys=[signer.public_key], ledgers={key: lines}))
    verdict = reports[-1].get("ledger")
    assert not verdict.ok and needle in verdict.detail, verdict.detail


def test_a_result_not_at_its_index_fails_against_the_ledger(signed, copies, tmp_path):
    """A run signed again after the ledger was exported with a count it never had (its own
    ledger elsewhere, a fresh home): the published line at its index holds another result."""
    _, _, _, places, _, signer, _, _ = signed
    from runner.verify.ledger import read_published

    edit_result(copies[2], ledger={**places[2], "entry_runs": 2})
    make_bundle(copies[2], signer)  # the publisher re-signs what it edited
    key, lines = read_published(_ledger_file(signed, tmp_path))
    reports, _ = verify_bundles([copies[2]], Auditor(trusted_keys=[signer.public_key], ledgers={key: lines}))
    verdict = reports[0].get("ledger")
    assert not verdict.ok and "is not this result.json's" in verdict.detail and "counts 3 runs" in verdict.detail


def test_bundles_that_contradict_each_other_fail_across(signed, copies):
    """The best of three published as run 1 of 1: the count falls as the index grows, and
    the bundles given hold more runs than it says."""
    _, _, _, places, _, signer, _, _ = signed
    edit_result(copies[2], ledger={**places[2], "entry_runs": 1})
    make_bundle(copies[2], signer)
    reports, across = verify_bundles(copies, Auditor(trusted_keys=[signer.public_key]))
    assert all(r.get("ledger").ok for r in reports)  # each alone is well formed
    assert not across.ok and "says run 1 of mnist-cnn-cpu at index 2" in across.detail, across.detail
    assert "the bundles given hold 3" in across.detail


def test_two_results_at_one_index_fail_across():
    def claim(bundle, index, runs, run_id, digest):
        return LedgerClaim(bundle, KEY, index, "ef" * 32, runs, ENTRY, False, run_id, digest)

    same = across_problems([claim("a", 4, 2, "r1", "d1"), claim("b", 4, 2, "r2", "d2")])
    assert any("both stand at index 4" in p for p in same)
    assert across_problems([claim("a", 4, 2, "r1", "d1"), claim("a again", 4, 2, "r1", "d1")]) == []
    assert across_problems([claim("a", 1, 1, "r1", "d1"), claim("b", 6, 2, "r2", "d2")]) == []


def test_verify_takes_several_bundles_and_a_ledger_on_the_command_line(signed, tmp_path, capsys):
    _, _, folders, _, _, _, keys, staged = signed
    ledger = _ledger_file(signed, tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(signed[1]))
        code, out, err = run_cli(capsys, "verify", *map(str, folders), "--trusted-keys", str(keys),
                                 "--ledger", str(ledger), "--json")
    data = json.loads(out)
    assert data["across"]["ok"] and len(data["bundles"]) == 3
    assert all(next(c for c in b["checks"] if c["name"] == "ledger")["ok"] for b in data["bundles"])


def test_the_ledger_command_shows_and_exports_the_chain(signed, tmp_path, capsys, monkeypatch):
    root, home, _, _, lines, signer, _, _ = signed
    monkeypatch.setenv("RUNNER_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "80")
    key = signer.public_key.keyid
    code, out, err = run_cli(capsys, "ledger", "show", "--key", key[:8])
    assert code == 0, err
    assert "3 signing(s), chain intact" in out and "mnist-cnn-cpu: 3 runs with this key" in out
    code, out, err = run_cli(capsys, "ledger", "export", "--key", key, "-o", str(tmp_path / "pub"))
    assert code == 0, err
    text = (tmp_path / "pub" / f"{key}.jsonl").read_text()
    assert str(root) not in text and chain_problem([json.loads(x) for x in text.splitlines()]) is None
    code, out, err = run_cli(capsys, "ledger", "show", "--key", "ff")
    assert code == 2 and "no ledger(s) of a key 'ff'" in err


# -- runner ls and the leaderboard ----------------------------------------------------------------
@pytest.fixture
def kept(signed, tmp_path, monkeypatch) -> Path:
    """A results folder holding two of the key's three runs (the first kept back)."""
    results = tmp_path / "results"
    for folder in signed[2][1:]:
        shutil.copytree(folder, results / ENTRY / folder.name)
    monkeypatch.setenv("RUNNER_HOME", str(signed[1]))
    monkeypatch.setenv("COLUMNS", "80")
    return results


def test_ls_says_how_many_runs_of_the_entry_the_key_made(signed, kept, tmp_path, capsys):
    """Two of the key's three runs kept: "2 of 3 runs of this entry with key ..."."""
    results, signer, keys = kept, signed[5], signed[6]
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--trusted-keys", str(keys))
    assert code == 0, err
    assert f"2 of 3 runs of this entry with key {signer.public_key.keyid[:16]}" in out, out
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--trusted-keys", str(keys), "--json")
    assert [r["ledger"]["entry_runs"] for r in json.loads(out)["runs"]] == [2, 3]
    new_signer(tmp_path)  # by another key's lights the runs are not verified: no count
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--trusted-keys", str(tmp_path / "trusted.pub.json"))
    assert "of this entry with key" not in out


def test_the_leaderboard_reads_the_runs_against_the_keys_ledger(signed, kept, capsys):
    results, signer, keys = kept, signed[5], signed[6]
    code, out, err = run_cli(capsys, "leaderboard", "--results", str(results), "--trusted-keys", str(keys), "--json")
    assert code == 0, err
    board = json.loads(out)
    notes = {row["ledger"] for table in board["tables"] for row in table["rows"] if row["ledger"]}
    assert notes == {f"2 of 3 runs of this entry with key {signer.public_key.keyid[:8]}"}
    assert {r["ledger"]["entry_runs"] for r in board["reproductions"]} == {2, 3}


# -- the cross-seed checks against the key's earlier signed runs ------------------------------
def test_earlier_runs_are_the_newest_still_intact(signed, tmp_path, monkeypatch):
    root, home, folders, _, _, signer, _, _ = signed
    monkeypatch.setenv("RUNNER_HOME", str(home))
    key = signer.public_key.keyid
    found, skipped = earlier_runs(key, ENTRY, False, {folders[2].name})
    assert found == [folders[1].resolve(), folders[0].resolve()] and skipped == []
    assert earlier_runs(key, ENTRY, False, set(), limit=1)[0] == [folders[2].resolve()]
    assert earlier_runs(key, ENTRY, True, set()) == ([], [])  # smoke runs apart
    # a home whose ledger names a folder that is gone, or a result changed since it was signed
    ledger = read_ledger(key)
    moved = tmp_path / "home"
    (moved / "ledger").mkdir(parents=True)
    changed = tmp_path / folders[1].name
    shutil.copytree(folders[1], changed)
    edit_result(changed, seed=77)  # its result edited since it was signed
    # the folders are not hashed: a ledger that points elsewhere is still intact
    lines = [dict(ledger[0], folder=str(tmp_path / "gone")), dict(ledger[1], folder=str(changed)), ledger[2]]
    (moved / "ledger" / f"{key}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.setenv("RUNNER_HOME", str(moved))
    found, skipped = earlier_runs(key, ENTRY, False, {folders[2].name})
    assert found == [] and len(skipped) == 2
    assert "is not the one signed at ledger index 1" in skipped[0] and "is gone" in skipped[1]


def test_a_new_run_is_compared_with_the_keys_earlier_runs(signed, tmp_path):
    """The same crossing checkpoint signed again under another seed is named against the
    earlier run, which the new invocation alone would never see."""
    _, _, folders, _, _, _, _, staged = signed
    again = tmp_path / "20261125T010203Z-s11-dddddd"
    shutil.copytree(folders[0], again)
    edit_result(again, run_id=again.name, seed=11)
    task = get_task("mnist")
    labels = staged.load_eval_labels()
    alone = across_runs([again], labels, task, "pytorch", True)
    assert alone[again][1] == [] and "earlier" not in alone[again][0]
    independent = make_result_folder(tmp_path / "20261120T010203Z-s3-eeeeee", staged, capture_host(), seed=3)
    edit_result(independent, seed=3)
    found = across_runs([again], labels, task, "pytorch", True, Earlier((folders[0], independent), ("x: gone",)))
    record, reasons = found[again]
    assert [p["with"] for p in record["earlier"]["compared"]] == [folders[0].name, independent.name]
    assert record["earlier"]["skipped"] == ["x: gone"]
    assert any("identical across seeds" in r and folders[0].name in r for r in reasons), reasons
    assert not any(independent.name in r for r in reasons)  # an independent earlier run is no finding
