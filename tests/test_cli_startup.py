"""``runner --help`` and every ``runner SUB --help`` start at once: building the parser
imports the table of subcommands only, parsing imports the named subcommand's argument
module only, and no run module or heavy library loads before a command runs (figures:
``runner bench cli``; no test here times anything)."""

from __future__ import annotations

import importlib

import pytest

from runner.bench.cli import heavy, heavy_modules, modules_loaded
from runner.cli import SUBCOMMANDS, parser

# runner, runner.cli, runner.errors today; a few more would still start at once, a pipeline would not.
RUNNER_MODULES_CEILING = 6
RUN_MODULES = {f"runner.cli.{row.run}" for row in SUBCOMMANDS}


def _ours(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m == "runner" or m.startswith("runner.")]


def test_runner_help_imports_no_heavy_module_and_few_of_the_runners():
    loaded = modules_loaded("--help")
    assert heavy(loaded) == [], "runner --help imports what only running a command needs"
    assert len(_ours(loaded)) <= RUNNER_MODULES_CEILING, _ours(loaded)
    assert not [m for m in loaded if m.startswith("runner.cli.arguments")], "no subcommand's arguments"


@pytest.mark.parametrize("row", SUBCOMMANDS, ids=lambda row: row.name)
def test_a_subcommands_help_imports_its_arguments_and_nothing_heavy(row):
    loaded = modules_loaded(row.name, "--help")
    assert heavy(loaded) == [], f"runner {row.name} --help imports what only running it needs"
    assert f"runner.cli.arguments.{row.arguments}" in loaded
    others = {f"runner.cli.arguments.{r.arguments}" for r in SUBCOMMANDS if r.arguments != row.arguments}
    assert not others & set(loaded) - {"runner.cli.arguments.slurm"}, "another subcommand's arguments"
    assert not RUN_MODULES & set(loaded), "a run module, before anything runs"


def test_the_check_finds_a_heavy_import():
    """What the tests above look for is there to be found (the tree before the table imported
    every subcommand's run module, and with them numpy, docker and the pipeline)."""
    assert heavy(["numpy.core", "runner.reproduce", "runner.cli"]) == ["numpy", "runner.reproduce"]
    assert {"torch", "numpy", "docker", "matplotlib", "scipy", "onnx", "runner.reproduce"} <= set(heavy_modules())


def _parsers(top):
    """Every parser under ``top`` with its path, once each (an alias shares its parser)."""
    seen, stack = set(), [((), top)]
    while stack:
        path, p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        yield path, p
        for action in p._actions:
            for name, sub in getattr(action, "_name_parser_map", {}).items():
                stack.append(((*path, name), sub))


def test_every_subcommand_and_action_has_a_description():
    missing = [" ".join(path) for path, p in _parsers(parser(every=True)) if path and not p.description]
    assert missing == []


def test_every_action_runs_a_function_of_its_run_module():
    top = parser(every=True)
    for row in SUBCOMMANDS:
        module = importlib.import_module(f"runner.cli.{row.run}")
        for path, p in _parsers(top._subparsers._group_actions[0]._name_parser_map[row.name]):
            leaf = not any(getattr(a, "_name_parser_map", None) for a in p._actions)
            if leaf:
                name = p._defaults.get("func", "run")
                assert callable(getattr(module, name, None)), f"runner {row.name} {' '.join(path)}: {name}"


def test_every_out_option_is_a_folder_with_o_as_its_short_form():
    for path, p in _parsers(parser(every=True)):
        for action in p._actions:
            if "--out" in action.option_strings:
                assert action.option_strings == ["-o", "--out"], " ".join(path)
                assert action.metavar == "DIR", " ".join(path)
