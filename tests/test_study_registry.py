"""Adding a study is one module under runner/study and one row of ``runner.study.registry.
STUDIES``: every study module has its row, each row names functions that exist, the command
line's ``runner study`` subcommands are exactly the rows, no other module of the runner
imports a study module or branches on a study's name, and the dispatch runs a new row (its
run, its reader, its report) untouched."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from runner.cli import parser
from runner.errors import UserError
from runner.study import registry
from runner.study.common import SavedStudy, StudyOutput
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
    assert len(inspect.signature(load(row.report)).parameters) == 1  # (the saved study)
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


RUNNER = STUDY_PACKAGE.parent


def _study_modules() -> dict[str, set[str]]:
    """Each study module (dotted) and the names of the studies it serves."""
    modules: dict[str, set[str]] = {}
    for row in STUDIES.values():
        for reference in (row.run, row.report, row.from_runs):
            if reference:
                modules.setdefault(reference.partition(":")[0], set()).add(row.name)
    return modules


def _imported(tree: ast.AST) -> set[str]:
    """The modules a file imports (``from runner.study import lesion`` as runner.study.lesion)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _branches_on(tree: ast.AST) -> set[str]:
    """The strings a file compares with (``==``, ``in``, ``match``): where a per-study branch
    would name its study."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                elts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found |= {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        elif isinstance(node, ast.MatchValue) and isinstance(node.value, ast.Constant):
            found.add(node.value.value)
    return found


def test_no_module_but_a_studys_own_and_the_registry_imports_it_or_branches_on_its_name():
    """A study is its module and its row: the command line, the dispatch, the report, the
    other studies and the rest of the runner reach it only through ``STUDIES``."""
    modules = _study_modules()
    for path in sorted(RUNNER.rglob("*.py")):
        if path == Path(registry.__file__):
            continue
        dotted = ".".join(path.relative_to(RUNNER.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        assert not (_imported(tree) & set(modules)) - {dotted}, f"{dotted} imports a study module"
        assert not (_branches_on(tree) & set(STUDIES)) - modules.get(dotted, set()), \
            f"{dotted} branches on a study's name"


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


def _toy_run(request: StudyRequest) -> SavedStudy:
    _SEEN.append(request)
    folder = Path(request.arguments["where"])
    (folder / "runs").mkdir()
    return SavedStudy(folder, {"level": request.arguments["level"]})


def _toy_report(saved: SavedStudy) -> StudyOutput:
    return StudyOutput("toy", "toy-entry", saved.folder, saved.summary,
                       notes=[f"toy report at level {saved.summary['level']}"])


def test_a_new_study_is_one_row_from_the_command_line_to_its_report(monkeypatch, tmp_path, capsys):
    """A row naming functions of a module the runner never heard of: ``runner study toy``
    parses its own option, runs through the dispatch, and the row's report is what is shown
    and written."""
    from runner.cli import study as study_command

    row = Study("toy", "a toy study", "A toy study.", f"{__name__}:_toy_run", f"{__name__}:_toy_report",
                arguments=(argument("--level", type=int, default=1, help="how much"),
                           argument("--where", help="its folder")), full_curve=True)
    monkeypatch.setitem(STUDIES, "toy", row)
    args = parser().parse_args(["study", "toy", ENTRY, "--level", "3", "--where", str(tmp_path)])
    assert study_command.run(args) == 0
    request = _SEEN.pop()
    assert request.arguments == {"level": 3, "where": str(tmp_path)} and request.options.full_curve
    assert "toy report at level 3" in (tmp_path / "report.html").read_text()
    printed = capsys.readouterr().out
    assert f"study: {tmp_path}" in printed and "toy report at level 3" in printed


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


def test_a_request_without_runs_makes_its_rows_default_number():
    """``--runs`` left out (a request built in code) makes what ``runner study`` would parse:
    the row's default, or one run for a row without ``--runs``; a number given is kept."""
    assert StudyRequest("stability", ENTRY).new_runs == STUDIES["stability"].runs == 5
    assert StudyRequest("lesion", ENTRY).new_runs == STUDIES["lesion"].runs == 3
    assert StudyRequest("roofline", ENTRY).new_runs == 1  # its row has no --runs
    assert StudyRequest("stability", ENTRY, runs=2).new_runs == 2
