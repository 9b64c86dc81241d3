"""SQuAD end to end in the real engine: the squad-reader test entry's smoke run trains, the
runner's evaluator answers the dev questions, the host scores EM/F1, the torch backend
answers every question at batch 1, the bundle is signed, and ``runner verify`` passes it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from runner import keys
from runner.cli import main
from runner.results import RESULT_SCHEMA
from runner.results.layout import entry_runs

pytestmark = pytest.mark.docker
ENTRY = Path(__file__).parent / "entries" / "squad-reader"


def test_squad_entry_smoke_runs_scores_times_signs_and_verifies(docker_client, tmp_path, monkeypatch, capsys):
    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))

    assert main(["reproduce", str(ENTRY), "--smoke", "--seed", "11"]) == 0
    (folder,) = entry_runs(tmp_path / "results", "squad-reader")
    result = json.loads((folder / "result.json").read_text())
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
    assert result["status"] == "complete" and result["smoke"]
    # Non-conforming only because it is a smoke run (and, on a shared test host, for other
    # processes' CPU load, which is the host's doing, not the entry's).
    reasons = result["nonconforming_reasons"]
    assert reasons[0] == "smoke run: one short epoch on synthetic data"
    assert all(r.startswith("CPU contention") for r in reasons[1:]), reasons
    training = result["training"]
    assert training["reached"]
    first = training["evaluations"][0]
    assert first["count"] == 512 and set(first["scores"]) == {"f1", "exact_match"}
    assert first["predictions"].endswith(".json") and first["probe_predictions"].endswith(".json")
    assert result["probe"]["distractor_sentence"]
    origin = training["model_origin"]
    assert all(p["foreign_count"] == 0 for p in origin["provenance"].values())
    assert origin["sensitivity"] and all(s["problem"] is None and s["chance"] == 0.10 for s in origin["sensitivity"])
    curve = (folder / "curve.tsv").read_text().splitlines()
    assert curve[0] == "epoch\thours\tf1Score" and 0.75 <= float(curve[-1].split("\t")[2]) <= 1.0  # a fraction
    torch = result["inference"]["torch"]
    assert torch["passed_gate"], torch["gate_reason"]
    assert torch["count"] == 512 and torch["latency_ms"]["p50"] > 0
    assert torch["final_model_disagreement"] == 0.0
    assert (folder / "inference" / "torch" / "predictions.json").is_file()
    capsys.readouterr()

    assert main(["verify", str(folder), "--trusted-keys", str(pair.public), "--json"]) == 3  # verified; a smoke run never counts
    report = json.loads(capsys.readouterr().out)
    assert all(c["ok"] for c in report["checks"]), [c for c in report["checks"] if not c["ok"]]


def test_the_drqa_reference_entry_smoke_gets_its_declared_glove_and_verifies(docker_client, tmp_path, monkeypatch,
                                                                             capsys):
    """entries/drqa-squad --smoke: the GloVe it declares (synthetic in a smoke run) is mounted
    read-only at /data/public/glove.840B.300d and recorded; the run completes, signed,
    non-conforming only because it is a smoke run, and verifies."""
    from runner import paths

    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("RUNNER_HOME", raising=False)  # the shared wheelhouse and base image
    assert main(["reproduce", str(paths.repo_root() / "entries" / "drqa-squad"), "--smoke", "--seed", "3"]) == 0
    (folder,) = entry_runs(tmp_path / "results", "drqa-squad")
    result = json.loads((folder / "result.json").read_text())
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
    assert result["status"] == "complete" and result["training"]["reached"]
    assert [r for r in result["nonconforming_reasons"] if not r.startswith("CPU contention")] == [
        "smoke run: one short epoch on synthetic data"]
    (glove,) = result["public_inputs"]
    assert glove["name"] == "glove.840B.300d" and glove["synthetic"] is True
    assert set(glove["files"]) == {"glove.840B.300d.txt"} and glove["files"]["glove.840B.300d.txt"]["bytes"] > 0
    origin = result["training"]["model_origin"]
    assert all(p["foreign_count"] == 0 for p in origin["provenance"].values())
    assert all(s["score"] < s["limit"] for s in origin["sensitivity"])
    assert result["inference"]["torch"]["passed_gate"]
    capsys.readouterr()
    assert main(["verify", str(folder), "--trusted-keys", str(pair.public)]) == 3  # verified; a smoke run never counts
