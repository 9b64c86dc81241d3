"""``runner compare`` on signed result folders (built by the project's own scoring code)."""

from __future__ import annotations

import json
import shutil

import pytest
from securesystemslib.signer import CryptoSigner
from synthetic_result import make_result_folder, stage_mnist_stand_in

from runner.bundle import make_bundle
from runner.cli import main
from runner.compare import figures, summarise
from runner.fingerprint import capture_host
from runner.keys import public_key_dict

KEYS: list = []  # the signer's public key file, trusted with --trusted-keys
SIGNER: list = []


@pytest.fixture(scope="module")
def signed_runs(tmp_path_factory):
    """Three signed runs of one entry (seeds 0-2)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        signer = CryptoSigner.generate_ed25519()
        root = tmp_path_factory.mktemp("results")
        KEYS.append(root / "trusted.pub.json")
        SIGNER.append(signer)
        KEYS[0].write_text(json.dumps(public_key_dict(signer.public_key)))
        host = capture_host()
        folders = []
        for seed in range(3):
            folder = make_result_folder(root / f"20261122T01020{seed}Z-s{seed}-abc12{seed}", staged, host, seed=seed)
            make_bundle(folder, signer)
            folders.append(folder)
        yield folders


def _compare(*argv: str) -> int:
    """``runner compare`` trusting the runs' signer; RUNNER_HOME is the runs' (their data)."""
    return main(["compare", *argv, "--trusted-keys", str(KEYS[0])])


def test_figures_come_from_the_typed_result_and_the_runners_events(signed_runs):
    run = figures(signed_runs[0])
    result = json.loads((signed_runs[0] / "result.json").read_text())
    assert run.entry == result["entry"]["name"] and run.framework.startswith("pytorch")
    assert run.tta_seconds == result["training"]["tta_seconds"]
    assert run.epochs_to_threshold == 2  # the second evaluation is the first crossing
    # No epoch_stop markers in this run: time per epoch is the wall between evaluations.
    assert run.epoch_source == "between evaluations" and 4.0 < run.seconds_per_epoch < 5.0
    assert run.latency_p50_ms["torch"] == result["inference"]["torch"]["latency_ms"]["p50"]


def test_runs_of_one_entry_are_summarised_by_median_and_cv(signed_runs):
    (summary,) = summarise([figures(f) for f in signed_runs])
    assert summary.runs == 3 and summary.tta_seconds.n == 3
    ttas = sorted(figures(f).tta_seconds for f in signed_runs)
    assert summary.tta_seconds.median == ttas[1]
    assert summary.tta_seconds.cv is not None and summary.tta_seconds.cv >= 0


def test_compare_prints_the_table_and_writes_the_plot(signed_runs, tmp_path, capsys):
    plot = tmp_path / "cmp.png"
    assert _compare(*map(str, signed_runs), "--plot", str(plot)) == 0
    out = capsys.readouterr().out
    assert "TTA s" in out and "Batch-1 p50 ms" in out and "native" in out and "3 (3)" in out and "(torch)" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_json_has_every_entrys_figures(signed_runs, capsys):
    assert _compare(*map(str, signed_runs), "--no-plot", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["entries"]
    assert data["runs"] == [str(f) for f in signed_runs] and data["plot"] is None
    assert entry["runs"] == 3 and entry["tta_seconds"]["n"] == 3
    assert entry["latency_p50_ms"]["torch"]["median"] is not None


def test_an_altered_result_is_refused(signed_runs, tmp_path, capsys):
    copy = tmp_path / signed_runs[0].name
    shutil.copytree(signed_runs[0], copy)
    result = json.loads((copy / "result.json").read_text())
    result["training"]["tta_seconds"] = 0.5
    (copy / "result.json").write_text(json.dumps(result))
    assert _compare(str(copy), "--no-plot") == 2
    err = capsys.readouterr().err
    assert "is not verified" in err and "Fix:" in err


def test_compare_takes_bundles_and_writes_its_plot_into_the_out_folder(signed_runs, tmp_path, capsys):
    """Like verify, audit, the leaderboard and the exports: a bundle's .tar.gz is a result."""
    from runner.bundle import pack

    bundle = pack(signed_runs[0], tmp_path / "bundles" / "first.tar.gz")
    assert _compare(str(bundle), *map(str, signed_runs[1:]), "-o", str(tmp_path / "plots")) == 0
    assert "3 (3)" in capsys.readouterr().out
    assert (tmp_path / "plots" / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_that_does_not_count_is_left_out_and_named(signed_runs, tmp_path, capsys):
    """A non-conforming run verifies but does not count: left out of the figures and named,
    unless --all-runs."""
    from synthetic_result import edit_result

    smoke = tmp_path / signed_runs[0].name
    shutil.copytree(signed_runs[0], smoke)
    shutil.rmtree(smoke / "bundle")
    edit_result(smoke, conforming=False, nonconforming_reasons=["CPU contention: 0.4 other runnable tasks per CPU"])
    make_bundle(smoke, SIGNER[0])
    assert _compare(str(smoke), *map(str, signed_runs[1:]), "--no-plot", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["entries"][0]["runs"] == 2 and [r["run"] for r in data["left_out"]] == [str(smoke)]
    assert data["left_out"][0]["verified"] and "CPU contention" in data["left_out"][0]["reasons"][0]
    assert _compare(str(smoke), *map(str, signed_runs[1:]), "--no-plot", "--json", "--all-runs") == 0
    assert json.loads(capsys.readouterr().out)["entries"][0]["runs"] == 3
    assert _compare(str(smoke), "--no-plot") == 2
    assert "none of the 1 runs counts" in capsys.readouterr().err
