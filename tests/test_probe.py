"""The generalization probe on a seeded subset, the evaluator's requests for it, and the
one-time cost of the provenance ledger paid before the first request (no entry code runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from runner.harness.evaluate import _wanted, probe_items, sensitivity_items
from runner.score.evaluations import ScoredEvaluation, probe_scores
from runner.score.probe import PROBE_ITEMS, probe_subset
from runner.tasks import get_task
from runner.verify.timing import _probe_too_small

N = 10_000


def _save(folder: Path, name: str, preds: np.ndarray) -> str:
    (folder / "evaluations").mkdir(exist_ok=True)
    np.save(folder / "evaluations" / name, preds.astype(np.int64))
    return f"evaluations/{name}"


def test_probe_items_are_drawn_by_the_seed_apart_from_the_sensitivity_items():
    a, b = probe_items(N, 7, PROBE_ITEMS), probe_items(N, 8, PROBE_ITEMS)
    assert a == probe_items(N, 7, PROBE_ITEMS) and a != b
    assert len(a) == len(set(a)) == PROBE_ITEMS and a == sorted(a) and 0 <= a[0] and a[-1] < N
    assert a != sensitivity_items(N, 7, PROBE_ITEMS)  # another draw for another check
    assert probe_items(500, 7, PROBE_ITEMS) == list(range(500))  # a smaller set: every item
    assert probe_subset(N, PROBE_ITEMS, 7) == a
    assert probe_subset(N, None, 7) is None and probe_subset(N, True, 7) is None  # no subset recorded


def test_the_gap_is_taken_on_the_probes_own_items(tmp_path):
    """The clean side of the gap is scored on the items the probe predicted: on a model whose
    mistakes all fall outside them, the whole set's score would show a gap that is not there."""
    task = get_task("mnist")
    labels = np.arange(N) % 10
    rows = probe_subset(N, PROBE_ITEMS, 7)
    outside = np.setdiff1d(np.arange(N), rows)
    clean = labels.copy()
    clean[outside[:800]] = (clean[outside[:800]] + 1) % 10  # 8 % wrong, none on the probe's items
    probe = labels[rows].copy()
    probe[:20] = (probe[:20] + 1) % 10  # 1 % of the probe's items wrong
    scores, gap = probe_scores(task, tmp_path, _save(tmp_path, "clean.npy", clean),
                               _save(tmp_path, "probe.npy", probe), labels, PROBE_ITEMS, 7)
    assert scores == {"top1": pytest.approx(0.99)}
    assert gap == pytest.approx(0.01)  # 1.00 on those items, 0.99 shifted; the whole set says -0.07
    # A probe of every item (no subset recorded: questions, older results) against the whole set.
    whole = labels.copy()
    whole[:300] = (whole[:300] + 1) % 10
    scores, gap = probe_scores(task, tmp_path, "evaluations/clean.npy", _save(tmp_path, "whole.npy", whole), labels)
    assert gap == pytest.approx(0.92 - 0.97)
    # Predictions of the wrong length score nothing: no gap.
    assert probe_scores(task, tmp_path, "evaluations/clean.npy", "evaluations/whole.npy", labels, PROBE_ITEMS, 7)[1] is None


def test_a_request_predicts_the_probe_for_its_items():
    sets = {"clean": np.arange(N), "probe": np.arange(N) + N}
    assert {k: len(v) for k, v in _wanted(sets, {}, "images").items()} == {"clean": N, "probe": N}
    cut = _wanted(sets, {"probe_items": 100, "probe_seed": 3}, "images")
    assert list(cut["clean"]) == list(range(N))
    assert list(cut["probe"]) == [N + i for i in probe_items(N, 3, 100)]
    questions = {"probe": [{"id": str(i)} for i in range(10)]}  # questions are probed whole
    assert len(_wanted(questions, {"probe_items": 3, "probe_seed": 1}, "questions")["probe"]) == 10


def _crossing(**fields) -> ScoredEvaluation:
    base = dict(index=1, epoch=2, start=1.0, stop=1.1, predictions="evaluations/1/clean.npy", count=N,
                scores={"top1": 0.994}, meets=True, probe_predictions="evaluations/1001/probe.npy",
                probe_gap=0.003, probe_items=PROBE_ITEMS, probe_seed=7)
    return ScoredEvaluation(**{**base, **fields})


def test_verify_holds_the_crossings_probe_to_the_runners_size_and_the_runs_seed():
    assert _probe_too_small(_crossing(), 7, PROBE_ITEMS) is None
    assert _probe_too_small(_crossing(probe_items=None, probe_seed=None), 7, PROBE_ITEMS) is None  # every item
    assert "no score" in _probe_too_small(_crossing(probe_predictions=None, probe_gap=None), 7, PROBE_ITEMS)
    assert "fewer than the runner's" in _probe_too_small(_crossing(probe_items=50), 7, PROBE_ITEMS)
    assert "seed 8" in _probe_too_small(_crossing(probe_seed=8), 7, PROBE_ITEMS)
    assert _probe_too_small(_crossing(count=512, probe_items=512), 7, PROBE_ITEMS) is None  # a smoke set, probed whole


def test_the_ledger_pays_no_dynamo_import_and_the_warm_up_runs_no_entry_code(tmp_path):
    """torch wraps a dispatch mode's handler to skip dynamo, importing ``torch._dynamo`` (about
    a second on two cores) at the first recorded pass; the evaluator's modes say there is
    nothing compiled. Measured in a fresh interpreter, as the evaluator starts."""
    script = tmp_path / "ledger.py"
    script.write_text(
        "import sys\n"
        "import numpy as np, torch\n"
        "from torch import nn\n"
        "from runner.harness.frameworks import pytorch as loader\n"
        "from runner.harness.provenance import Ledger\n"
        "loader.warm_up()\n"
        "assert 'torch._dynamo' not in sys.modules, 'warm-up imported dynamo'\n"
        "net = nn.Sequential(nn.Linear(4, 3)).eval()\n"
        "model = loader.TorchModel('pytorch', torch.__version__, net, None, '', 'NCHW')\n"
        "model.checkpoint = {k: v.detach().clone() for k, v in net.state_dict().items()}\n"
        "ledger = Ledger(model.checkpoint_tensors(), model.normalise)\n"
        "model.record_uses(ledger)\n"
        "model.predict_batch(np.ones((2, 4), dtype=np.float32))\n"
        "model.stop_recording()\n"
        "assert 'torch._dynamo' not in sys.modules, 'the ledger imported dynamo'\n"
        "record = ledger.record()\n"
        "assert record['foreign_count'] == 0 and record['matched'] >= 2, record\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]

