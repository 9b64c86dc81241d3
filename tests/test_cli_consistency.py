"""One way of doing each thing across the commands (issue 40 item 6): ``runner config unset``,
allowed values in ``config show``, readable profile rules, ``--backend`` refused in one line
before any work, and ``bench latency`` naming what to install on the host. Run with the real
CLI in-process (``hostile_helpers.run_cli``). ``-o/--out`` as a folder and the descriptions are
held for every command in test_cli_startup.py; bundles and their names in test_bundle.py and
test_compare.py."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from hostile.hostile_helpers import assert_one_line_error, run_cli

from runner.bench import latency
from runner.errors import UserError
from runner.mlperf.config import load_settings
from runner.profiles import describe_pattern


@pytest.fixture
def wide(monkeypatch):
    """Tables wide enough that no cell wraps."""
    monkeypatch.setenv("COLUMNS", "250")


def test_config_unset_removes_a_value_and_show_lists_the_allowed_ones(tmp_path, monkeypatch, capsys, wide):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))
    assert run_cli(capsys, "config", "set", "mlperf.division", "open")[0] == 0
    assert run_cli(capsys, "config", "set", "mlperf.org", "Test Lab")[0] == 0
    code, out, _ = run_cli(capsys, "config", "show")
    assert code == 0
    assert "one of: open | closed" in out and "one of: cloud | onprem | preview | research" in out
    code, out, _ = run_cli(capsys, "config", "unset", "mlperf.division")
    assert code == 0 and "mlperf.division unset" in out
    assert load_settings() == {"org": "Test Lab"}
    code, out, _ = run_cli(capsys, "config", "unset", "mlperf.division")
    assert code == 0 and "was not set" in out
    assert run_cli(capsys, "config", "unset", "mlperf.org")[0] == 0
    assert load_settings() == {}
    assert_one_line_error(*run_cli(capsys, "config", "unset", "mlperf.nonsense"), "unknown setting mlperf.nonsense")
    assert_one_line_error(*run_cli(capsys, "config", "unset", "org"), "unknown setting 'org'")


@pytest.mark.parametrize("pattern, words", [
    ("V100", 'contains "V100"'),
    ("A100.*40GB", 'contains "A100" then "40GB"'),
    ("^Intel|AMD EPYC", 'starts with "Intel" or contains "AMD EPYC"'),
    (r"Tesla\.V100$", 'contains "Tesla.V100" at the end'),
    (r"A100[- ]SXM", "matches the regular expression 'A100[- ]SXM'"),
    (r"\d+GB", "matches the regular expression '\\\\d+GB'"),
])
def test_a_profile_pattern_reads_as_words(pattern, words):
    assert describe_pattern(pattern) == words


def test_profile_list_and_show_print_rules_not_regular_expressions(capsys, wide):
    code, out, _ = run_cli(capsys, "profile", "list")
    assert code == 0
    assert 'GPU whose name contains "A100" then "40GB"' in out and 'CPU model contains "Xeon"' in out
    assert "/V100/" not in out and ".*" not in out
    code, out, _ = run_cli(capsys, "profile", "show", "aws-p4d.24xlarge")
    assert code == 0 and 'name contains "A100" then "40GB" (any case)' in out and "/A100" not in out


@pytest.mark.parametrize("command", [["reproduce", "entries/mnist-cnn-cpu"], ["reinfer", "entries/mnist-cnn-cpu"],
                                     ["study", "stability", "entries/mnist-cnn-cpu"]])
def test_an_unknown_backend_is_refused_in_one_line_naming_the_choices(capsys, command):
    assert_one_line_error(*run_cli(capsys, *command, "--backend", "nope"),
                          "argument --backend: invalid choice: 'nope' (choose from 'torch',", "'onnxruntime'")


def test_bench_latency_without_the_test_extra_says_what_to_install_on_the_host(capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    line = assert_one_line_error(*run_cli(capsys, "bench", "latency"), "this host's Python", sys.executable,
                                 "lacks onnxruntime", "pip install", "[test]")
    assert "entry's lock" not in line
    with pytest.raises(UserError, match="lacks torch, onnxruntime, onnx"):
        latency.require_host_packages(find_spec=lambda name: None)


def test_the_data_commands_choices_are_what_runner_data_stages():
    """``runner data``'s arguments derive its choices from the tasks without importing
    runner.data (numpy, the engine): the same lists."""
    from runner import data
    from runner.cli.arguments import data as arguments

    assert (arguments.PREPARABLE, arguments.IMPORTABLE) == (data.PREPARABLE, data.IMPORTABLE)
    assert arguments.TREE_TASKS == tuple(data.TREE_TASKS)
