"""How a run flows, held by reading the source tree: only the command line, studies and
benchmarks drive the pipeline module, a ``Result`` is made in one module, and the imports
between modules and packages form no loop."""

from __future__ import annotations

import ast
import builtins
import functools
import os
import re
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


# -- the command line is the top layer: nothing below it imports it -------------------------
# The one module outside runner/cli that may: ``python -m runner`` is the command line's entry.
CLI_IMPORT_EXEMPT = {"__main__.py": "``python -m runner`` runs runner.cli.main"}


def _absolute_imports(path: Path, tree: ast.AST) -> set[str]:
    """``_imports``, with relative imports (``from ..cli import x``) resolved against ``path``."""
    package = list(path.relative_to(PACKAGE.parent).parts[:-1])  # the package holding the file
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_module_below_the_command_line_imports_it():
    """runner/cli parses, calls one library function and renders: the library under it never
    reaches back up (a helper both need lives below runner/cli)."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] == "cli" or inside.as_posix() in CLI_IMPORT_EXEMPT:
            continue
        if any(i == "runner.cli" or i.startswith("runner.cli.") for i in _absolute_imports(path, tree)):
            offenders.append(inside.as_posix())
    assert offenders == [], f"these modules import runner.cli: {offenders}"


# -- the run is described by one type (runner.plan.RunPlan, in its states) --------------------
# What describes a run: a type or a dict that carries several of these is a second description.
RUN_FIELDS = {"image", "command", "train_dir", "eval_dir", "probe_dir", "result_dir", "scratch_dir", "seed",
              "seeds", "smoke", "cpus", "memory", "gpus", "timeout_s", "builder", "framework", "topk", "threads",
              "world_size", "final_weights", "data_digest", "processes_per_node", "run_name", "full_curve",
              "builder_seconds", "sensitivity_seed", "network", "env"}
RUN_DESCRIPTION_LIMIT = 4  # more shared names than this make a second description of the run
CONTAINER_SIDE = ("harness",)  # runs inside the entry's image, from its own command line
# One container, of any kind (build, fingerprint, training, evaluator, inference): what the
# engine seam is given, made from the plan by the stage that starts it.
ONE_CONTAINER = {"engine/interface.py:class ContainerSpec"}


def _descriptions(tree: ast.AST) -> list[tuple[int, str, set[str]]]:
    """Classes whose annotated fields, and dict literals whose string keys, name the run."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            label = f"class {node.name}"
        elif isinstance(node, ast.Dict):
            names = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            label = "dict"
        else:
            continue
        if len(shared := names & RUN_FIELDS) > RUN_DESCRIPTION_LIMIT:
            found.append((node.lineno, label, shared))
    return found


def test_the_description_check_finds_a_second_description():
    old = '''
class TrainingInputs:
    image: str
    command: list[str]
    train_dir: Path
    eval_dir: Path
    cpus: float
    gpus: int
plan = {"entry": e, "smoke": s, "data_digest": d, "image": i, "command": c, "env": v, "cpus": 1}
'''
    assert [(line, label) for line, label, _ in _descriptions(ast.parse(old))] == [(2, "class TrainingInputs"), (9, "dict")]
    assert _descriptions(ast.parse("class Outcome:\n    exit_code: int\n    image: str\n")) == []


def test_the_run_is_described_by_one_type():
    """``RunPlan`` (runner/plan.py, with its later states ``ResolvedPlan`` and ``SeedRun``) is
    the one description of a run: no other type or dict literal carries the run's image,
    data, limits, seed and folders."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.as_posix() == "plan.py" or inside.parts[0] in CONTAINER_SIDE:
            continue
        offenders += [f"{inside}:{line} {label} {sorted(names)}" for line, label, names in _descriptions(tree)
                      if f"{inside}:{label}" not in ONE_CONTAINER]
    assert offenders == [], offenders


# What each stage of a run is given: the plan, the engine, and the typed parts earlier stages
# produced (``TrainingRun``, ``TrainedModel``, ``plan.Prepared``), never the plan unpacked.
# The plan in the state the stage needs: what was asked (``RunPlan``), what the shared stages
# fixed (``ResolvedPlan``), one run of it (``SeedRun``).
PLAN_STATES = ("RunPlan", "ResolvedPlan", "SeedRun")
STAGES = {("run/training.py", "run_training"), ("run/training.py", "training_spec"),
          ("run/evaluator.py", "__init__"), ("run/node_agent.py", "__init__"),
          ("score/summary.py", "summarize_training"), ("results/assemble.py", "started"),
          ("inference/phase.py", "run_inference"), ("inference/phase.py", "inference_spec")}
STAGE_PARAMETERS = 4  # the engine, the plan and at most two typed parts (``self`` not counted)


def _parameters(node: ast.FunctionDef) -> list[ast.arg]:
    args = node.args
    every = args.posonlyargs + args.args + args.kwonlyargs
    return [a for a in every if a.arg not in ("self", "cls")]


def _takes_the_plan(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        a.annotation is not None and ast.unparse(a.annotation) in PLAN_STATES for a in _parameters(node))


def test_the_stages_receive_the_plan():
    """The training, scoring and inference stages, their containers' specs, the record's start,
    the evaluator and the node agents take the plan (a run's: ``SeedRun``), and few
    parameters beside it."""
    seen, long = set(), []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(tree):
            if _takes_the_plan(node) and (inside, node.name) in STAGES:
                seen.add((inside, node.name))
                if len(_parameters(node)) > STAGE_PARAMETERS:
                    long.append(f"{inside}:{node.name}({', '.join(a.arg for a in _parameters(node))})")
    assert seen == STAGES, sorted(STAGES - seen)
    assert long == [], long


# The stages of one run: what they are given is that run's plan (``SeedRun``), complete.
# (``runner.reproduce`` and the Slurm and verify packages take what completes a plan, or what
# they hold it against, beside it.)
STAGES_OF_A_RUN = ("run", "inference", "score", "results")
# A name the plan carries that means something else here, by function: why.
CARRIED_NAME_EXEMPT = {
    "engine": "the plan names the engine's kind; a stage is given the engine itself",
}
CARRIED_EXEMPT = {
    "run/node_agent.py:__init__ scratch": "the node's own staging folder; the plan's scratch is the runner host's",
}
LONG_SIGNATURE = 8  # more parameters than this: a group that belongs together wants a type


def _carried_by_the_plan() -> set[str]:
    """What ``runner/plan.py`` says a plan carries: the fields and properties of ``RunPlan``
    in its states and of its parts ``Limits`` and ``RunData``."""
    tree = ast.parse((PACKAGE / "plan.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in (*PLAN_STATES, "Limits", "RunData"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.FunctionDef) and any(
                        ast.unparse(d) == "property" for d in item.decorator_list):
                    names.add(item.name)
    return names - set(CARRIED_NAME_EXEMPT)


def _plan_and_what_it_carries(tree: ast.AST, carried: set[str]) -> list[tuple[str, str]]:
    """(function, parameter) for each parameter of a function that takes a ``RunPlan`` and
    beside it something the plan carries."""
    return [(node.name, a.arg) for node in ast.walk(tree) if _takes_the_plan(node)
            for a in _parameters(node) if a.arg in carried]


def test_the_carried_check_finds_the_plan_unpacked():
    carried = _carried_by_the_plan()
    assert {"image", "result_dir", "backends", "profile", "train_dir", "cpus", "output_dir"} <= carried
    assert "engine" not in carried
    old = """
def training_spec(plan: RunPlan, image: str | None = None, train_dir: Path | None = None) -> ContainerSpec: ...
def run_inference(client, entry, image_id, result_dir, staged, backends, profile, *, threads=None): ...
def infer(plan: RunPlan, shared: Shared, result: Result, *, backends: list[str]) -> None: ...
"""
    assert _plan_and_what_it_carries(ast.parse(old), carried) == [
        ("training_spec", "image"), ("training_spec", "train_dir"), ("infer", "backends")]
    new = "def run_inference(engine, plan: RunPlan, model: TrainedModel): ..."
    assert _plan_and_what_it_carries(ast.parse(new), carried) == []


def test_a_stage_given_the_plan_takes_nothing_the_plan_carries():
    """A stage of one run that takes the plan reads the image, the data, the limits, the
    backends and the folders from it: none of them travels beside it as a parameter."""
    carried, offenders = _carried_by_the_plan(), []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] not in STAGES_OF_A_RUN:
            continue
        offenders += [f"{inside.as_posix()}:{name} {arg}" for name, arg in _plan_and_what_it_carries(tree, carried)
                      if f"{inside.as_posix()}:{name} {arg}" not in CARRIED_EXEMPT]
    assert offenders == [], offenders


def test_the_stages_take_typed_parts_not_long_signatures():
    """No function of the pipeline (``runner.reproduce`` and the stages of one run) takes more
    than ``LONG_SIGNATURE`` parameters: what belongs together travels as one typed part (the
    plan, ``TrainingRun``, ``TrainedModel``, ``plan.Prepared``)."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] not in STAGES_OF_A_RUN and inside.as_posix() != "reproduce.py":
            continue
        offenders += [f"{inside.as_posix()}:{node.name} ({len(_parameters(node))})" for node in ast.walk(tree)
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and len(_parameters(node)) > LONG_SIGNATURE]
    assert offenders == [], offenders


# -- a Result is changed in one module (runner/results/assemble.py) -----------------------------
RESULT_MUTATORS = ("not_conforming", "ended")  # Result's own methods that change it
RESULT_NAMES = ("result", "r")  # what code calls a Result it holds


def _result_changes(tree: ast.AST) -> list[int]:
    """Lines that change a Result: ``x.not_conforming(...)``, ``x.ended(...)``, or an
    assignment to an attribute of a variable named like a result (``result.training = ...``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RESULT_MUTATORS:
            lines.append(node.lineno)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if target is not root and isinstance(root, ast.Name) and root.id in RESULT_NAMES:
                lines.append(node.lineno)
    return lines


def test_the_change_check_finds_a_result_changed_in_place():
    old = """
result.training = summary.training
result.not_conforming("x")
result.cost.training_usd = 1.0
r.ended("incomplete", "why")
result = Result.read(folder)
"""
    assert sorted(_result_changes(ast.parse(old))) == [2, 3, 4, 5]


def test_a_result_is_changed_only_where_it_is_assembled():
    """Each stage returns its own typed part; ``runner.results.assemble`` puts it in the
    record. Nothing else changes a ``Result``."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] == "results" or inside.parts[0] in CONTAINER_SIDE:
            continue
        offenders += [f"{inside}:{line}" for line in _result_changes(tree)]
    assert offenders == [], offenders


# -- progress goes through one reporter (runner.report), not a console handed down ------------
RENDERERS = ("cli", "bench", "leaderboard", "report.py")  # render tables and figures themselves


def test_no_console_is_handed_down_below_the_command_line():
    """Stages report progress through ``runner.report.reporter()``: no function below the
    command line takes a console."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] in RENDERERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in node.args.args + node.args.kwonlyargs]
                if "console" in names and node.name != "__init__":
                    offenders.append(f"{inside}:{node.lineno} {node.name}")
    assert offenders == [], offenders


# -- frameworks are one registry (runner/frameworks/<name>/), like tasks ------------------------
# Every spelling of a framework a dispatch table could key on: manifest names and import names.
FRAMEWORK_NAMES = {"pytorch", "torch", "tensorflow", "mxnet", "jax"}
FRAMEWORK_EXEMPT = {
    "harness/backends/__init__.py": "the backend table: keyed by backend names (torch, tensorflow, ...), one row "
                                    "each, whose framework column the registry checks",
}


def _names_in(node: ast.AST) -> list[str]:
    """The framework names a literal collection holds: its elements (a dict's keys), and the
    first item of each tuple in it (rows such as ``("torch", version)``)."""
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    found = []
    for item in items:
        if isinstance(item, ast.Tuple) and item.elts:
            item = item.elts[0]
        if isinstance(item, ast.Constant) and item.value in FRAMEWORK_NAMES:
            found.append(item.value)
    return found


def _framework_dispatch(tree: ast.AST) -> list[tuple[int, str]]:
    """Lines that keep a per-framework rule outside the registry: a literal list, tuple, set
    or dict holding two or more framework names; a module constant holding one; a comparison
    with one."""
    found = []
    collections = (ast.List, ast.Tuple, ast.Set, ast.Dict)
    constants = {id(node.value) for node in getattr(tree, "body", [])
                 if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, collections)
                 and all(isinstance(t, ast.Name) and t.id.isupper()
                         for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))}
    for node in ast.walk(tree):
        if isinstance(node, collections):
            names = _names_in(node)
            if len(names) >= 2 or (names and id(node) in constants):
                found.append((node.lineno, f"a table of {sorted(set(names))}"))
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                names = _names_in(operand) if isinstance(operand, collections) else (
                    [operand.value] if isinstance(operand, ast.Constant) and operand.value in FRAMEWORK_NAMES else [])
                if names:
                    found.append((node.lineno, f"a comparison with {names[0]!r}"))
    return sorted(found)


def test_the_framework_check_finds_a_rule_kept_outside_the_registry():
    old = """
FRAMEWORKS = ["pytorch", "tensorflow", "mxnet", "jax"]
names = {"torch": "PyTorch", "tensorflow": "TensorFlow", "mxnet": "MXNet"}
for key in ("torch", "tensorflow"):
    pass
rows = [("id", i), ("torch", t.get("version")), ("tensorflow", f.get("version"))]
CHANNEL_LAST = {"tensorflow"}
QUESTION_BACKENDS = ("torch",)
device = ["--device", "cuda"] if gpus and framework == "pytorch" else []
if args.framework != "pytorch":
    pass
"""
    assert [line for line, _ in _framework_dispatch(ast.parse(old))] == [2, 3, 4, 6, 7, 8, 9, 10]
    derived = """
FRAMEWORKS = list(FRAMEWORK_TABLE)
backends = field(default_factory=lambda: ["torch"])
label = {"torch": "PyTorch"}
loaded = TorchModel("pytorch", version, model)
device = get_framework(framework).gpu_device
parser.add_argument("--framework", default="pytorch")
"""
    assert _framework_dispatch(ast.parse(derived)) == []


def test_no_module_outside_the_framework_registry_keeps_a_per_framework_rule():
    """Adding a framework is one folder, ``runner/frameworks/<name>/`` (with its loader, the
    container's half, in ``runner/harness/frameworks/<name>.py``): no module elsewhere keys a
    table on, lists, or compares with a framework's name; it derives from ``FRAMEWORKS``."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] == "frameworks" or inside.as_posix() in FRAMEWORK_EXEMPT:
            continue
        offenders += [f"{inside}:{line} {what}" for line, what in _framework_dispatch(tree)]
    assert offenders == [], offenders


# -- one engine seam: only runner/engine talks to the Docker API -------------------------------
ENGINE_PACKAGE = "engine"  # runner.engine.interface.Engine; runner.engine.docker_api implements it


def _docker_imports(tree: ast.AST) -> list[int]:
    """Lines that import the ``docker`` SDK (``import docker``, ``import docker.errors``,
    ``from docker.types import ...``), at module level or inside a function."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "docker" or name.startswith("docker.") for name in names):
            lines.append(node.lineno)
    return lines


def test_the_docker_import_check_finds_every_form():
    old = """
import docker
import docker.errors as errors
from docker.types import DeviceRequest

def f():
    from docker.errors import APIError
    import os, docker
from . import docker_engine
from runner.fingerprint.docker_engine import capture_docker
import dockerfile_parse
"""
    assert _docker_imports(ast.parse(old)) == [2, 3, 4, 7, 8]


def test_only_the_engine_package_imports_docker():
    """Every stage is given a ``runner.engine.interface.Engine``: an engine that does not speak
    the Docker API (docs/engines.md) is one module in runner/engine, not a change to every stage."""
    offenders = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] == ENGINE_PACKAGE:
            continue
        offenders += [f"{inside}:{line}" for line in _docker_imports(tree)]
    assert offenders == [], f"these modules import docker (take an Engine instead): {offenders}"


# -- no hidden loops: the import graph, imports inside functions counted ----------------------
# Every import is an arrow, wherever it stands: at the top, inside a function, under
# ``if TYPE_CHECKING``. ``from a import b`` where ``a.b`` is a module is an arrow to ``a.b``;
# relative imports are resolved; an import of a package's submodule is not counted as an
# import of the package (its ``__init__``). Registries that load a module by a name they hold
# (``importlib.import_module``: task folders, backends, CLI commands) draw no arrow.
# A unit of the package graph is ``runner/<package>``, or a module at the top of runner/.
#
# Package arrows that may close a cycle, each with its reason; the goal is none, and any
# arrow that closes a new cycle fails the test.
PACKAGE_CYCLE_ALLOWED: dict[tuple[str, str], str] = {}
# An import inside a function says why it is not at the top, on its own line(s), in one of
# three forms: ``# lazy: heavy (torch)``, a library slow to import; ``# lazy: optional (mxnet:
# only in images with MXNet)``, one that may be missing (the harness runs in entry images that
# carry only their own framework); ``# lazy: start-up (runner --help)``, a module of the
# runner that would load with the command line and slow its start.
LAZY_REASON = re.compile(r"#\s*lazy:\s*(heavy|optional|start-up)\s+\([^)]+\)")


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_function(tree: ast.AST):
    """Each import statement in ``tree`` with whether it stands inside a function."""
    def walk(node: ast.AST, inside: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, inside
            yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


@functools.cache
def _import_graph(package: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """module -> {imported module of the same tree -> ["path:line", ...]}."""
    files = {_module_name(p, package): p for p in sorted(package.rglob("*.py")) if "__pycache__" not in p.parts}
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        arrows = graph.setdefault(name, {})
        for node, _ in _in_function(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = ".".join((here[:len(here) - node.level + 1] if node.level else []) + [node.module or ""]).strip(".")
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            for target in targets:
                while target and target not in files:  # ``import a.b.c`` of a name inside a module
                    target = target.rpartition(".")[0]
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                if target and target != name and where not in arrows.setdefault(target, []):
                    arrows[target].append(where)
    return graph


def _unit(module: str, package: Path = PACKAGE) -> str:
    """The package-graph unit of a module: ``runner/data``, or ``runner/plan.py`` at the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return f"{parts[0]}/__init__.py"
    if len(parts) == 2 and not (package / parts[1]).is_dir():
        return "/".join(parts) + ".py"
    return "/".join(parts[:2])


def _package_graph(graph: dict[str, dict[str, list[str]]], package: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    units: dict[str, dict[str, list[str]]] = {}
    for module, arrows in graph.items():
        for target, where in arrows.items():
            if (a := _unit(module, package)) != (b := _unit(target, package)):
                units.setdefault(a, {}).setdefault(b, []).extend(where)
    return units


def _cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan, iterative)."""
    nodes = sorted(set(graph) | {t for arrows in graph.values() for t in arrows})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def _describe(groups: list[list[str]], graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """Each group with its arrows and where they are imported, for the failure message."""
    lines = []
    for group in groups:
        lines.append(" <-> ".join(group))
        lines += [f"    {a} -> {b}: {', '.join(graph[a][b][:3])}" for a in group for b in sorted(graph.get(a, {}))
                  if b in group]
    return lines


def _imports_without_reason(path: Path, package: Path = PACKAGE) -> list[str]:
    """``path:line`` of each import inside a function whose lines carry no ``# lazy: <reason>``."""
    text = path.read_text()
    lines = text.splitlines()
    return [f"{path.relative_to(package)}:{node.lineno}" for node, inside in _in_function(ast.parse(text, str(path)))
            if inside and not any(LAZY_REASON.search(line) for line in lines[node.lineno - 1:node.end_lineno])]


def test_the_loop_check_finds_a_loop_closed_inside_a_function(tmp_path):
    package = tmp_path / "runner"
    for name, text in {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/tables.py": "from runner.high import entry\n",  # a submodule named in ``from ... import``
        "high/__init__.py": "",
        "high/entry.py": "def load():\n    from ..low import tables  # lazy: start-up\n",
        "plan.py": "import runner.low\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    graph = _import_graph(package)
    assert graph["runner.low.tables"] == {"runner.high.entry": [f"runner{os.sep}low{os.sep}tables.py:1"]}
    assert graph["runner.high.entry"] == {"runner.low.tables": [f"runner{os.sep}high{os.sep}entry.py:2"]}
    assert graph["runner.plan"] == {"runner.low": [f"runner{os.sep}plan.py:1"]}
    assert _cycles(graph) == [["runner.high.entry", "runner.low.tables"]]
    assert _cycles(_package_graph(graph, package)) == [["runner/high", "runner/low"]]
    assert _cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}}) == [["a", "b", "c"]]
    assert _unit("runner.plan") == "runner/plan.py" and _unit("runner.data.store") == "runner/data"
    assert _unit("runner.tasks.imagenet.train_tree") == "runner/tasks" and _unit("runner.data") == "runner/data"


def test_no_cycle_between_modules():
    """No module reaches itself through its imports, those inside functions included: a
    helper two modules share lives below both."""
    graph = _import_graph()
    groups = _cycles(graph)
    assert groups == [], "modules that import each other:\n" + "\n".join(_describe(groups, graph))


def test_no_cycle_between_packages():
    """The packages (and the modules at the top of runner/) form layers: none reaches back
    into a package that imports it, through any chain of imports, inside functions included.
    A name another package needs is public and lives in the lower one."""
    units = _package_graph(_import_graph())
    allowed = set(PACKAGE_CYCLE_ALLOWED)
    assert allowed <= {(a, b) for a, arrows in units.items() for b in arrows}, "an allowed arrow is gone: drop it"
    kept = {a: {b: where for b, where in arrows.items() if (a, b) not in allowed} for a, arrows in units.items()}
    groups = _cycles(kept)
    assert groups == [], "packages that import each other:\n" + "\n".join(_describe(groups, kept))


def test_the_reason_check_finds_an_import_inside_a_function_without_one(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import json\n\n\ndef f():\n    import torch  # lazy: heavy (torch)\n    import numpy\n"
                      "    from runner.data import (  # lazy: start-up (runner --help)\n        store,\n    )\n"
                      "    from runner import plan  # lazy:\n    import os  # noqa: F401\n"
                      "    import mxnet  # noqa: F401  # lazy: optional (mxnet: only in images with MXNet)\n"
                      "    import yaml  # lazy: it is nicer here\n")
    name = module.relative_to(tmp_path)
    assert _imports_without_reason(module, tmp_path) == [f"{name}:6", f"{name}:10", f"{name}:11", f"{name}:13"]


def test_every_import_inside_a_function_says_why():
    """An import stays inside a function only with its reason on its line (``LAZY_REASON``).
    Anything else belongs at the top of the module, where a reader sees what the module
    depends on."""
    offenders = []
    for path, _ in _modules():
        offenders += _imports_without_reason(path)
    assert offenders == [], f"imports inside functions without '# lazy: <reason>': {offenders}"


# -- one error family (runner.errors.RunnerError) ---------------------------------------------
# Every exception class under runner/ derives from RunnerError, so an error that escapes a
# command reaches the user as one line with a fix (runner.cli.main). The harness is exempt:
# it runs inside the entry's image, where the runner's package is not, with its own HarnessError.
ERROR_BASE = "RunnerError"


def _is_builtin_exception(name: str) -> bool:
    found = getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def _outside_the_family(classes: list[tuple[str, str, list[str]]]) -> list[str]:
    """``where`` of each exception class among ``classes`` ((where, name, base names)) that
    does not derive from ``ERROR_BASE``. Bases are matched by their last name (``safe_read.
    Unreadable`` is ``Unreadable``); a base from outside runner/ is an exception when it is a
    built-in one or its name says so (``APIError``)."""
    bases_of: dict[str, list[list[str]]] = {}
    for _, name, bases in classes:
        bases_of.setdefault(name, []).append(bases)

    @functools.cache
    def in_family(name: str) -> bool:
        return name == ERROR_BASE or any(in_family(b) for bases in bases_of.get(name, []) for b in bases)

    @functools.cache
    def is_exception(name: str) -> bool:
        if name not in bases_of:
            return _is_builtin_exception(name) or name.endswith(("Error", "Exception"))
        return any(is_exception(b) for bases in bases_of[name] for b in bases)

    return [where for where, name, bases in classes
            if name != ERROR_BASE and any(is_exception(b) for b in bases) and not any(in_family(b) for b in bases)]


def _classes(tree: ast.AST, label: str) -> list[tuple[str, str, list[str]]]:
    return [(f"{label}:{node.lineno} {node.name}", node.name, [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases])
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def test_the_family_check_finds_an_exception_outside_it():
    old = '''
class RunnerError(Exception): pass
class UserError(RunnerError): pass
class Refused(errors.UserError): pass
class Damaged(RunnerError, ValueError): pass
class Loose(Exception): pass
class AlsoLoose(ValueError): pass
class Child(Loose): pass
class Remote(docker.errors.APIError): pass
class Plain: pass
class Table(dict): pass
'''
    found = _outside_the_family(_classes(ast.parse(old), "m.py"))
    assert found == ["m.py:6 Loose", "m.py:7 AlsoLoose", "m.py:8 Child", "m.py:9 Remote"]


def test_every_error_is_one_of_the_family():
    """Every exception class the runner defines derives from ``runner.errors.RunnerError``:
    a problem and a fix, printed by the command line as one line, never a traceback."""
    classes = []
    for path, tree in _modules():
        inside = path.relative_to(PACKAGE)
        if inside.parts[0] not in CONTAINER_SIDE:
            classes += _classes(tree, inside.as_posix())
    assert sum(name == ERROR_BASE for _, name, _ in classes) == 1
    assert _outside_the_family(classes) == [], "exception classes outside runner.errors.RunnerError's family"


# -- the README says what the code does --------------------------------------------------------
README = PACKAGE.parent / "README.md"


def _readme_section(start: str) -> str:
    text = README.read_text()
    assert start in text, f"README.md has no {start!r}"
    return text[text.index(start):]


def _stage_table() -> list[tuple[str, list[str]]]:
    """The README's stage table: (stage, the repository paths its package column names)."""
    rows = []
    for line in _readme_section("| stage | package |").splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return rows


def _path_of_one_run() -> list[str]:
    """The first column of the README's "path of one run": ``module.function`` names."""
    block = _readme_section("**The path of one run**").split("```", 2)[1]
    return [m[1] for line in block.splitlines() if (m := re.match(r"\s*(\w[\w/]*\.\w+)\s", line))]


def _defined(name: str) -> bool:
    """Whether ``module.function`` (``cli/reproduce.run``: a module of a package) is a function
    defined at the top of that module under runner/."""
    module, function = name.rsplit(".", 1)
    path = PACKAGE / f"{module}.py"
    if not path.is_file():
        path = PACKAGE / module / "__init__.py"
    if not path.is_file():
        return False
    tree = ast.parse(path.read_text())
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == function for n in tree.body)


def test_the_readme_stage_table_names_the_packages_of_the_pipeline():
    """Every path the README's stage table names exists, and every package of runner/ that
    ``runner.reproduce`` imports (the pipeline's stages) has its row."""
    rows = _stage_table()
    named = {p for _, paths in rows for p in paths}
    missing = sorted(p for p in named if not (PACKAGE.parent / p).exists())
    assert missing == [], f"README's stage table names paths that do not exist: {missing}"
    tree = ast.parse((PACKAGE / "reproduce.py").read_text())
    imported = {name.split(".")[1] for name in _absolute_imports(PACKAGE / "reproduce.py", tree)
                if name.startswith("runner.") and (PACKAGE / name.split(".")[1]).is_dir()}
    unlisted = sorted(p for p in imported if f"runner/{p}" not in named)
    assert unlisted == [], f"runner.reproduce runs these packages, which README's stage table leaves out: {unlisted}"


# What ``prepare`` and ``run_once`` call that is no stage of the path, by name: why.
NOT_STAGES = {"harness_digest": "the harness's sha256, for Prepared", "inference_parts": "the inference phase's timings"}


def test_the_readme_path_of_one_run_names_functions_that_exist():
    """Each step of the README's "path of one run" names a function of runner/ that exists,
    and every stage ``runner.reproduce.prepare`` and ``run_once`` call is among them."""
    steps = _path_of_one_run()
    assert len(steps) >= 10, steps
    gone = [s for s in steps if not _defined(s)]
    assert gone == [], f"README's path of one run names what runner/ does not define: {gone}"
    tree = ast.parse((PACKAGE / "reproduce.py").read_text())
    called = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("prepare", "run_once"):
            called |= {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    unsaid = sorted(f"reproduce.{name}" for name in called & own if f"reproduce.{name}" not in steps
                    and not name.startswith("_") and name not in NOT_STAGES)
    assert unsaid == [], f"README's path of one run leaves out these stages: {unsaid}"
