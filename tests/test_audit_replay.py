"""``runner audit --replay`` with the real engine: the bundle's predictions are what its
kept crossing checkpoint and its final model give; an edited prediction is caught."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from runner.cli import main
from runner.results.layout import entry_runs

pytestmark = pytest.mark.docker
PROBE = Path(__file__).parent / "entries" / "cheat-clock"


@pytest.fixture(scope="module")
def bundle(docker_client, cpu_base_image, tmp_path_factory):
    import os

    from runner import keys

    results = tmp_path_factory.mktemp("results")
    pair = keys.generate(tmp_path_factory.mktemp("keys"))  # audit verifies first: the bundle is signed
    os.environ["RUNNER_RESULTS"], os.environ[keys.ENV_VAR] = str(results), str(pair.private)
    try:
        # With inference: a run without it does not evaluate its final model (`runner reinfer` does).
        assert main(["reproduce", str(PROBE), "--smoke", "--no-loadgen"]) == 0
    finally:
        del os.environ["RUNNER_RESULTS"], os.environ[keys.ENV_VAR]
    (folder,) = entry_runs(results, "cheat-clock")
    return folder, pair.public


def test_replay_reproduces_the_predictions(bundle, capsys):
    bundle, public = bundle
    assert main(["audit", str(bundle), "--replay", "--trusted-keys", str(public)]) == 0
    out = capsys.readouterr().out
    for name in ("crossing", "crossing-probe", "final-model", "final-model-probe"):
        assert f"✓ {name} " in out, out


def test_replay_catches_predictions_the_models_do_not_give(bundle, tmp_path, capsys):
    """The replay itself (``runner audit`` would refuse the edited bundle before it: verify)."""
    from runner.verify.replay import replay

    bundle, _ = bundle
    edited = tmp_path / bundle.name
    shutil.copytree(bundle, edited)
    result = json.loads((edited / "result.json").read_text())
    path = edited / result["training"]["evaluations"][result["training"]["crossing"]]["predictions"]
    preds = np.load(path)
    preds[:3] = (preds[:3] + 1) % 10
    np.save(path, preds)
    checks = {c.name: c for c in replay(edited)}
    assert not checks["crossing"].ok and "3 of 512 predictions differ" in checks["crossing"].detail


def test_replay_refuses_a_plan_that_does_not_describe_its_result(bundle, tmp_path, capsys):
    """The replay reads plan.json; a plan edited to another kind of run (here: not a smoke
    run, so the auditor's real data) is refused in one line, not followed: by verify's checks
    before any replay, and by the replay itself."""
    from runner.errors import UserError
    from runner.verify.replay import replay

    bundle, public = bundle
    edited = tmp_path / bundle.name
    shutil.copytree(bundle, edited)
    plan = json.loads((edited / "plan.json").read_text())
    plan["options"]["smoke"] = False
    (edited / "plan.json").write_text(json.dumps(plan))
    assert main(["audit", str(edited), "--replay", "--trusted-keys", str(public)]) == 2
    assert "fails runner verify (file-digests, plan" in capsys.readouterr().err
    with pytest.raises(UserError, match="plan.json does not describe its result"):
        replay(edited)


def test_audit_without_replay_says_what_to_do(capsys):
    assert main(["audit", "nowhere"]) == 2
    assert "--replay" in capsys.readouterr().err
