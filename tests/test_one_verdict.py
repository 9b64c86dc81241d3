"""One verdict everywhere (issue 45, items 1, 3 and 5): what ``runner ls``, ``runner show``,
``runner leaderboard``, ``runner compare``, the exports and ``runner verify`` say about a run
is ``runner.verify.verdict``'s, computed once (cached by the signed statement's digest), and
``runner verify``'s exit code is that verdict.

The runs are synthetic but real (``tests/synthetic_result.py``: every figure computed by the
project's own functions), signed by a key the tests trust with ``--trusted-keys``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from synthetic_result import add_plan, edit_result, honest_plan, make_result_folder, new_signer, stage_mnist_stand_in
from tests.hostile.hostile_helpers import run_cli

from runner.bundle import make_bundle
from runner.fingerprint import capture_host
from runner.keys.trust import trusted_keys
from runner.verify import checks as checks_module
from runner.verify import verdict as verdict_module
from runner.verify.verdict import EXIT_COUNTS, EXIT_DOES_NOT_COUNT, EXIT_NOT_VERIFIED, judge

ENTRY = "mnist-cnn-cpu"
HONEST = ("20261122T010203Z-s0-aaaaaa", "20261122T020203Z-s1-bbbbbb")
FORGED = "20261122T030203Z-s2-cccccc"
SMOKE = "20261122T040203Z-s3-dddddd"


def _run(results: Path, run_id: str, staged, host, seed: int, **changes) -> Path:
    folder = make_result_folder(results / ENTRY / run_id, staged, host, seed=seed)
    add_plan(folder, honest_plan(folder))
    edit_result(folder, **{"conforming": True, "nonconforming_reasons": [], **changes})
    return folder


def _forge(folder: Path, signer) -> None:
    """The auditor's forgery: bundle/ deleted, a checkpoint's bytes flipped, plan.json edited,
    the TTA and the cross-seed record rewritten, then signed with a trusted key (as a runner
    that signs whatever it finds would)."""
    shutil.rmtree(folder / "bundle")
    checkpoint = sorted((folder / "checkpoints").rglob("*.*"))[0]
    data = bytearray(checkpoint.read_bytes())
    data[-8:] = bytes(b ^ 0xFF for b in data[-8:])
    checkpoint.write_bytes(bytes(data))
    plan = json.loads((folder / "plan.json").read_text())
    plan["limits"]["timeout_s"] = 99999
    (folder / "plan.json").write_text(json.dumps(plan))
    edit_result(folder, training__tta_seconds=0.5,
                training__cross_seed={"checked": True, "runs": [FORGED], "note": "rewritten"})
    make_bundle(folder, signer)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Two honest counting runs, a forged one signed by the trusted key, a smoke-marked run and
    a non-conforming one; RUNNER_HOME (the data verify recomputes with) stays the board's."""
    root = tmp_path_factory.mktemp("verdict")
    results, home = root / "results", root / "home"
    signer, keys = new_signer(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        host = capture_host()
        honest = [_run(results, run_id, staged, host, seed, entry__claimed={"tta_seconds": 12.0})
                  for seed, run_id in enumerate(HONEST)]
        forged = _run(results, FORGED, staged, host, 2)
        make_bundle(forged, signer)
        _forge(forged, signer)
        smoke = _run(results, SMOKE, staged, host, 3, smoke=True, training__tta_seconds=0.25)
        other = _run(results / "other", "20261122T050203Z-s4-eeeeee", staged, host, 4, conforming=False,
                     nonconforming_reasons=["CPU contention: 0.40 other runnable tasks per CPU"])
        for folder in (*honest, smoke, other):
            make_bundle(folder, signer)
        yield {"results": results, "keys": keys, "honest": honest, "forged": forged, "smoke": smoke,
               "other": other, "signer": signer, "home": home}


def _cli(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "120")
    return run_cli(capsys, *argv)


# -- runner verify: the exit code is the verdict ----------------------------------------------------
def test_verify_exits_0_for_a_run_that_counts_1_for_a_failed_check_3_for_one_that_does_not_count(
        board, capsys, monkeypatch):
    keys = str(board["keys"])
    code, out, _ = _cli(capsys, monkeypatch, "verify", str(board["honest"][0]), "--trusted-keys", keys)
    assert code == EXIT_COUNTS == 0 and "the run counts" in out
    code, out, _ = _cli(capsys, monkeypatch, "verify", str(board["forged"]), "--trusted-keys", keys)
    assert code == EXIT_NOT_VERIFIED == 1 and "NOT verified" in out
    code, out, _ = _cli(capsys, monkeypatch, "verify", str(board["other"]), "--trusted-keys", keys)
    assert code == EXIT_DOES_NOT_COUNT == 3
    assert "the run does not count" in out and "  - non-conforming: CPU contention" in out
    code, out, _ = _cli(capsys, monkeypatch, "verify", str(board["other"]), "--trusted-keys", keys, "--json")
    data = json.loads(out)
    assert code == 3 and data["ok"] is True and data["verified"] is True and data["counts"] is False
    assert data["reasons"] == ["non-conforming: CPU contention: 0.40 other runnable tasks per CPU"]


def test_verify_of_an_incomplete_run_says_it_does_not_count(board, capsys, monkeypatch, tmp_path):
    """A run that timed out verifies (its bundle is what the runner measured) and never counts."""
    folder = tmp_path / "results" / ENTRY / "20261122T060203Z-s5-ffffff"
    shutil.copytree(board["honest"][1], folder)
    shutil.rmtree(folder / "bundle")
    edit_result(folder, status="timed_out", incomplete_reason="the entry ran past its 1200 s limit")
    make_bundle(folder, board["signer"])
    code, out, _ = _cli(capsys, monkeypatch, "verify", str(folder), "--trusted-keys", str(board["keys"]), "--json")
    data = json.loads(out)
    if data["verified"]:
        assert code == 3 and data["counts"] is False
        assert any(r.startswith("the run is timed_out") for r in data["reasons"]), data["reasons"]
    else:  # a check recomputing the status from the events may refuse it outright: never a count
        assert code == 1
    assert "the run counts" not in out


def test_several_bundles_exit_with_the_worst_verdict(board, capsys, monkeypatch):
    keys = str(board["keys"])
    honest = [str(f) for f in board["honest"]]
    assert _cli(capsys, monkeypatch, "verify", *honest, "--trusted-keys", keys)[0] == 0
    assert _cli(capsys, monkeypatch, "verify", *honest, str(board["other"]), "--trusted-keys", keys)[0] == 3
    assert _cli(capsys, monkeypatch, "verify", *honest, str(board["forged"]), "--trusted-keys", keys)[0] == 1


# -- the readers: one verdict, never their own ------------------------------------------------------
def test_the_forged_run_is_not_verified_by_ls_show_or_the_leaderboard(board, capsys, monkeypatch):
    results, keys = str(board["results"]), str(board["keys"])
    code, out, _ = _cli(capsys, monkeypatch, "ls", "--results", results, "--trusted-keys", keys, "--json")
    runs = {r["run_id"]: r for r in json.loads(out)["runs"]}
    assert code == 0 and runs[FORGED]["verified"] is False and runs[FORGED]["counts"] is False
    assert any("tta" in r or "checkpoints" in r or "plan" in r for r in runs[FORGED]["reasons"]), runs[FORGED]
    assert all(runs[r]["counts"] for r in HONEST)
    code, out, _ = _cli(capsys, monkeypatch, "ls", "--results", results, "--trusted-keys", keys)
    assert "s2-cccccc: not verified:" in out
    code, out, _ = _cli(capsys, monkeypatch, "show", "s2-cccccc", "--results", results, "--trusted-keys", keys)
    assert code == 0 and "not verified:" in " ".join(out.split())
    code, out, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", results, "--trusted-keys", keys,
                        "--task", "mnist", "--json")
    board_json = json.loads(out)
    (row,) = [r for t in board_json["tables"] if t["id"] == "mnist-train-time" for r in t["rows"]
              if r["team"] == ENTRY]
    honest_tta = sorted(json.loads((f / "result.json").read_text())["training"]["tta_seconds"]
                        for f in board["honest"])
    assert row["reproduced"] == pytest.approx(float(np.median(honest_tta)))  # not 0.50
    assert row["spread"]["runs"] == 2
    assert row["rules"] == "mnist rules v1"  # the rules its runs were made under and judged by
    forged = next(r for r in board_json["reproductions"] if r["run_id"] == FORGED)
    assert forged["verified"] is False and forged["counts"] is False


def test_a_smoke_run_is_never_the_headline(board, capsys, monkeypatch, tmp_path):
    """Beside runs that count, a (faster) smoke run is no part of the figure; alone, there is no
    figure, only why it does not count."""
    results, keys = str(board["results"]), str(board["keys"])
    code, out, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", results, "--trusted-keys", keys,
                        "--task", "mnist")
    assert code == 0 and "0.25" not in out and "0.50" not in out
    alone = tmp_path / "results"
    shutil.copytree(board["smoke"], alone / ENTRY / SMOKE)
    code, out, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", str(alone), "--trusted-keys", keys,
                        "--task", "mnist", "--json")
    rows = [r for t in json.loads(out)["tables"] for r in t["rows"]]
    assert all(r["reproduced"] is None for r in rows)
    code, out, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", str(alone), "--trusted-keys", keys,
                        "--task", "mnist", "--html", str(tmp_path / "site"))
    page = (tmp_path / "site" / "tasks" / "mnist.html").read_text()
    assert "0.25" not in page.split('data-table="mnist-train-time"')[1].split("</table>")[0]


def test_a_key_not_trusted_makes_no_run_count(board, capsys, monkeypatch, tmp_path):
    """The readers trust the keys they are given, never the key a bundle carries."""
    from runner.keys import generate

    other = generate(tmp_path / "keys")
    code, out, _ = _cli(capsys, monkeypatch, "ls", "--results", str(board["results"]),
                        "--trusted-keys", str(other.public), "--json")
    assert code == 0 and not any(r["verified"] for r in json.loads(out)["runs"])


# -- computed once: the cache ------------------------------------------------------------------------
def test_the_verdict_is_cached_by_digest_and_an_edit_is_judged_afresh(board, monkeypatch, tmp_path):
    keys = trusted_keys(board["keys"])
    folder = tmp_path / HONEST[0]
    shutil.copytree(board["honest"][0], folder)  # another name, the same signed statement
    first = judge(board["honest"][0], keys)
    assert first.counts

    def no_verify(*args, **kwargs):
        raise AssertionError("verify ran again for a cached verdict")

    monkeypatch.setattr(checks_module, "verify_bundle", no_verify)
    assert judge(folder, keys) == first  # by the statement's digest, not the folder's name
    edit_result(folder, training__tta_seconds=0.5)  # after the verdict was cached
    monkeypatch.undo()
    monkeypatch.setenv("RUNNER_HOME", str(board["home"]))
    again = judge(folder, keys)
    assert not again.verified and any("file-digests" in r or "statement" in r for r in again.reasons)
    cached = list((board["home"] / verdict_module.CACHE_DIR).glob("*.json"))
    assert cached and all(json.loads(p.read_text())["verified"] for p in cached)  # only verified verdicts kept


def test_a_tampered_cache_entry_is_not_believed(board, monkeypatch, tmp_path):
    """A cache file is the runner's own, but its home is only a folder: an entry for another
    statement, or one that does not parse, is ignored and the run judged again."""
    keys = trusted_keys(board["keys"])
    forged_verdict = judge(board["forged"], keys)
    assert not forged_verdict.verified
    honest = judge(board["honest"][1], keys)
    forged_name, _ = verdict_module._cache_key(board["forged"], keys)  # signed as it is, by a trusted key
    assert not (board["home"] / verdict_module.CACHE_DIR / f"{forged_name}.json").exists()  # a failure: not kept
    name, _ = verdict_module._cache_key(board["honest"][1], keys)
    path = board["home"] / verdict_module.CACHE_DIR / f"{name}.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "statement_digest": "0" * 64}))
    assert judge(board["honest"][1], keys) == honest  # recomputed: the stored digest did not match
    path.write_text("{not json")
    assert judge(board["honest"][1], keys) == honest


def test_the_index_counts_what_the_task_page_ranks(board, capsys, monkeypatch, tmp_path):
    """One vocabulary: the index's "Claims" for MNIST are the claims its tables rank (here the
    entry's own claimed TTA), and its entries are those with a figure from runs that count."""
    import re

    code, _, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", str(board["results"]), "--trusted-keys",
                      str(board["keys"]), "--html", str(tmp_path / "site"))
    assert code == 0
    index = (tmp_path / "site" / "index.html").read_text()
    row = re.search(r'<tr><td><a href="tasks/mnist.html">MNIST</a>.*?</tr>', index, re.S).group(0)
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["1", "1"]
    assert "2 of 4 count" in index  # the entry's runs: two honest, the forgery, the smoke run
    assert "<dt>Counts</dt>" in index and "<dt>Verified</dt>" in index and "<dt>Claims</dt>" in index
