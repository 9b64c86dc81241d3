"""How a run flows, held by reading the source tree: only the command line, studies and
benchmarks drive the pipeline module, and a ``Result`` is made in one module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runner"
DRIVERS = ("cli", "study", "bench")  # may call runner.reproduce


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path, ast.parse(path.read_text(), str(path))


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_only_the_command_line_studies_and_benchmarks_import_the_pipeline():
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE).parts
        if inside[0] in DRIVERS or path.name == "reproduce.py" and len(inside) == 1:
            continue
        if {"runner.reproduce"} & _imports(tree) or any(i.startswith("runner.reproduce.") for i in _imports(tree)):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == [], f"these modules import runner.reproduce: {offenders}"


def test_a_result_is_constructed_in_one_module():
    makers = set()
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Name) and node.func.id == "Result")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "Result")):
                makers.add(str(path.relative_to(PACKAGE)))
    assert makers == {"results/assemble.py"}, makers


def test_no_module_writes_result_json_by_hand():
    """result.json is written by ``Result.write`` (records.py): nowhere as a raw dict."""
    offenders = []
    for path, tree in _modules():
        if path.relative_to(PACKAGE).as_posix() == "results/record.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "write_json":
                text = ast.unparse(node.args[0]) if node.args else ""
                if "result.json" in text or "RESULT_FILE" in text:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == [], offenders
