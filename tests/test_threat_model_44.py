"""Issue 44's adversarial entries (item 6): networks trained before the run, brought in past
the runner's own start, run with the real engine on real MNIST. The first two won on main
440f95a (conforming, a competitive TTA, every check of `runner verify` passing; figures in
docs/threat-model.md, class 4j-4l) and must now be non-conforming with their class named; the
third is named whichever way it loses.

The entries (tests/entries/cheat-*, assembled with what they share by
tests/entries/shipped-networks/make.py; their train.py is shipped-networks/warm.py) use one
narrow BN CNN (cheat-seed-networks/model.py, 12,722 parameters) and three networks of it
trained on the host from three random initialisations:

* cheat-seed-networks (--runs 3): the three at 3 bits as letters in the entry's own files
  (under the information budget); ``nets[seed % 3]``, BatchNorm statistics estimated again,
  800 plain SGD steps (lr 0.05): it does not descend from the initial weights the runner drew;
* cheat-wheel-networks: the same three in fp16, in a package pinned in the lock (netzoo,
  tests/netzoo_wheel.py): over the information budget (the wheel counts), and no descent;
* cheat-init-plus-network(-untrained) (--runs 3): the runner's start ``W0`` plus ``c * W``
  (network 0, ``|c W| = 2.5 |W0|``): its cosine with ``W0`` stays over the descent limit, and
  every run shares ``W``: their aligned weights are alike (or, untrained, it misses the
  threshold: 94-97.5 %).
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from tests.test_threat_model_36 import ENTRIES, _import, _named
from tests.test_threat_model_36 import _run as run_36

import netzoo_wheel


def _run(name: str, tmp_path_factory, *options: str) -> dict:
    """test_threat_model_36's run of the assembled entry, with the host's load lifted: these
    runs share two cores with whatever else the host runs, and contention is not the subject."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNNER_MAX_OTHER_RUNNABLE", "1000")
        patch.setenv("RUNNER_MAX_STEAL", "1")
        return run_36(name, tmp_path_factory, *options)


# --- what the entries carry (no engine) -------------------------------------------------------

def test_the_three_texts_and_the_wheel_carry_the_same_three_networks_of_the_entrys_shape():
    codec = _import("codec")
    model = _import("model", ENTRIES / "cheat-seed-networks")
    shapes = {k: tuple(v.shape) for k, v in model.build_model().state_dict().items()
              if "running" not in k and "num_batches" not in k}
    source = _import("seed_networks")
    assert [[name, list(shape)] for name, shape in shapes.items()] == source.LAYOUT
    for index, text in enumerate(("tokens_a", "tokens_b", "tokens_c")):
        letters = codec.decode(_import(text))
        assert {k: v.shape for k, v in letters.items()} == shapes, text
        zoo = types.ModuleType(f"net_{index}")
        exec(netzoo_wheel._network(index), zoo.__dict__)
        words = codec.decode(zoo)
        assert {k: v.shape for k, v in words.items()} == shapes
        # the letters are the fp16 network at 3 bits: every weight within half a step of its row
        for name, w in letters.items():
            if w.ndim > 1:
                step = np.abs(words[name]).reshape(len(w), -1).max(1) / 3
                assert (np.abs(w - words[name]).reshape(len(w), -1) <= step[:, None] * 0.5 + 1e-3).all(), name
    # three networks, not one: trained from different initialisations, their weights unrelated
    first, second = (codec.decode(_import(t))["stage2.0.weight"].ravel() for t in ("tokens_a", "tokens_b"))
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.2


def test_the_seed_networks_fit_the_information_budget_and_the_wheel_does_not(tmp_path):
    from runner.entry_build.context import entry_files
    from runner.entry_build.information import DEFAULT_BUDGET_BYTES, locked_wheels, measure_entry
    from runner.entry_build.wheel_allowlist import load_allowlist

    make = _import("make")
    seeds = make.assemble("cheat-seed-networks", tmp_path / "seeds")
    assert measure_entry(seeds, entry_files(seeds), seeds / "requirements.lock").total < DEFAULT_BUDGET_BYTES
    wheel = make.assemble("cheat-wheel-networks", tmp_path / "wheel")
    report = measure_entry(wheel, entry_files(wheel), wheel / "requirements.lock")
    assert not report.over  # its own files are small...
    (tmp_path / "wheels").mkdir()
    wheels, files = locked_wheels([netzoo_wheel.build(tmp_path / "wheels")], load_allowlist())
    report.wheels, report.files = wheels, report.files + files
    assert report.over  # ...the package takes it over


# --- the runs (real engine, real MNIST) --------------------------------------------------------

@pytest.fixture(scope="module")
def seed_networks_runs(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-seed-networks", tmp_path_factory, "--runs", "2")  # descent names each run alone


@pytest.fixture(scope="module")
def wheel_networks_run(docker_client, cpu_base_image, tmp_path_factory):
    from runner import paths

    netzoo_wheel.into_wheelhouse(paths.wheelhouse_dir())  # content-addressed: the pin finds it
    return _run("cheat-wheel-networks", tmp_path_factory)


@pytest.fixture(scope="module")
def init_plus_runs(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-init-plus-network", tmp_path_factory, "--runs", "3")


@pytest.fixture(scope="module")
def init_plus_untrained_runs(docker_client, cpu_base_image, tmp_path_factory):
    return _run("cheat-init-plus-network-untrained", tmp_path_factory)  # it never crosses: one run shows it


@pytest.mark.docker
@pytest.mark.slow
def test_class4_networks_chosen_by_the_seed_do_not_descend_from_the_runners_start(seed_networks_runs):
    runs = seed_networks_runs["runs"]
    # The cheat works: the networks sit near the threshold after 800 steps (99.29-99.45 % seen),
    # so a drawn seed may miss it; a run that misses wins nothing.
    assert len(runs) == 2 and any(r["training"]["reached"] for r in runs)
    for run in runs:  # every run that crosses is named
        if run["training"]["reached"]:
            assert not run["conforming"]
            assert _named(run["nonconforming_reasons"], "does not descend from the initial weights"), run["seed"]
    assert not _named(seed_networks_runs["reasons"], "information budget"), seed_networks_runs["reasons"]


@pytest.mark.docker
@pytest.mark.slow
def test_class4_networks_in_a_pinned_wheel_count_in_the_budget_and_do_not_descend(wheel_networks_run):
    (run,) = wheel_networks_run["runs"]
    assert run["training"]["reached"]
    reasons = wheel_networks_run["reasons"]
    assert _named(reasons, "information budget", "netzoo==0.1.0"), reasons
    assert _named(reasons, "does not descend from the initial weights"), reasons


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("runs", ["init_plus_runs", "init_plus_untrained_runs"])
def test_class4_a_network_added_onto_the_runners_start_loses(runs, request):
    """W0 + c W keeps its cosine with W0 over the descent limit, so descent is not what
    names it: a run that crosses shares W with the others (aligned weights), and one that
    does not cross wins nothing."""
    found = request.getfixturevalue(runs)
    expected = 3 if runs == "init_plus_runs" else 1
    assert len(found["runs"]) == expected and len({r["seed"] for r in found["runs"]}) == expected
    texts = found["reasons"] + found["summaries"]
    assert not [r["seed"] for r in found["runs"] if r["training"]["reached"] and r["conforming"]], texts
    crossed = [r for r in found["runs"] if r["training"]["reached"]]
    for run in crossed:
        assert _named(run["nonconforming_reasons"], "alike", "aligned weights"), texts
    if runs == "init_plus_runs":
        assert len(crossed) >= 2  # the shared network does carry it over the threshold
    else:
        assert not crossed  # 94-97.5 % without a gradient step
