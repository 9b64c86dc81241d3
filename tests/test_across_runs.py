"""Runs that must be independent (issue 36, item 3): aligned weights, the evaluator's copy
of the crossing checkpoint checked against its bytes, the mistakes' bound, what a single run
and a claim are told."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from runner.claims import cross_seed_problem
from runner.harness.weights import dump
from runner.score.aligned_weights import compare
from runner.score.across_runs import Crossing, judge_pair, judge_set, lower_bound, not_checked
from runner.score.weights_dump import copy_dump, read_checked
from runner.tasks import get_task
from runner.tasks.base import CrossSeedLimits

LIMITS = CrossSeedLimits(mistakes=0.45, weights=0.5, evidence="calibration.md")


def _network(rng) -> list[tuple[str, np.ndarray]]:
    """conv 8 -> conv 16 -> flatten (16 x 5 x 5) -> linear 32 -> linear 10, PyTorch's layout."""
    return [("c1.weight", rng.normal(size=(8, 1, 3, 3))), ("c1.bias", rng.normal(size=8)),
            ("c2.weight", rng.normal(size=(16, 8, 3, 3))), ("bn.running_var", rng.random(16)),
            ("f1.weight", rng.normal(size=(32, 16 * 25))), ("f2.weight", rng.normal(size=(10, 32)))]


def _permuted(net, rng, jitter: float, channel_last: bool = False):
    """The same function with every hidden unit permuted (and ``jitter`` multiplicative noise)."""
    p1, p2, p3 = rng.permutation(8), rng.permutation(16), rng.permutation(32)
    w = dict(net)
    f1 = w["f1.weight"].reshape(32, 16, 25)[p3][:, p2].reshape(32, -1)
    out = [("c1.weight", w["c1.weight"][p1]), ("c1.bias", w["c1.bias"][p1]), ("c2.weight", w["c2.weight"][p2][:, p1]),
           ("bn.running_var", w["bn.running_var"][p2]), ("f1.weight", f1), ("f2.weight", w["f2.weight"][:, p3])]
    return [(n, v * (1 + jitter * rng.normal(size=v.shape))) for n, v in out]


def test_a_permuted_jittered_copy_is_aligned_and_found_alike():
    rng = np.random.default_rng(0)
    net = _network(rng)
    found = compare(net, _permuted(net, rng, 0.03), "pytorch")
    assert found.overall > 0.99 and all(layer.similarity > 0.99 for layer in found.layers)
    unaligned = [(n, np.asarray(v)) for n, v in _permuted(net, rng, 0.0)]
    # without the alignment the same network looks unrelated: the permutation hides it
    from runner.score.aligned_weights import correlation

    assert abs(correlation(dict(net)["c2.weight"], dict(unaligned)["c2.weight"])) < 0.2
    assert [layer.aligned for layer in found.layers] == [True, True, True, False]  # classes stay put


def test_keras_layout_and_a_channel_last_flatten_are_aligned_too():
    rng = np.random.default_rng(1)
    net, copy = _network(rng), None
    p2, p3 = rng.permutation(16), rng.permutation(32)
    w = dict(net)
    # Keras keeps [kh, kw, in, out] and [in, out]; its flatten of NHWC puts the channel last
    to_keras = {4: lambda v: np.transpose(v, (2, 3, 1, 0)), 2: lambda v: v.T}
    f1_nhwc = w["f1.weight"].reshape(32, 16, 25).transpose(0, 2, 1).reshape(32, -1)
    keras = [("c2", to_keras[4](w["c2.weight"])), ("f1", to_keras[2](f1_nhwc)), ("f2", to_keras[2](w["f2.weight"]))]
    f1p = f1_nhwc.reshape(32, 25, 16)[p3][:, :, p2].reshape(32, -1)
    copy = [("c2", to_keras[4](w["c2.weight"][p2])), ("f1", to_keras[2](f1p)), ("f2", to_keras[2](w["f2.weight"][:, p3]))]
    assert compare(keras, copy, "tensorflow").overall == pytest.approx(1.0)
    # read as PyTorch's layout, the same tensors do not align: the layout matters
    assert compare(keras, copy, "pytorch").overall < 0.9


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def _train(seed: int, x: np.ndarray, y: np.ndarray, steps: int = 200) -> list[tuple[str, np.ndarray]]:
    """A small MLP trained from its own seed (the way an honest run trains)."""
    torch.manual_seed(seed)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
    return [(k, v.detach().numpy().copy()) for k, v in model.state_dict().items()]


def test_independently_trained_networks_are_not_alike_and_a_shared_start_is():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(512, 256))
    y = (np.tanh(x @ rng.normal(size=(256, 10))) @ rng.normal(size=(10, 4))).argmax(axis=1)  # a random teacher
    a, b = _train(1, x, y), _train(2, x, y)
    honest = compare(a, b, "pytorch")
    assert honest.overall < 0.3, honest
    assert honest.highest.similarity < LIMITS.weights
    # A shared start (network a) with its units permuted, then trained on: still alike.
    torch.manual_seed(3)
    start = _mlp()
    start.load_state_dict({k: torch.tensor(v) for k, v in a})
    p = torch.randperm(64)
    with torch.no_grad():
        start[0].weight.copy_(start[0].weight[p]), start[0].bias.copy_(start[0].bias[p])
        start[2].weight.copy_(start[2].weight[:, p])
    opt = torch.optim.SGD(start.parameters(), lr=0.05)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    for _ in range(100):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(start(xt), yt).backward()
        opt.step()
    shared = compare(a, [(k, v.detach().numpy()) for k, v in start.state_dict().items()], "pytorch")
    assert shared.overall > 0.8


def _crossing(seed: int, weights) -> Crossing:
    return Crossing(f"run-{seed}", seed, f"{seed:064x}", None, None, weights=weights)


def test_a_pair_over_the_weights_limit_is_class_4_with_its_figures():
    rng = np.random.default_rng(4)
    net = _network(rng)
    pair = judge_pair(_crossing(1, net), _crossing(2, _permuted(net, rng, 0.03)), None, LIMITS, "pytorch")
    (finding,) = pair.findings
    assert "aligned weights" in finding and "limit 0.5" in finding and "seeds 1 and 2" in finding
    assert pair.record(pair.b)["weights"]["overall"] > 0.99
    assert not judge_pair(_crossing(1, net), _crossing(2, _network(rng)), None, LIMITS, "pytorch").findings


def test_few_mistakes_are_judged_on_their_bound_and_the_set_on_its_pooled_counts():
    assert lower_bound(6, 10) < 0.45 < 6 / 10  # six of ten shared: not enough to tell
    assert lower_bound(600, 1000) > 0.55
    labels = np.zeros(1000, dtype=np.int64)

    def run(seed, wrong):
        preds = labels.copy()
        preds[wrong] = 1
        return Crossing(f"run-{seed}", seed, f"{seed:064x}", preds, None)

    base = np.arange(60)
    # each pair shares 40 of 80 (0.50): one pair alone is not over 0.45 by its bound ...
    a, b, c = run(1, np.r_[base[:40], 100 + np.arange(20)]), run(2, np.r_[base[:40], 200 + np.arange(20)]), \
        run(3, np.r_[base[:40], 300 + np.arange(20)])
    pairs = [judge_pair(x, y, labels, LIMITS, "pytorch") for x, y in ((a, b), (a, c), (b, c))]
    assert all(p.jaccard == pytest.approx(0.5) and not p.findings for p in pairs)
    # ... nor the set of three (240 mistakes pooled): the bound is below the limit
    assert judge_set(pairs, LIMITS) is None
    tight = CrossSeedLimits(mistakes=0.35)
    assert "pooled over 3 pairs" in judge_set([judge_pair(x, y, labels, tight, "pytorch")
                                               for x, y in ((a, b), (a, c), (b, c))], tight)


def test_a_single_run_says_the_cross_seed_checks_were_not_possible_and_a_claim_needs_three():
    assert "not possible: a single run" in not_checked(1, True)
    assert "fewer than the 3" in not_checked(2, True)
    assert "auditor's" in not_checked(3, False)
    assert not_checked(3, True) is None
    assert "single run" in cross_seed_problem({"checked": False, "why_not": not_checked(1, True)})
    assert cross_seed_problem({"checked": True}) is None
    assert cross_seed_problem(None) is None  # a result from before the record: its own checks stand


def test_every_task_declares_its_cross_seed_limits_with_the_evidence_beside_it():
    import runner.tasks as tasks

    for task_id in ("mnist", "fashion-mnist"):
        limits = get_task(task_id).cross_seed
        folder = Path(tasks.__file__).parent / task_id.replace("-", "_")
        assert limits.evidence and (folder / limits.evidence).is_file()
        assert 0 < limits.mistakes < 0.9 and 0 < limits.weights < 1


# -- the evaluator's copy of the crossing checkpoint ---------------------------------------------

def _dumped(tmp_path: Path, state: dict, checkpoint: Path, index: int = 5):
    outbox, result = tmp_path / "outbox", tmp_path / "result"
    (outbox / str(index)).mkdir(parents=True, exist_ok=True)
    dump(state, outbox / str(index))
    return read_checked(result, copy_dump(outbox, result / "evaluations", index), checkpoint)


def test_the_evaluators_copy_is_trusted_only_when_its_bytes_are_the_checkpoints(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 26 * 26, 10))
    checkpoint = tmp_path / "3.pt"
    torch.save(model.state_dict(), checkpoint)
    state = torch.load(checkpoint, weights_only=True)
    tensors, problem = _dumped(tmp_path / "honest", state, checkpoint)
    assert problem is None and [n for n, _ in tensors][0] == "0.weight"
    assert all(v.dtype.kind == "f" for _, v in tensors)  # num_batches_tracked (an integer) is not written
    # A builder that shows other tensors than the checkpoint's is named.
    forged = {k: v + 1 if v.is_floating_point() else v for k, v in state.items()}
    _, problem = _dumped(tmp_path / "forged", forged, checkpoint)
    assert "does not occur in the checkpoint file" in problem
    # A checkpoint that also carries decoys, the dump showing only them, covers too little of it.
    decoys = {**{f"decoy.{k}": torch.randn_like(v) if v.is_floating_point() else v for k, v in state.items()}, **state}
    torch.save(decoys, tmp_path / "4.pt")
    _, problem = _dumped(tmp_path / "decoys", {k: v for k, v in decoys.items() if k.startswith("decoy.")}, tmp_path / "4.pt")
    assert "covers" in problem and "did not show" in problem


def test_a_channels_last_checkpoint_is_found_in_its_memory_order(tmp_path):
    conv = torch.nn.Conv2d(4, 8, 3).to(memory_format=torch.channels_last)
    checkpoint = tmp_path / "2.pt"
    torch.save(conv.state_dict(), checkpoint)
    state = torch.load(checkpoint, weights_only=True)
    assert not state["weight"].is_contiguous()  # saved as [out, h, w, in] in memory
    tensors, problem = _dumped(tmp_path, state, checkpoint)
    assert problem is None
    assert np.array_equal(dict(tensors)["weight"], state["weight"].numpy())  # back in [out, in, h, w]


def test_a_forged_copy_is_a_class_4_finding_of_its_run(tmp_path):
    from runner.score.across_runs import forged
    from runner.score.weights_dump import FORGED

    assert forged(Crossing("r", 1, None, None, None, weights_problem=FORGED + "tensor 'w' ..."))
    assert not forged(Crossing("r", 1, None, None, None, weights_problem="not compared: weights too large (1 bytes)"))


def test_a_checkpoint_over_the_cap_is_not_compared(tmp_path, monkeypatch):
    import runner.harness.weights as harness_weights

    monkeypatch.setattr(harness_weights, "MAX_BYTES", 100)
    checkpoint = tmp_path / "1.pt"
    torch.save({"w": torch.zeros(10, 10)}, checkpoint)
    tensors, problem = _dumped(tmp_path, torch.load(checkpoint, weights_only=True), checkpoint)
    assert tensors is None and "not compared: weights too large" in problem


# -- the engine: the honest default entry, three runs with seeds the runner draws -----------------

def test_three_honest_runs_of_the_default_entry_are_independent(
    docker_client, cpu_base_image, tmp_path, monkeypatch, host_load_is_not_the_subject
):
    import json

    from runner.cli import main

    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path))
    entry = Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu"
    assert main(["reproduce", str(entry), "--runs", "3", "--no-infer", "--no-sign"]) == 0
    runs = [json.loads((f / "result.json").read_text()) for f in sorted((tmp_path / "mnist-cnn-cpu").iterdir())
            if (f / "result.json").is_file()]
    assert len(runs) == 3
    for run in runs:
        record = run["training"]["cross_seed"]
        assert record["checked"] and record["runs"] == 3 and record["weights_problem"] is None, record
        assert len(record["pairs"]) == 2 and not any(p["findings"] for p in record["pairs"])
        for pair in record["pairs"]:
            assert pair["weights"]["overall"] < record["limits"]["weights"]
            assert pair["mistakes"]["jaccard"] < record["limits"]["mistakes"]
        assert not [r for r in run["nonconforming_reasons"] if "class 4" in r], run["nonconforming_reasons"]


def test_verify_requires_every_recorded_finding_among_the_reasons_and_a_consistent_checked(tmp_path):
    from runner.verify.cross_seed import cross_seed_problems

    class Bundle:
        root = tmp_path

        def __init__(self, result):
            self.result = result

        def claim(self, *keys):
            data = self.result
            for key in keys:
                data = data.get(key) if isinstance(data, dict) else None
            return data

    finding = "the crossing checkpoints of runs a and b are alike in their aligned weights"
    record = {"runs": 3, "seeds_drawn": True, "checked": True, "weights_problem": "not compared: weights too large",
              "pairs": [{"with": "b", "findings": [finding]}]}
    assert cross_seed_problems(Bundle({"training": {}})) == []  # a result from before the record
    dropped = cross_seed_problems(Bundle({"training": {"cross_seed": record}, "nonconforming_reasons": []}))
    assert "not among the non-conforming reasons" in dropped[0]
    kept = {"training": {"cross_seed": record}, "nonconforming_reasons": ["class 4 (a model trained before the run): " + finding]}
    assert cross_seed_problems(Bundle(kept)) == []
    single = {**record, "runs": 1, "pairs": []}
    assert "checked=True for 1 runs" in cross_seed_problems(Bundle({"training": {"cross_seed": single}}))[0]


def test_reproduce_prints_one_line_of_what_the_runs_were_compared_on():
    from runner.score.across_runs import summary_line

    limits = {"mistakes": 0.45, "weights": 0.4}
    pair = {"mistakes": {"jaccard": 0.24}, "weights": {"overall": 0.13}}
    records = [{"run": "a", "runs": 2, "limits": limits, "why_not": "2 runs: fewer than the 3 a claim needs",
                "weights_problem": None, "pairs": [{"with": "b", **pair}]},
               {"run": "b", "runs": 2, "limits": limits, "why_not": "2 runs: fewer than the 3 a claim needs",
                "weights_problem": None, "pairs": [{"with": "a", **pair}]}]
    line = summary_line(records)
    assert "mistakes shared 0.24-0.24 (limit 0.45)" in line and "aligned weights 0.13-0.13 (limit 0.4)" in line
    assert line.endswith("fewer than the 3 a claim needs")
    single = summary_line([{"run": "a", "runs": 1, "limits": limits, "weights_problem": None, "pairs": [],
                            "why_not": "not possible: a single run (a claim needs at least 3 runs with seeds the runner draws)"}])
    assert "not compared" in single and "not possible: a single run" in single


def test_the_evaluator_writes_the_crossing_tensors_as_loaded_before_it_permutes_them(tmp_path):
    """The harness's sensitivity request with ``"weights": true`` (the default entry's real
    builder, its channels-last checkpoint): the copy is the checkpoint's, unpermuted."""
    from runner.harness.evaluate import _handle, parse_args

    entry = Path(__file__).resolve().parents[1] / "entries" / "mnist-cnn-cpu"
    import sys

    sys.path.insert(0, str(entry))
    try:
        from model import build_model

        model = build_model().to(memory_format=torch.channels_last)
        torch.save(model.state_dict(), tmp_path / "3.pt")
    finally:
        sys.path.remove(str(entry))
        sys.modules.pop("model", None)
    (tmp_path / "clean").mkdir()
    np.save(tmp_path / "clean" / "images.npy", np.zeros((8, 1, 28, 28), dtype=np.uint8))
    args = parse_args(["--entry-dir", str(entry), "--builder", "model:build_model", "--requests", str(tmp_path),
                       "--out", str(tmp_path / "outbox"), "--inputs", f"clean={tmp_path / 'clean'}"])
    sets = {"clean": np.load(tmp_path / "clean" / "images.npy")}
    _handle(args, sets, 3, {"checkpoint": str(tmp_path / "3.pt"), "shuffle_seed": 7, "items": 8, "weights": True})
    sys.modules.pop("model", None)
    result = tmp_path / "result"
    tensors, problem = read_checked(result, copy_dump(tmp_path / "outbox", result / "evaluations", 3), tmp_path / "3.pt")
    assert problem is None
    state = torch.load(tmp_path / "3.pt", weights_only=True)
    for name, value in tensors:
        assert np.array_equal(value, state[name].numpy()), name
