"""``runner audit --replay`` with the real engine: the bundle's predictions are what its
kept crossing checkpoint and its final model give; an edited prediction is caught."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from runner.cli import main

pytestmark = pytest.mark.docker
PROBE = Path(__file__).parent / "entries" / "cheat-clock"


@pytest.fixture(scope="module")
def bundle(docker_client, cpu_base_image, tmp_path_factory):
    import os

    results = tmp_path_factory.mktemp("results")
    os.environ["RUNNER_RESULTS"] = str(results)
    try:
        # With inference: a run without it does not evaluate its final model (`runner reinfer` does).
        assert main(["reproduce", str(PROBE), "--smoke", "--no-loadgen"]) == 0
    finally:
        del os.environ["RUNNER_RESULTS"]
    (folder,) = (results / "cheat-clock").iterdir()
    return folder


def test_replay_reproduces_the_predictions(bundle, capsys):
    assert main(["audit", str(bundle), "--replay"]) == 0
    out = capsys.readouterr().out
    for name in ("crossing", "crossing-probe", "final-model", "final-model-probe"):
        assert f"✓ {name} " in out, out


def test_replay_catches_predictions_the_models_do_not_give(bundle, tmp_path, capsys):
    edited = tmp_path / bundle.name
    shutil.copytree(bundle, edited)
    result = json.loads((edited / "result.json").read_text())
    path = edited / result["training"]["evaluations"][result["training"]["crossing"]]["predictions"]
    preds = np.load(path)
    preds[:3] = (preds[:3] + 1) % 10
    np.save(path, preds)
    assert main(["audit", str(edited), "--replay"]) == 1
    out = capsys.readouterr().out
    assert "✗ crossing " in out and "3 of 512 predictions differ" in out


def test_replay_refuses_a_plan_that_does_not_describe_its_result(bundle, tmp_path, capsys):
    """The replay reads plan.json; a plan edited to another kind of run (here: not a smoke
    run, so the auditor's real data) is refused in one line, not followed."""
    edited = tmp_path / bundle.name
    shutil.copytree(bundle, edited)
    plan = json.loads((edited / "plan.json").read_text())
    plan["options"]["smoke"] = False
    (edited / "plan.json").write_text(json.dumps(plan))
    assert main(["audit", str(edited), "--replay"]) == 2
    assert "plan.json does not describe its result" in capsys.readouterr().err


def test_audit_without_replay_says_what_to_do(capsys):
    assert main(["audit", "nowhere"]) == 2
    assert "--replay" in capsys.readouterr().err
