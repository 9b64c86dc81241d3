"""Issue 36's adversarial entries: a network shipped as ordinary text, run with the real
engine on real MNIST. Each won on main f03ceba (conforming, a small TTA, every check of
`runner verify` passing; figures in docs/threat-model.md, class 4f-4h) and must now be
non-conforming with its class named.

The entries (tests/entries/cheat-*, assembled with what they share by
tests/entries/shipped-networks/make.py) carry one 12,654-weight CNN trained before the run:

* cheat-words: its fp16 weights as English words, decoded and written as a checkpoint at
  once: over the information budget, and no evidence of training;
* cheat-pyc: a build step writes it as numpy's bytecode cache: a .pyc that is no compilation;
* cheat-no-training: at 4 bits as letters (fits the budget), evaluated at once: no evidence
  of training;
* cheat-jitter, cheat-small-start, cheat-small-start-permuted (--runs 3): a shipped start,
  jittered per seed, then genuine steps: runs that share a starting point, in their aligned
  weights (after matching units, which undoes the per-seed permutation).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from runner.cli import main
from tests.test_threat_model import _strings

ENTRIES = Path(__file__).parent / "entries"
SHIPPED = ENTRIES / "shipped-networks"


def _import(name: str, folder: Path = SHIPPED):
    if str(SHIPPED) not in sys.path:
        sys.path.insert(0, str(SHIPPED))  # what the shipped modules import (codec)
    spec = importlib.util.spec_from_file_location(f"shipped_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(name: str, tmp_path_factory, *options: str) -> dict:
    """``runner reproduce`` of the assembled entry (real MNIST, no inference phase): its
    results, their reasons, and every string of its runs' summaries."""
    folder = _import("make").assemble(name, tmp_path_factory.mktemp("entries") / name)
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNNER_RESULTS", str(results))
        assert main(["reproduce", str(folder), "--no-infer", *options]) == 0
    runs = [json.loads((f / "result.json").read_text()) for f in sorted((results / name).iterdir()) if f.is_dir()]
    summaries = [json.loads(p.read_text()) for p in (results / name).glob("runs-*.json")]
    return {"runs": runs, "reasons": [r for run in runs for r in run["nonconforming_reasons"]],
            "summaries": [s for summary in summaries for s in _strings(summary)]}


def _named(texts: list[str], *words: str) -> list[str]:
    return [t for t in texts if "class 4" in t and all(w in t for w in words)]


# --- what the entries carry (no engine) -------------------------------------------------------

def test_a_checkpoint_written_without_torch_is_one_torch_loads(tmp_path):
    import torch

    codec = _import("codec")
    tensors = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "a.bias": np.ones(3, np.float32)}
    codec.write_checkpoint(str(tmp_path / "c.pt"), tensors)
    loaded = torch.load(tmp_path / "c.pt", weights_only=True)
    assert list(loaded) == list(tensors)
    assert all(np.array_equal(loaded[k].numpy(), v) for k, v in tensors.items())


def test_the_shipped_texts_carry_the_network_they_claim():
    """words.py is the network's fp16 weights exactly; net4.py and start3.py fill model.py's
    every tensor with its shape (what a run scores is in docs/threat-model.md)."""
    make, codec = _import("make"), _import("codec")
    model = _import("model", ENTRIES / "cheat-pretrained-checkpoint")
    network = make.pretrained_small()
    shapes = {k: tuple(v.shape) for k, v in model.build_model().state_dict().items()}
    for text in ("words", "net4", "start3"):
        decoded = codec.decode(_import(text))
        assert {k: v.shape for k, v in decoded.items()} == shapes, text
    words = codec.decode(_import("words"))
    assert all(np.array_equal(words[k], network[k]) for k in shapes)


def test_the_small_starts_fit_the_information_budget_and_the_words_do_not(tmp_path):
    """The budget names cheat-words on its own; the small starts need the other checks."""
    from runner.entry_build.context import entry_files
    from runner.entry_build.information import DEFAULT_BUDGET_BYTES, measure_entry

    make = _import("make")
    totals = {}
    for name in ("cheat-words", "cheat-no-training", "cheat-small-start"):
        folder = make.assemble(name, tmp_path / name)
        totals[name] = measure_entry(folder, entry_files(folder), folder / "requirements.lock").total
    assert totals["cheat-words"] > DEFAULT_BUDGET_BYTES
    assert totals["cheat-small-start"] < totals["cheat-no-training"] < DEFAULT_BUDGET_BYTES // 2


# --- the runs (real engine, real MNIST) --------------------------------------------------------

@pytest.fixture(scope="module")
def words_run(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-words", tmp_path_factory)


@pytest.fixture(scope="module")
def pyc_run(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-pyc", tmp_path_factory)


@pytest.fixture(scope="module")
def no_training_run(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-no-training", tmp_path_factory)


@pytest.fixture(scope="module")
def jitter_runs(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-jitter", tmp_path_factory, "--runs", "3")


@pytest.fixture(scope="module")
def small_start_runs(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-small-start", tmp_path_factory, "--runs", "3")


@pytest.fixture(scope="module")
def permuted_runs(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-small-start-permuted", tmp_path_factory, "--runs", "3")


@pytest.mark.docker
@pytest.mark.slow
def test_class4_a_network_in_plain_words_is_over_the_information_budget(words_run):
    (run,) = words_run["runs"]
    assert run["training"]["reached"]  # the cheat works...
    reasons = words_run["reasons"]
    assert _named(reasons, "information budget", "words.py"), reasons  # ...and is named, with its file
    assert _named(reasons, "no evidence of training"), reasons


@pytest.mark.docker
@pytest.mark.slow
def test_class4_weights_a_build_step_writes_as_a_pyc_are_named(pyc_run):
    (run,) = pyc_run["runs"]
    assert run["training"]["reached"]
    assert _named(pyc_run["reasons"], ".pyc", "_distributor_init_local"), pyc_run["reasons"]


@pytest.mark.docker
@pytest.mark.slow
def test_class4_a_crossing_with_no_training_is_named(no_training_run):
    (run,) = no_training_run["runs"]
    assert run["training"]["reached"]
    reasons = no_training_run["reasons"]
    assert _named(reasons, "no evidence of training"), reasons
    assert not _named(reasons, "information budget"), reasons  # it fits: this check is the one


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("runs", ["jitter_runs", "small_start_runs", "permuted_runs"])
def test_class4_runs_that_share_a_starting_point_are_named_by_their_aligned_weights(runs, request):
    found = request.getfixturevalue(runs)
    assert len(found["runs"]) == 3 and len({r["seed"] for r in found["runs"]}) == 3
    # The cheat works: a pair of runs reaches (all the cross-seed check needs). The jittered
    # network sits near the threshold, so a drawn seed may miss it (99.29 % seen in CI).
    assert sum(bool(r["training"]["reached"]) for r in found["runs"]) >= 2
    texts = found["reasons"] + found["summaries"]
    assert _named(texts, "aligned weights"), texts
    assert not _named(found["reasons"], "information budget"), found["reasons"]
