"""The acceptance test: a fresh bundle from the default entry verifies.

A real ``runner reproduce entries/mnist-cnn-cpu`` (Docker, real MNIST, training to the
threshold), signed with a fresh key, then ``runner verify`` on the folder and on its
``.tar.gz`` with that key as the only trusted one.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from runner import keys, paths
from runner.bundle import pack
from runner.cli import main
from runner.results import RESULT_SCHEMA
from runner.verify import CHECK_NAMES


@pytest.mark.docker
@pytest.mark.slow
def test_fresh_bundle_from_the_default_entry_verifies(
    docker_client, tmp_path, monkeypatch, capsys, host_load_is_not_the_subject
):
    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))

    assert main(["reproduce", str(paths.repo_root() / "entries" / "mnist-cnn-cpu")]) == 0
    (folder,) = (tmp_path / "results" / "mnist-cnn-cpu").iterdir()
    result = json.loads((folder / "result.json").read_text())
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
    assert result["training"]["reached"] and result["conforming"]
    # Issue 4's acceptance: both CPU backends timed on every item and through the gate.
    assert set(result["inference"]) == {"torch", "onnxruntime"}
    for name, backend in result["inference"].items():
        assert backend["passed_gate"], (name, backend["gate_reason"])
        assert backend["count"] == 10_000 and backend["latency_ms"]["p50"] > 0
    capsys.readouterr()

    # Verified (exit 3, not 0: a lone run's cross-seed checks were not possible, so it does not count).
    assert main(["verify", str(folder), "--trusted-keys", str(pair.public), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] and report["reasons"] == [r for r in report["reasons"] if "cross-seed" in r]
    assert [c["name"] for c in report["checks"]] == CHECK_NAMES
    assert all(c["ok"] for c in report["checks"]), [c for c in report["checks"] if not c["ok"]]

    archive = pack(folder, tmp_path / f"{folder.name}.tar.gz")
    assert main(["verify", str(archive), "--trusted-keys", str(pair.public)]) == 3

    # Re-running only the inference phase re-signs the bundle, which still verifies; the
    # backends not timed again keep their figures (a per-backend merge).
    before = json.loads((folder / "result.json").read_text())["inference"]
    capsys.readouterr()
    assert main(["reinfer", str(paths.repo_root() / "entries" / "mnist-cnn-cpu"),
                 "--backend", "onnxruntime", "--result", str(folder)]) == 0
    assert "replaced the earlier figures of onnxruntime; kept torch as they were" in capsys.readouterr().out
    result = json.loads((folder / "result.json").read_text())
    assert sorted(result["inference"]) == ["onnxruntime", "torch"]
    assert result["inference"]["torch"]["latency_ms"] == before["torch"]["latency_ms"]
    assert main(["verify", str(folder), "--trusted-keys", str(pair.public)]) == 3  # verified; a lone run


@pytest.mark.docker
@pytest.mark.slow
def test_a_run_without_inference_leaves_its_final_model_to_reinfer(
    docker_client, tmp_path, monkeypatch, capsys, host_load_is_not_the_subject
):
    """``--no-infer`` copies and hashes the final model but does not evaluate it (nothing is
    timed); ``runner reinfer`` evaluates that very model first, and refuses other bytes."""
    import shutil

    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    entry = str(paths.repo_root() / "entries" / "mnist-cnn-cpu")
    assert main(["reproduce", entry, "--no-infer"]) == 0
    (folder,) = (tmp_path / "results" / "mnist-cnn-cpu").iterdir()
    training = json.loads((folder / "result.json").read_text())["training"]
    final = training["final_model"]
    assert final["deferred"] and len(final["sha256"]) == 64 and "predictions" not in final
    assert [s["of"] for s in training["model_origin"]["sensitivity"]] == ["crossing"]
    assert main(["verify", str(folder), "--trusted-keys", str(pair.public)]) == 3  # verified; a lone run
    capsys.readouterr()

    # Other bytes than the run's final model: refused in one line, the result untouched.
    other = tmp_path / "other" / folder.name
    shutil.copytree(folder, other)
    weights = other / "output" / "model" / "weights.pt"
    weights.write_bytes(weights.read_bytes() + b"\0")
    before = (other / "result.json").read_bytes(), sorted(p.name for p in (other / "evaluations").iterdir())
    assert main(["reinfer", entry, "--backend", "torch", "--result", str(other)]) == 2
    err = capsys.readouterr().err  # refused by custody before anything runs: the folder is not as signed
    assert "changed: output/model/weights.pt" in err and "Traceback" not in err, err
    assert ((other / "result.json").read_bytes(), sorted(p.name for p in (other / "evaluations").iterdir())) == before

    assert main(["reinfer", entry, "--backend", "torch", "--result", str(folder)]) == 0
    result = json.loads((folder / "result.json").read_text())
    final = result["training"]["final_model"]
    assert "deferred" not in final and final["index"] == training["final_model"]["index"]
    assert final["sha256"] == training["final_model"]["sha256"] and final["scores"]["top1"] >= 0.993
    assert {s["of"] for s in result["training"]["model_origin"]["sensitivity"]} == {"crossing", "final"}
    assert result["inference"]["torch"]["passed_gate"] and result["inference"]["torch"]["final_model_disagreement"] == 0.0
    assert result["conforming"], result["nonconforming_reasons"]
    assert (folder / "logs" / "evaluator-final-model.log").is_file()
    assert main(["verify", str(folder), "--trusted-keys", str(pair.public)]) == 3  # verified; a lone run
