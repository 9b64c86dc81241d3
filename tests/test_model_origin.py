"""Class 4: the scored model must come from the run. Provenance (what the model computes
with), sensitivity (what is left with its checkpoint permuted), the builder's time and
runs that are the same network across seeds; each with the real PyTorch loader of the
harness, on real (tiny) models, and the host's judgement of what the evaluator records."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from runner.harness.errors import HarnessError
from runner.harness.frameworks import pytorch as loader
from runner.harness.provenance import PER_TENSOR_BYTES, TOTAL_BYTES, Ledger
from runner.score.across_runs import MIN_MISTAKES, Crossing, judge_pair
from runner.score.model_origin import (
    chance, judge_sensitivity, provenance_problem, read_provenance, sensitivity_problem,
)
from runner.tasks import get_task

HONEST = '''
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 28 * 28, 10)
        self.register_buffer("mean", torch.tensor([33.3]), persistent=False)  # a small constant

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x - self.mean)))
        return self.fc(x.flatten(1))

def build_model():
    return Net()
'''

# The cheat: the network lives outside the module's registered parameters.
HIDDEN_ATTRIBUTE = '''
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        object.__setattr__(self, "shipped", [nn.Linear(784, 10)])  # not a submodule: not in the state dict

    def forward(self, x):
        return self.shipped[0](x.flatten(1))

def build_model():
    return Net()
'''

# The same, reached only through a closure and a numpy array converted in the forward pass.
HIDDEN_CLOSURE = '''
import numpy as np
import torch
from torch import nn

def _make():
    weights = np.random.default_rng(0).standard_normal((784, 10)).astype(np.float32)
    def answer(x):
        return x.flatten(1) @ torch.from_numpy(weights)
    return answer

_ANSWER = _make()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return _ANSWER(x) * self.scale

def build_model():
    return Net()
'''

# An fp16 copy of trained fp32 weights, made after loading: the same tensor at lower precision.
HALF_AT_USE = '''
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x):
        return torch.nn.functional.linear(x.flatten(1).half(), self.fc.weight.half(), self.fc.bias.half()).float()

def build_model():
    return Net()
'''


def _entry(tmp_path: Path, source: str, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model.py").write_text(textwrap.dedent(source))
    return folder


def _checkpoint(folder: Path, state: dict) -> Path:
    path = folder / "weights.pt"
    torch.save(state, path)
    return path


def _record(folder: Path, weights: Path) -> dict:
    loaded = loader.load(folder, "model:build_model", weights)
    ledger = Ledger(loaded.checkpoint_tensors(), loaded.normalise)
    loaded.record_uses(ledger)
    images = np.random.default_rng(0).uniform(0, 255, (64, 1, 28, 28)).astype(np.float32)
    for start in (0, 32):
        loaded.predict_batch(images[start:start + 32])
    loaded.stop_recording()
    return ledger.record()


@pytest.fixture(autouse=True)
def _fresh_module():
    """Each test's entry has its own model.py: no ``model`` module imported before (by an
    earlier test module of the session) or by another test here may stand in for it."""
    import sys

    sys.modules.pop("model", None)
    yield
    sys.modules.pop("model", None)


def _trained_state(source_folder: Path) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("honest_model", source_folder / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(1)
    return module.build_model().state_dict()


def test_an_honest_model_computes_only_with_its_checkpoint(tmp_path):
    folder = _entry(tmp_path, HONEST, "honest")
    record = _record(folder, _checkpoint(folder, _trained_state(folder)))
    assert record["foreign_count"] == 0 and record["foreign"] == []
    assert record["matched"] >= 6  # conv, bn (weight, bias, running stats), fc
    assert record["small_constants"]["count"] == 1 and record["small_constants"]["bytes"] == 4  # the mean


def test_a_network_in_a_plain_attribute_is_named_with_its_size(tmp_path):
    folder = _entry(tmp_path, HIDDEN_ATTRIBUTE, "attr")
    record = _record(folder, _checkpoint(folder, {}))  # an empty state dict loads "strictly"
    assert record["checkpoint_tensors"] == 0
    sizes = {r["bytes"] for r in record["foreign"]}
    assert 784 * 10 * 4 in sizes and record["foreign_bytes"] >= 784 * 10 * 4
    assert any("shipped" in r["name"] for r in record["foreign"])
    problem = provenance_problem(_as_read(tmp_path, record), "checkpoint 0")
    assert problem.startswith("class 4") and "not in its checkpoint" in problem and "31360 bytes" in problem


def test_a_network_reached_through_a_closure_and_numpy_is_seen_when_used(tmp_path):
    folder = _entry(tmp_path, HIDDEN_CLOSURE, "closure")
    record = _record(folder, _checkpoint(folder, {"scale": torch.ones(1)}))
    assert record["foreign_count"] == 1 and record["foreign"][0]["bytes"] == 784 * 10 * 4
    assert "read by aten" in record["foreign"][0]["name"]


def test_a_lower_precision_copy_of_a_checkpoint_tensor_is_that_tensor(tmp_path):
    folder = _entry(tmp_path, HALF_AT_USE, "half")
    torch.manual_seed(2)
    state = torch.nn.Linear(784, 10).state_dict()
    record = _record(folder, _checkpoint(folder, {f"fc.{k}": v for k, v in state.items()}))
    assert record["foreign_count"] == 0, record["foreign"]


def test_small_constants_are_allowed_up_to_the_budget_only():
    ledger = Ledger({}, loader.TorchModel.normalise)
    for i in range(TOTAL_BYTES // PER_TENSOR_BYTES + 2):  # each at the per-tensor limit
        t = torch.arange(PER_TENSOR_BYTES // 4, dtype=torch.float32) + i
        ledger.note(t, f"constant {i}", None, PER_TENSOR_BYTES, tuple(t.shape), "float32")
    record = ledger.record()
    assert record["small_constants"]["bytes"] > TOTAL_BYTES
    assert record["foreign_count"] == record["small_constants"]["count"]  # past the total, all count


def test_a_checkpoint_loads_strictly_and_names_the_keys(tmp_path):
    folder = _entry(tmp_path, HONEST, "strict")
    state = _trained_state(folder)
    state.pop("fc.bias")
    state["extra.weight"] = torch.zeros(3)
    with pytest.raises(HarnessError) as err:
        loader.load(folder, "model:build_model", _checkpoint(folder, state))
    assert "missing keys fc.bias" in str(err.value) and "unexpected keys extra.weight" in str(err.value)


def test_permuting_the_checkpoint_changes_an_honest_model_and_not_a_hidden_one(tmp_path):
    images = np.random.default_rng(3).uniform(0, 255, (32, 1, 28, 28)).astype(np.float32)
    honest = _entry(tmp_path, HONEST, "honest2")
    loaded = loader.load(honest, "model:build_model", _checkpoint(honest, _trained_state(honest)))
    before = loaded.predict_batch(images)
    assert loaded.shuffle_weights(5) >= 4
    assert not np.allclose(before, loaded.predict_batch(images))
    import sys
    sys.modules.pop("model", None)
    hidden = _entry(tmp_path, HIDDEN_ATTRIBUTE, "attr2")
    loaded = loader.load(hidden, "model:build_model", _checkpoint(hidden, {}))
    before = loaded.predict_batch(images)
    assert loaded.shuffle_weights(5) == 0
    assert np.allclose(before, loaded.predict_batch(images))


def _as_read(tmp_path: Path, record: dict):
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps(record))
    return read_provenance(tmp_path, "provenance.json")


# -- the host's judgement ----------------------------------------------------------------------

def test_a_missing_or_malformed_record_is_itself_a_finding(tmp_path):
    assert "is missing" in provenance_problem(read_provenance(tmp_path, "nope.json"), "checkpoint 1")
    (tmp_path / "bad.json").write_text('{"foreign": 3}')
    assert "malformed" in provenance_problem(read_provenance(tmp_path, "bad.json"), "checkpoint 1")
    (tmp_path / "deep.json").write_text("[" * 10_000 + "]" * 10_000)
    assert "unreadable" in provenance_problem(read_provenance(tmp_path, "deep.json"), "checkpoint 1")
    assert provenance_problem(read_provenance(tmp_path, "../../etc/passwd"), "x") is not None


def _sensitivity(tmp_path: Path, task, labels, preds, own: float) -> dict:
    np.save(tmp_path / "permuted.npy", preds)
    record = {"of": "crossing", "predictions": "permuted.npy"}
    return judge_sensitivity(task, tmp_path, record, own, labels)


def test_a_model_that_keeps_its_score_with_a_permuted_checkpoint_is_non_conforming(tmp_path):
    task = get_task("mnist")
    labels = np.random.default_rng(0).integers(0, 10, task.eval_size)
    judged = _sensitivity(tmp_path, task, labels, labels.copy(), own=1.0)
    problem = sensitivity_problem(task, judged)
    assert problem.startswith("class 4") and "does not depend on its checkpoint" in problem
    assert "1.0000 as trained" in problem and "1.0000 with the checkpoint's tensors permuted" in problem


def test_a_permuted_honest_model_answering_one_or_two_classes_is_chance(tmp_path):
    task = get_task("mnist")
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, task.eval_size)
    two_classes = np.where(rng.random(task.eval_size) < 0.5, 0, 6)  # what a permuted network does
    judged = _sensitivity(tmp_path, task, labels, two_classes, own=0.994)
    assert sensitivity_problem(task, judged) is None
    assert judged["score"] < judged["limit"] < 0.994


def _scoring(labels: np.ndarray, fraction: float, rng) -> np.ndarray:
    """Predictions right on exactly ``fraction`` of ``labels``, wrong (never right) elsewhere."""
    preds = (labels + 1) % 10
    right = rng.choice(len(labels), round(fraction * len(labels)), replace=False)
    preds[right] = labels[right]
    return preds


def test_the_sensitivity_finding_weighs_the_number_of_items_it_was_measured_on(tmp_path):
    """A weak model on a small (smoke) set whose permuted twin lands a little over the limit
    (seen in CI: 0.1875 against 0.1699 on 512 items) is within what that many items allow;
    the same excess on a full set, or a model that keeps its score on a small one, is not."""
    task = get_task("fashion-mnist")
    rng = np.random.default_rng(3)
    small = np.tile(np.arange(10), 52)[:512]  # balanced: chance 0.1
    judged = _sensitivity(tmp_path, task, small, _scoring(small, 0.1875, rng), own=0.2398)
    assert judged["limit"] == pytest.approx(0.17, abs=2e-3) and judged["score"] == pytest.approx(0.1875, abs=1e-3)
    assert judged["items_scored"] == 512 and judged["score"] < judged["bound"]
    assert sensitivity_problem(task, judged) is None
    large = np.tile(np.arange(10), 2000)  # 20,000 items: the same excess is many standard errors
    judged = _sensitivity(tmp_path, task, large, _scoring(large, 0.1875, rng), own=0.2398)
    problem = sensitivity_problem(task, judged)
    assert problem and "standard errors above it on 20000 items" in problem
    kept = _sensitivity(tmp_path, task, small, _scoring(small, 0.9, rng), own=0.9)
    assert "does not depend on its checkpoint" in sensitivity_problem(task, kept)
    # A record judged before the bound existed is held to the limit alone.
    old = {k: v for k, v in _sensitivity(tmp_path, task, small, _scoring(small, 0.1875, rng), own=0.2398).items()
           if k not in ("bound", "items_scored")}
    assert "does not depend" in sensitivity_problem(task, old)


def test_chance_is_the_most_frequent_classes_when_the_set_is_unbalanced():
    task = get_task("mnist")
    labels = np.array([1] * 30 + [2] * 70)
    assert chance(task, labels) == pytest.approx(0.7)
    assert chance(get_task("imagenet"), np.arange(1000)) == pytest.approx(0.005)


# -- across runs -------------------------------------------------------------------------------

def _crossing(seed: int, preds: np.ndarray, probe: np.ndarray, sha: str = "a" * 64) -> Crossing:
    return Crossing(f"run-{seed}", seed, sha, preds, probe)


def _wrong(labels: np.ndarray, items: np.ndarray, shift: int = 1) -> np.ndarray:
    preds = labels.copy()
    preds[items] = (preds[items] + shift) % 10
    return preds


def too_alike(a: Crossing, b: Crossing, labels) -> str | None:
    """The pair's findings against MNIST's limits, joined (None: none)."""
    return "; ".join(judge_pair(a, b, labels, get_task("mnist").cross_seed, "pytorch").findings) or None


def test_the_same_network_across_seeds_is_named_and_an_honest_pair_is_not():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 10_000)
    hard = rng.choice(10_000, 100, replace=False)  # items every network finds hard
    shipped = _wrong(labels, hard[:60])
    probe = _wrong(labels, hard)
    same = too_alike(_crossing(1, shipped, probe), _crossing(2, shipped, probe), labels)
    assert "identical across seeds 1 and 2" in same
    # A shipped network with noise added: a few mistakes more or fewer, the rest the same.
    nudged = _wrong(labels, np.concatenate([hard[:58], [hard[99]]]))
    near = too_alike(_crossing(1, shipped, probe, "a" * 64), _crossing(2, nudged, probe, "b" * 64), labels)
    assert "share" in near and "mistakes" in near and "standard errors" in near
    # Two trained networks share only some of the hard mistakes.
    other = _wrong(labels, np.concatenate([hard[:25], rng.choice(10_000, 35, replace=False)]))
    other_probe = _wrong(labels, np.concatenate([hard[:40], rng.choice(10_000, 60, replace=False)]))
    assert too_alike(_crossing(1, shipped, probe, "a" * 64), _crossing(2, other, other_probe, "b" * 64), labels) is None
    # Near-perfect models agree by force: too few mistakes to judge.
    assert too_alike(_crossing(1, labels, labels, "a" * 64), _crossing(2, labels, labels, "b" * 64), labels) is None
    assert MIN_MISTAKES > 0
    # An auditor's repeat of one seed may give the same network: not a finding.
    assert too_alike(_crossing(4, shipped, probe), _crossing(4, shipped, probe), labels) is None
