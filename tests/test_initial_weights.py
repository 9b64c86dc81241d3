"""The runner's draw of a run's initial weights and the descent check (issue 44 items 1-3),
without an engine: roles, fans, the draw and its digest, the bounds on what a builder lists,
the one-line loader on a real PyTorch model, the harness's listing, the descent measure."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
import torch
from torch import nn

from runner.harness.frameworks import pytorch as torch_loader
from runner.initial_weights import (
    DRAWN, ROLES, UNDRAWN_SHARE, Tensor, assign_roles, default_role, digest, draw, fans, record, redraw,
    tensors_of, undrawn_problem,
)
from runner.manifest.schema import INIT_ROLES
from runner.plan import draw_seeds
from runner.run.init_weights import LOADER, InitError, _parse_shapes, roles_for, write_init
from runner.score.descent import cosine, judged_alone, measure
from runner.tasks import get_task


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 26 * 26, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.bn(self.conv(x))), 1))


def _listed(model: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    return [(n, tuple(t.shape)) for n, t in model.state_dict().items() if t.is_floating_point()]


# -- roles and fans ---------------------------------------------------------------------------

def test_the_manifest_offers_exactly_the_runners_roles():
    assert tuple(ROLES) == INIT_ROLES


@pytest.mark.parametrize("name, shape, framework, role", [
    ("conv.weight", (8, 1, 3, 3), "pytorch", "fan_in_uniform"),
    ("bn.weight", (8,), "pytorch", "ones"),
    ("bn.bias", (8,), "pytorch", "zeros"),
    ("bn.running_mean", (8,), "pytorch", "zeros"),
    ("bn.running_var", (8,), "pytorch", "ones"),
    ("layers/conv2d/vars/0", (3, 3, 1, 8), "tensorflow", "glorot_uniform"),
    ("layers/batch_normalization/vars/0", (8,), "tensorflow", "ones"),
    ("layers/batch_normalization/vars/1", (8,), "tensorflow", "zeros"),
    ("layers/batch_normalization/vars/3", (8,), "tensorflow", "ones"),
    ("layers/dense/vars/1", (10,), "tensorflow", "zeros"),
    ("1.gamma", (8,), "mxnet", "ones"),
    ("1.running_var", (8,), "mxnet", "ones"),
    ("3.weight", (256, 576), "mxnet", "glorot_uniform"),
])
def test_each_tensor_takes_its_frameworks_convention(name, shape, framework, role):
    assert default_role(name, shape, framework) == role


def test_fans_follow_each_frameworks_weight_layout():
    assert fans((32, 16, 3, 3), "pytorch") == (144, 288)
    assert fans((3, 3, 16, 32), "tensorflow") == (144, 288)
    assert fans((10, 256), "mxnet") == (256, 10)


def test_a_declared_role_wins_and_a_glob_that_names_nothing_is_refused():
    listed = _listed(Small())
    tensors = roles_for(listed, "pytorch", (("fc.*", "zeros"),), has_public=False)
    assert {t.name: t.role for t in tensors}["fc.weight"] == "zeros"
    with pytest.raises(InitError, match="names no tensor"):
        roles_for(listed, "pytorch", (("head.*", "normal"),), has_public=False)
    with pytest.raises(InitError, match="public input"):
        roles_for(listed, "pytorch", (("fc.weight", "public"),), has_public=False)
    # only a word table of the public input's width may start from it, never a layer
    with pytest.raises(InitError, match="no table"):
        roles_for(listed, "pytorch", (("fc.weight", "public"),), has_public=True, public_width=300)
    table = roles_for([("words", (5000, 300)), *listed], "pytorch", (("words", "public"),), True, 300)
    assert table[0].role == "public" and undrawn_problem(table) is None


def test_a_model_left_mostly_undrawn_is_named():
    tensors = assign_roles(_listed(Small()), "pytorch", ())
    assert undrawn_problem(tensors) is None
    assert "no tensor the runner draws" in undrawn_problem([])
    zeroed = assign_roles(_listed(Small()), "pytorch", (("fc.weight", "zeros"),))
    problem = undrawn_problem(zeroed)
    assert problem and "fc.weight" in problem and f"{UNDRAWN_SHARE:.0%}" in problem


# -- the draw -----------------------------------------------------------------------------------

def test_the_draw_is_the_seeds_alone_and_each_tensor_its_own_stream():
    tensors = assign_roles(_listed(Small()), "pytorch", ())
    a, b, other = draw(tensors, 5, "pytorch"), draw(tensors, 5, "pytorch"), draw(tensors, 6, "pytorch")
    assert digest(a) == digest(b) != digest(other)
    # one tensor's values do not depend on which other tensors the model has
    alone = draw([t for t in tensors if t.name == "fc.weight"], 5, "pytorch")
    assert np.array_equal(alone["fc.weight"], a["fc.weight"])
    bound = 1 / math.sqrt(1 * 3 * 3)  # fan-in of an [8, 1, 3, 3] weight
    assert np.abs(a["conv.weight"]).max() <= bound and a["conv.weight"].std() > bound / 3
    assert np.all(a["bn.weight"] == 1) and np.all(a["fc.bias"] == 0)


def test_a_record_draws_again_to_the_same_values_and_bounds_what_it_lists(tmp_path):
    tensors = assign_roles(_listed(Small()), "pytorch", ())
    data = write_init(tmp_path / "init", tensors, 11, "pytorch")
    again, values = redraw(json.loads((tmp_path / "init" / "init.json").read_text()))
    assert again == tensors and digest(values) == data["sha256"]
    assert (tmp_path / "init" / LOADER.name).read_bytes() == LOADER.read_bytes()
    for bad in ({"tensors": [{"name": "x", "shape": [0], "role": "zeros"}]},
                {"tensors": [{"name": "x", "shape": [2], "role": "pretrained"}]},
                {"tensors": [{"name": "x", "shape": [10**5, 10**5], "role": "normal"}]}, [], {"tensors": 3}):
        with pytest.raises(ValueError):
            tensors_of(bad)


@pytest.mark.parametrize("listing", [
    {"tensors": [{"name": "a", "shape": [2]}, {"name": "a", "shape": [2]}]},
    {"tensors": [{"name": "a\x1b[2J", "shape": [2]}]},
    {"tensors": [{"name": "a", "shape": [2.5]}]},
    {"tensors": [{"name": "a", "shape": [10**5, 10**5]}]},
])
def test_what_a_builder_lists_is_bounded(listing):
    with pytest.raises(ValueError):
        _parse_shapes(listing)


def test_seeds_are_drawn_each_on_their_own_unless_the_auditor_gives_one():
    drawn = draw_seeds(3)
    assert len(set(drawn)) == 3 and drawn != tuple(range(drawn[0], drawn[0] + 3))
    assert draw_seeds(3, 10) == (10, 11, 12)


# -- inside the container: the harness's listing and the one-line loader -------------------

@pytest.fixture
def entry_folder(tmp_path, monkeypatch):
    (tmp_path / "smallmodel.py").write_text(
        "from torch import nn\n\n\ndef build():\n"
        "    return nn.Sequential(nn.Conv2d(1, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 26 * 26, 10))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("smallmodel", None)


def test_the_harness_lists_every_float_tensor_buffers_included(entry_folder):
    listed = torch_loader.initial_tensors(entry_folder, "smallmodel:build", (1, 28, 28))
    names = [t["name"] for t in listed]
    assert names == ["0.weight", "1.weight", "1.bias", "1.running_mean", "1.running_var", "3.weight", "3.bias"]
    assert "1.num_batches_tracked" not in names  # an integer: nothing to draw


def test_the_loader_sets_every_drawn_tensor_and_refuses_a_model_that_does_not_fit(entry_folder, tmp_path, monkeypatch):
    from smallmodel import build

    listed = [(t["name"], tuple(t["shape"])) for t in torch_loader.initial_tensors(entry_folder, "smallmodel:build", (1, 28, 28))]
    tensors = assign_roles(listed, "pytorch", ())
    write_init(tmp_path / "init", tensors, 3, "pytorch")
    monkeypatch.syspath_prepend(str(tmp_path / "init"))
    import runner_init

    model = build().to(memory_format=torch.channels_last)
    runner_init.load(model, str(tmp_path / "init"))
    values = draw(tensors, 3, "pytorch")
    for name, value in model.state_dict().items():
        if name in values:
            assert np.array_equal(value.numpy(), values[name]), name
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)  # the layout is kept
    with pytest.raises(ValueError, match="no tensor named"):
        runner_init.load(nn.Linear(3, 3), str(tmp_path / "init"))
    sys.modules.pop("runner_init", None)


# -- descent ------------------------------------------------------------------------------------

def test_training_keeps_a_tensor_near_its_start_and_a_shipped_one_is_unrelated():
    rng = np.random.default_rng(0)
    w0 = {"w": rng.uniform(-0.1, 0.1, (64, 576)).astype(np.float32)}
    trained = {"w": 0.8 * w0["w"] + 0.6 * rng.uniform(-0.1, 0.1, (64, 576)).astype(np.float32)}
    shipped = {"w": rng.uniform(-0.1, 0.1, (64, 576)).astype(np.float32)}
    limit = get_task("mnist").descent.similarity
    honest = measure(list(trained.items()), w0, ["w"], limit)
    assert honest["problem"] is None and honest["overall"] > 0.7
    cheat = measure(list(shipped.items()), w0, ["w"], limit)
    assert abs(cheat["overall"]) < 0.05 and "does not descend" in cheat["problem"] and "w (" in cheat["problem"]
    missing = measure([], w0, ["w"], limit)
    assert "not in the model" in missing["problem"]


def test_a_small_tensor_counts_only_overall():
    assert not judged_alone(256, 0.10) and judged_alone(1600, 0.10) and judged_alone(256, 0.3)
    assert cosine(np.zeros(4), np.ones(4)) is None


def test_only_random_roles_are_judged_for_descent():
    assert set(DRAWN) == {r for r in ROLES if r not in ("zeros", "ones", "public", "data")}
    assert record([Tensor("a", (2, 2), "normal")], 1, "pytorch", {"a": np.ones((2, 2), np.float32)})["drawn_elements"] == 4


def test_a_model_with_tensors_the_runner_never_drew_is_named():
    rng = np.random.default_rng(1)
    w0 = {"w": rng.normal(0, 0.1, (64, 64)).astype(np.float32)}
    tensors = [("w", w0["w"]), ("hidden.kernel", rng.normal(0, 0.1, (256, 10)).astype(np.float32))]
    found = measure(tensors, w0, ["w"], 0.4, listed={"w"})
    assert "drew no initial value" in found["problem"] and "hidden.kernel (2,560)" in found["problem"]
    assert measure(tensors[:1] + [("bias", np.zeros(10, np.float32))], w0, ["w"], 0.4, listed={"w"})["problem"] is None


def test_the_classes_layer_counts_only_overall():
    from runner.score.descent import output_layer

    tensors = assign_roles(_listed(Small()), "pytorch", ())
    assert output_layer(tensors) == {"fc.weight"}
    rng = np.random.default_rng(2)
    w0 = {"conv": rng.normal(0, 0.1, (64, 576)).astype(np.float32), "fc": rng.normal(0, 0.01, (10, 256)).astype(np.float32)}
    grown = {"conv": w0["conv"] * 0.9 + rng.normal(0, 0.05, (64, 576)).astype(np.float32),
             "fc": w0["fc"] + rng.normal(0, 0.1, (10, 256)).astype(np.float32)}  # ten times its start
    alone = measure(list(grown.items()), w0, ["conv", "fc"], 0.4)
    assert "fc (" in alone["problem"]
    assert measure(list(grown.items()), w0, ["conv", "fc"], 0.4, overall_only=frozenset({"fc"}))["problem"] is None
