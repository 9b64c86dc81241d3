"""Rules have versions (issue 45, item 7): every task's threshold and limits are versioned data,
a result records the version it was made under, and ``runner verify`` judges it by that
version, saying what today's would say when they differ."""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from securesystemslib.signer import CryptoSigner
from synthetic_result import auditor_home, make_result_folder, stage_mnist_stand_in

import runner.tasks
from runner.bundle import make_bundle
from runner.entry_build.information import budget_for
from runner.fingerprint import capture_host
from runner.results import RESULT_SCHEMA
from runner.results.assemble import _rules_info
from runner.results.record import Result
from runner.results.view import read_record
from runner.score.probe import PROBE_GAP_LIMIT, PROBE_ITEMS
from runner.score.training_evidence import FRACTION
from runner.tasks import TASKS, get_task
from runner.tasks.base import Task
from runner.tasks.rules import RULES_DIR, Rules, load_rules
from runner.verify import Auditor, verify_bundle

TASKS_DIR = Path(runner.tasks.__file__).parent


def _toml(rules: Rules) -> str:
    return "".join(f"{f.name} = {getattr(rules, f.name)!r}\n" for f in dataclasses.fields(rules)
                   if f.name not in ("task", "version"))


# -- the data ----------------------------------------------------------------------------

@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_task_declares_rules_and_applies_its_newest(task_id):
    task = TASKS[task_id]
    package = next(d for d in TASKS_DIR.iterdir() if (d / "__init__.py").is_file()
                   and importlib.import_module(f"runner.tasks.{d.name}").TASK.id == task_id)
    folder = package / RULES_DIR
    history = load_rules(folder, task_id)
    assert task.rules_history == history and task.rules == history[-1]
    assert task.rules_version == history[-1].version == getattr(task, "rules_version", "1")
    assert task.rules.threshold == task.threshold
    assert (task.rules.descent_similarity, task.rules.cross_seed_mistakes, task.rules.cross_seed_weights) == (
        task.descent.similarity, task.cross_seed.mistakes, task.cross_seed.weights)


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_todays_shared_limits_are_the_ones_the_run_applies(task_id):
    """The limits a run applies from its own modules are its task's newest rules'."""
    rules = TASKS[task_id].rules
    assert (rules.probe_gap, rules.probe_items, rules.evidence_fraction) == (PROBE_GAP_LIMIT, PROBE_ITEMS, FRACTION)
    assert rules.information_budget == budget_for(task_id)[0]


def test_version_1_is_what_results_were_judged_by_before_versions():
    """Version 1 holds the values the tasks declared before their rules had versions."""
    before = {"mnist": (0.993, 0.2, 0.45, 0.4), "fashion-mnist": (0.92, 0.15, 0.5, 0.4),
              "cifar10": (0.94, 0.1, 0.9, 0.5), "imagenet": (0.93, 0.1, 0.9, 0.5), "squad-v1.1": (0.75, 0.1, 0.9, 0.5)}
    for task_id, values in before.items():
        v1 = get_task(task_id).rules_of("1")
        assert (v1.threshold, v1.descent_similarity, v1.cross_seed_mistakes, v1.cross_seed_weights) == values
        assert (v1.probe_gap, v1.probe_items, v1.evidence_fraction, v1.information_budget) == (0.1, 2000, 1.5, 32768)


def test_a_rules_file_states_every_value_and_no_other(tmp_path):
    base = TASKS["mnist"].rules
    (tmp_path / "1.toml").write_text(_toml(base).replace("probe_items = 2000\n", ""))
    with pytest.raises(ImportError, match="missing \\['probe_items'\\]"):
        load_rules(tmp_path, "mnist")
    (tmp_path / "1.toml").write_text(_toml(base) + "tta_bonus = 1\n")
    with pytest.raises(ImportError, match="unknown \\['tta_bonus'\\]"):
        load_rules(tmp_path, "mnist")
    (tmp_path / "1.toml").write_text(_toml(base).replace("probe_items = 2000", "probe_items = 2.5"))
    with pytest.raises(ImportError, match="probe_items"):
        load_rules(tmp_path, "mnist")
    with pytest.raises(ImportError, match="declares no rules"):
        load_rules(tmp_path / "none", "mnist")
    (tmp_path / "1.toml").write_text(_toml(base))
    (tmp_path / "v2.toml").write_text(_toml(base))
    with pytest.raises(ImportError, match="a whole number"):
        load_rules(tmp_path, "mnist")


def test_a_new_version_in_a_rules_folder_applies_and_the_old_ones_stay_known(tmp_path):
    base = TASKS["mnist"].rules
    for version, threshold in (("1", 0.99), ("2", 0.993), ("10", 0.995)):
        (tmp_path / f"{version}.toml").write_text(_toml(dataclasses.replace(base, threshold=threshold)))
    declared = Task("toy", "top1", 0.995, 10, 10, (1, 28, 28), ("top1Accuracy",))
    task = runner.tasks.with_rules(declared, tmp_path)
    assert [r.version for r in task.rules_history] == ["1", "2", "10"]
    assert (task.rules_version, task.threshold, task.rules.label) == ("10", 0.995, "toy rules v10")
    older = task.under(task.rules_of("1"))
    assert (older.threshold, older.rules_version, older.meets(0.991), task.meets(0.991)) == (0.99, "1", True, False)
    with pytest.raises(LookupError, match="toy rules v3, which this runner does not know \\(it knows v1, v2, v10\\)"):
        task.rules_of("3")
    with pytest.raises(ImportError, match="declares threshold 0.99, its newest rules"):
        runner.tasks.with_rules(dataclasses.replace(declared, threshold=0.99), tmp_path)


def test_a_task_declared_in_code_is_judged_by_version_1_of_its_own_fields():
    task = Task("small", "top1", 0.9, 10, 10, (1, 28, 28), ("top1Accuracy",))
    assert task.rules == Rules("small", "1", 0.9) and task.rules_of("1") == task.rules


# -- the result's field --------------------------------------------------------------------

def test_a_result_records_its_rules_and_an_old_one_reads_as_version_1(tmp_path):
    staged = stage_mnist_stand_in(tmp_path / "home")
    folder = make_result_folder(tmp_path / "20261122T010203Z-s0-abc123", staged, capture_host(None))
    assert Result.read(folder).rules_version == "1" and read_record(folder).rules_version == "1"
    result = Result.read(folder)
    result.rules = {"task": "mnist", "version": "2"}
    result.write(folder)
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(json.loads((folder / "result.json").read_text()))
    assert Result.read(folder).rules_version == "2" and read_record(folder).rules_version == "2"


def test_a_run_records_todays_rules():
    assert _rules_info(get_task("mnist")) == {"task": "mnist", "version": get_task("mnist").rules_version}


# -- verify ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    with auditor_home(tmp_path_factory) as staged:
        folder = make_result_folder(tmp_path_factory.mktemp("results") / "20261122T010203Z-s0-abc123",
                                    staged, capture_host())
        signer = CryptoSigner.generate_ed25519()
        make_bundle(folder, signer)
        yield folder, signer


def _made_under(signed, tmp_path, version: str, threshold: float | None = None) -> tuple[Path, Auditor]:
    pristine, signer = signed
    folder = tmp_path / pristine.name
    shutil.copytree(pristine, folder)
    result = json.loads((folder / "result.json").read_text())
    result["rules"] = {"task": "mnist", "version": version}
    if threshold is not None:  # the run's task record states the threshold it was made under
        result["task"]["threshold"] = threshold
    (folder / "result.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    make_bundle(folder, signer)
    return folder, Auditor(trusted_keys=[signer.public_key])


def _today_is(monkeypatch, **changes) -> Rules:
    """The registry's mnist with a version 2 of its rules (``changes`` to today's) applied."""
    task = TASKS["mnist"]
    v1 = task.rules
    v2 = dataclasses.replace(v1, version="2", **changes)
    monkeypatch.setitem(TASKS, "mnist", dataclasses.replace(task.under(v2), rules_history=(v1, v2)))
    return v2


def _failed(report) -> list:
    return [(c.name, c.detail) for c in report.checks if not c.ok]


def test_a_result_made_under_older_rules_verifies_under_them_and_names_todays_verdict(
        signed, tmp_path, monkeypatch):
    folder, auditor = _made_under(signed, tmp_path, "1")
    _today_is(monkeypatch, threshold=0.999)  # the synthetic run's best is 99.7 %: never reached today
    report = verify_bundle(folder, auditor)
    assert report.ok, _failed(report)
    assert "mnist rules v1 require" not in report.get("first-crossing").detail
    note = next(n for n in report.notes if n.startswith("rules"))
    assert note.startswith("rules: made under mnist rules v1; today's are v2 (threshold 0.993 -> 0.999): "
                           "under them the scores check would fail (evaluation 1: claims meets=True, recomputed False); "
                           "the tta check would fail (claims reached=True, recomputed False); ")
    assert "the first-crossing check would fail" in note and "mnist rules v2 require top1 >= 0.999" in note


def test_a_result_recorded_without_rules_is_judged_by_version_1(signed, tmp_path, monkeypatch):
    folder, _ = _made_under(signed, tmp_path, "1")
    pristine, signer = signed
    _today_is(monkeypatch, threshold=0.999)
    report = verify_bundle(pristine, Auditor(trusted_keys=[signer.public_key]))
    assert report.ok, _failed(report)
    assert any(n.startswith("rules: made under mnist rules v1; today's are v2") for n in report.notes)


def test_todays_rules_that_change_nothing_it_is_judged_by_say_it_would_pass_as_well(signed, tmp_path, monkeypatch):
    folder, auditor = _made_under(signed, tmp_path, "1")
    _today_is(monkeypatch, information_budget=65536)
    report = verify_bundle(folder, auditor)
    assert report.ok, _failed(report)
    assert [n for n in report.notes if n.startswith("rules")] == [
        "rules: made under mnist rules v1; today's are v2 (information_budget 32768 -> 65536): "
        "under them the result would pass as well"]


def test_a_result_made_under_todays_rules_has_no_rules_note(signed, tmp_path, monkeypatch):
    folder, auditor = _made_under(signed, tmp_path, "2", threshold=0.995)
    _today_is(monkeypatch, threshold=0.995)
    report = verify_bundle(folder, auditor)
    assert report.ok, _failed(report)
    assert not [n for n in report.notes if n.startswith("rules")]
    assert "top1 >= 0.995" in report.get("first-crossing").detail


def test_an_unknown_recorded_version_fails_in_one_line(signed, tmp_path):
    folder, auditor = _made_under(signed, tmp_path, "7")
    report = verify_bundle(folder, auditor)
    assert not report.ok
    detail = report.get(report.first_failure).detail
    assert detail == "result made under mnist rules v7, which this runner does not know (it knows v1)"
    assert not [n for n in report.notes if n.startswith("rules")]
