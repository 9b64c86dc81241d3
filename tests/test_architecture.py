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


# -- a result's inference records are typed (runner.results.inference.BackendRun) --------------
TYPED_INFERENCE_EXEMPT = ("results", "verify")  # the type itself; verify reads untrusted dicts


def _inference_iteration(expr: ast.AST) -> str | None:
    """"items" or "values" when ``expr`` iterates ``<x>.inference`` itself (through ``sorted``,
    ``or {}``), not a conversion of it such as ``as_dicts(<x>.inference)``."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("items", "values"):
            mapping = node.func.value
            if isinstance(mapping, ast.BoolOp):
                mapping = mapping.values[0]
            if isinstance(mapping, ast.Attribute) and mapping.attr == "inference":
                return node.func.attr
    return None


def _is_name(node: ast.AST, name: str) -> bool:
    """``node`` is ``name``, or ``(name or ...)``."""
    if isinstance(node, ast.BoolOp):
        node = node.values[0]
    return isinstance(node, ast.Name) and node.id == name


def _dict_reads(name: str, scope: list[ast.AST]) -> list[int]:
    """Lines in ``scope`` that read ``name`` as a dict: ``name[...]`` or ``name.get(...)``."""
    lines = []
    for root in scope:
        for node in ast.walk(root):
            if isinstance(node, ast.Subscript) and _is_name(node.value, name):
                lines.append(node.lineno)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and _is_name(node.func.value, name)):
                lines.append(node.lineno)
    return lines


def _inference_records_read_as_dicts(tree: ast.AST) -> list[int]:
    """Lines that index a result's inference record as a dict: a loop or comprehension over
    ``x.inference.items()`` / ``.values()`` whose record it subscripts or ``.get``s, and
    ``x.inference[k][...]`` / ``x.inference[k].get(...)``."""
    lines = []
    for node in ast.walk(tree):
        loops = []
        if isinstance(node, ast.For):
            loops.append((node.iter, node.target, node.body))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            scope = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            scope += [cond for gen in node.generators for cond in gen.ifs]
            loops += [(gen.iter, gen.target, scope) for gen in node.generators]
        for iterated, target, scope in loops:
            kind = _inference_iteration(iterated)
            if kind == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
            if kind and isinstance(target, ast.Name):
                lines += _dict_reads(target.id, scope)
        inner = node.value if isinstance(node, ast.Subscript) else (
            node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" else None)
        if (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Attribute)
                and inner.value.attr == "inference"):
            lines.append(node.lineno)
    return lines


def test_the_inference_check_finds_records_read_as_dicts():
    old = """
for name, b in last.inference.items():
    lat = b.get("latency_ms") or {}
    ok = b["passed_gate"]
points = [r.get("latency_ms") for r in sorted(result.inference.values())]
mean = result.inference["torch"]["latency_ms"]
gate = result.inference["torch"].get("passed_gate")
for backend, record in (result.inference or {}).items():
    p50 = ((record or {}).get("latency_ms") or {}).get("p50")
"""
    assert sorted(_inference_records_read_as_dicts(ast.parse(old))) == [3, 4, 5, 6, 7, 9]
    typed = """
for name, b in last.inference.items():
    lat = b.latency_ms or {}
    p50 = lat.get("p50")
mean = result.inference["torch"].mean_ms
backends = list(entry.inference.backends)
"""
    assert _inference_records_read_as_dicts(ast.parse(typed)) == []
    shared = "raw = {b: c.get('count') for b, c in sorted(as_dicts(result.inference).items())}"
    assert _inference_records_read_as_dicts(ast.parse(shared)) == []  # what code shared with verify takes


def test_no_module_reads_a_results_inference_records_as_dicts():
    """Outside ``runner.results`` and ``runner.verify``, a result's inference records are read
    through ``BackendRun``'s attributes; code shared with verify takes ``as_dicts(...)``."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE).parts
        if inside[0] in TYPED_INFERENCE_EXEMPT:
            continue
        offenders += [f"{path.relative_to(PACKAGE)}:{line}" for line in _inference_records_read_as_dicts(tree)]
    assert offenders == [], offenders
