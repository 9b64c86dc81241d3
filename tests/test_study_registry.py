"""Adding a study is one module under runner/study and one row of ``runner.study.registry.
STUDIES``: every study module has its row, each row names functions that exist, the command
line's ``runner study`` subcommands are exactly the rows, and the dispatch names no study (a
new row runs through it untouched)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from runner.cli import parser
from runner.errors import UserError
from runner.study import registry
from runner.study.common import StudyOutput
from runner.study.dispatch import StudyRequest, run_study
from runner.study.registry import STUDIES, Study, argument, load

STUDY_PACKAGE = Path(registry.__file__).parent
ENTRY = "entries/mnist-cnn-cpu"


def _declared_kinds() -> dict[str, str]:
    """The studies each module under runner/study declares (``KIND``, or ``MODES`` for a
    module serving several), by name: the module's dotted path."""
    found = {}
    for path in sorted(STUDY_PACKAGE.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] in (["KIND"], ["MODES"]):
                names = ast.literal_eval(node.value)
                for name in (names,) if isinstance(names, str) else names:
                    found[name] = f"runner.study.{path.stem}"
    return found


def test_every_study_module_has_a_row_and_every_row_a_module():
    declared = _declared_kinds()
    assert set(declared) == set(STUDIES), "a study module without a row, or a row without a module"
    for name, module in declared.items():
        row = STUDIES[name]
        for reference in (row.run, row.report, row.from_runs):
            assert reference is None or reference.partition(":")[0] == module, (name, reference)


@pytest.mark.parametrize("row", STUDIES.values(), ids=lambda row: row.name)
def test_a_row_names_functions_that_exist_and_offers_from_runs_only_with_a_reader(row):
    assert len(inspect.signature(load(row.run)).parameters) == 1  # (request)
    assert callable(load(row.report))
    flags = {flag for arg in row.arguments for flag in arg.flags}
    assert ("--from-runs" in flags) == (row.from_runs is not None)
    if row.from_runs:
        assert len(inspect.signature(load(row.from_runs)).parameters) == 2  # (request, the given runs)


def test_the_dispatch_names_no_study_and_imports_none():
    tree = ast.parse((STUDY_PACKAGE / "dispatch.py").read_text())
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not strings & set(STUDIES), "a per-study branch in the dispatch"
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    modules = {reference.partition(":")[0] for row in STUDIES.values() for reference in (row.run, row.from_runs) if reference}
    assert not imported & modules, "the dispatch imports a study"


def _study_parser():
    top = parser(every=True)
    commands = next(a for a in top._actions if getattr(a, "choices", None) and "study" in a.choices)
    return next(a for a in commands.choices["study"]._actions if getattr(a, "choices", None))


def test_the_command_lines_study_subcommands_are_exactly_the_rows_with_their_arguments():
    kinds = _study_parser()
    assert list(kinds.choices) == list(STUDIES)
    for name, row in STUDIES.items():
        options = {flag for action in kinds.choices[name]._actions for flag in action.option_strings}
        assert {flag for arg in row.arguments for flag in arg.flags} <= options, name
        assert ("--runs" in options) == (row.runs is not None), name


_SEEN: list[StudyRequest] = []


def _toy_run(request: StudyRequest) -> StudyOutput:
    _SEEN.append(request)
    folder = Path(request.arguments["where"])
    (folder / "runs").mkdir()
    return StudyOutput("toy", request.entry, folder, {"level": request.arguments["level"]})


def test_a_new_study_is_one_row_from_the_command_line_to_its_report(monkeypatch, tmp_path, capsys):
    """A row naming a function of a module the runner never heard of: ``runner study toy``
    parses its own option, runs through the dispatch and writes its report."""
    from runner.cli import study as study_command

    row = Study("toy", "a toy study", "A toy study.", f"{__name__}:_toy_run", f"{__name__}:_toy_run",
                arguments=(argument("--level", type=int, default=1, help="how much"),
                           argument("--where", help="its folder")), full_curve=True)
    monkeypatch.setitem(STUDIES, "toy", row)
    args = parser().parse_args(["study", "toy", ENTRY, "--level", "3", "--where", str(tmp_path)])
    assert study_command.run(args) == 0
    request = _SEEN.pop()
    assert request.arguments == {"level": 3, "where": str(tmp_path)} and request.options.full_curve
    assert (tmp_path / "report.html").is_file()
    assert f"study: {tmp_path}" in capsys.readouterr().out


def test_a_readers_own_arguments_are_checked_before_the_runs_given(tmp_path):
    """The reader reads the given runs when it needs them: a bad ladder, or two runs for the
    roofline, is the error, not the missing folder (as before the registry)."""
    missing = [str(tmp_path / "gone"), str(tmp_path / "also-gone")]
    with pytest.raises(UserError, match="--thresholds"):
        run_study(StudyRequest("threshold", ENTRY, from_runs=missing, arguments={"thresholds": "x"}))
    with pytest.raises(UserError, match="the roofline study reads one run"):
        run_study(StudyRequest("roofline", ENTRY, from_runs=missing))
    with pytest.raises(UserError, match="gone"):  # and then the runs given are read
        run_study(StudyRequest("threshold", ENTRY, from_runs=missing[:1]))
