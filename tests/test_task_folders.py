"""Adding a task touches one folder: each task is a package ``runner/tasks/<task>/`` that
declares the whole task interface, the registry finds the packages, and no module outside
them keys a table on, or compares with, a task's name. Held by reading the source tree, by
checking every declaration, and by adding a task folder to a copy of the package."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.tasks import TASKS, Task
from runner.tasks.base import resolve

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "runner"
TASK_DIRS = sorted(p.parent for p in (PACKAGE / "tasks").glob("*/__init__.py"))

# (module under runner/, the literal) -> why it may name a task there. A literal that *is* a
# task's name counts; prose that mentions one (CLI help, messages, ``entries/mnist-cnn-cpu``
# as an example) does not, so nothing needs listing today. Keep it that way: a table keyed
# by task belongs in the task's declaration (runner/tasks/base.py's Task).
ALLOWED: dict[tuple[str, str], str] = {}

MAKER_PARAMS = ["stage", "rng", "task", "n_train", "n_eval"]
METRIC_FIELDS = {"top1": "top1Accuracy", "top5": "top5Accuracy", "f1": "f1Score"}
TREE_FUNCTIONS = ("import_tree", "load_tree", "check_tree", "is_train_source", "devkit_classes")


def _task_names() -> set[str]:
    """Every spelling that names a task: its id, its package's name, its DAWNBench names."""
    names = {d.name for d in TASK_DIRS}
    for task in TASKS.values():
        names |= {task.id, task.id.replace("-", "_")}
        for other in (task.dawnbench, task.dawnbench_format.folder if task.dawnbench_format else None):
            if other:
                names |= {other, other.lower()}
    return names


def test_no_module_outside_a_task_folder_names_a_task():
    names = _task_names()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts or any(d in path.parents for d in TASK_DIRS):
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                    and (rel, node.value) not in ALLOWED):
                offenders.append(f"{rel}:{node.lineno} {node.value!r}")
    assert offenders == [], ("these modules name a task; derive the table from runner.tasks.TASKS "
                             f"and declare the fact in the task's folder: {offenders}")


def problems(task: Task) -> list[str]:
    """What ``task``'s declaration lacks of the interface the rest of the runner derives from."""
    found = []
    if not task.probe.strip():
        found.append("no probe (or the reason it has none)")
    if task.inputs == "images" and (task.input_shape is None or not task.num_classes):
        found.append("an image task needs input_shape and num_classes")
    if task.num_classes is None and task.chance_score is None:
        found.append("a task without classes needs chance_score")
    source = task.source
    if source is None:
        found.append("no source (DataSource)")
    else:
        if not source.how_to_stage.strip() or task.id not in source.how_to_stage:
            found.append("source.how_to_stage does not say how to stage it")
        module = source.load()
        if source.imported:
            params = inspect.signature(module.import_files).parameters
            if list(params)[:2] != ["path", "target"] or "expected" not in params:
                found.append("source module's import_files(path, target, *, expected, ...) is missing")
            if not set(source.extras) <= set(params) or not hasattr(module, "OFFICIAL"):
                found.append("source module lacks OFFICIAL or an extra's keyword")
        elif list(inspect.signature(getattr(module, "prepare", lambda: None)).parameters) != ["target"]:
            found.append("source module's prepare(target) is missing")
        if (source.tree is None) != (source.tree_module is None):
            found.append("a training tree needs both its folder and its module")
        if source.tree_module is not None:
            tree = source.load_tree()
            found += [f"tree module lacks {name}" for name in (*TREE_FUNCTIONS, "OFFICIAL") if not hasattr(tree, name)]
    if task.synthetic is None:
        found.append("no synthetic stand-in maker")
    elif list(inspect.signature(task.synthetic_maker()).parameters) != MAKER_PARAMS:
        found.append(f"synthetic maker's parameters are not {MAKER_PARAMS}")
    fmt = task.dawnbench_format
    if fmt is None:
        found.append("no DAWNBench format (folder, metric field, percent)")
    elif fmt.metric_field != METRIC_FIELDS.get(task.metric) or fmt.metric_field not in task.curve_columns:
        found.append("the DAWNBench metric field is not the task's metric")
    from runner.mlperf.training_log import TRAINING_BENCHMARKS_400

    if task.mlperf_training not in TRAINING_BENCHMARKS_400:
        found.append("no MLPerf training benchmark to log under")
    if not task.public_train_size or task.public_train_size <= 0:
        found.append("no public training-set size")
    ladder = list(task.threshold_ladder)
    if not ladder or ladder != sorted(ladder) or ladder[-1] < task.threshold_percent:
        found.append("the threshold ladder must rise to (or past) the threshold")
    if task.public_inputs and task.smoke_words is None:
        found.append("public inputs but no smoke_words (the words their smoke stand-ins cover)")
    try:
        scorer = resolve(task.scorer)
    except (ImportError, AttributeError, ValueError):
        found.append(f"the scorer {task.scorer!r} cannot be loaded")
    else:
        if list(inspect.signature(scorer).parameters)[:1] != ["task"] or len(inspect.signature(scorer).parameters) != 3:
            found.append("the scorer is not f(task, predictions, labels)")
    return found


def test_a_task_with_public_inputs_gives_the_words_of_its_smoke_set(tmp_path):
    """SQuAD's smoke GloVe stand-in covers exactly the synthetic set's words, and the task
    folder says which (a task without public inputs needs none)."""
    from runner.data.synthetic import synthetic

    squad = next(t for t in TASKS.values() if t.public_inputs)
    staged = synthetic(squad.id, tmp_path / "squad", n_train=8, n_eval=4, seed=0)
    words = squad.smoke_vocabulary(staged)
    assert words == sorted(set(words)) and "Which" in words and "?" in words
    assert problems(dataclasses.replace(squad, smoke_words=None)) != []
    assert all(t.smoke_vocabulary(staged) is None for t in TASKS.values() if not t.public_inputs)


def test_each_task_scores_its_own_synthetic_labels_perfectly_through_its_scorer(tmp_path):
    """Scoring goes through the task's declared scorer: the labels as predictions score 1.0
    on the primary metric, for images and questions alike."""
    from runner.data.synthetic import synthetic

    for task in TASKS.values():
        staged = synthetic(task.id, tmp_path / task.id, n_train=32, n_eval=20, seed=1)
        labels = staged.load_eval_labels()
        if isinstance(labels, dict):
            predictions = {qid: answers[0] for qid, answers in labels.items()}
        else:
            predictions = labels if task.topk == 1 else __import__("numpy").stack([labels] * task.topk, axis=1)
        assert task.score(predictions, labels)[task.metric] == pytest.approx(1.0), task.id


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_each_task_declares_the_whole_interface(task_id):
    assert problems(TASKS[task_id]) == []


@pytest.mark.parametrize("missing", ["synthetic", "source", "dawnbench_format", "mlperf_training",
                                     "public_train_size", "threshold_ladder", "scorer"])
def test_the_interface_check_sees_a_missing_fact(missing):
    task = next(iter(TASKS.values()))
    gone = {"threshold_ladder": (), "scorer": "runner.tasks.metrics:no_such_scorer"}
    lacking = dataclasses.replace(task, **{missing: gone.get(missing)})
    assert problems(lacking) != []
    no_help = dataclasses.replace(task, source=dataclasses.replace(task.source, how_to_stage=""))
    assert any("how_to_stage" in p for p in problems(no_help))


def test_every_task_table_is_derived_from_the_tasks():
    from runner import data
    from runner.dawnbench.tasks import BY_TASK_ID
    from runner.mlperf.from_result import PUBLIC_TRAIN_SIZE
    from runner.mlperf.training_log import TASK_BENCHMARK
    from runner.study.threshold import DEFAULT_LADDERS

    for table in (data.SOURCES, data.HOW_TO_STAGE, BY_TASK_ID, PUBLIC_TRAIN_SIZE, TASK_BENCHMARK, DEFAULT_LADDERS):
        assert set(table) == set(TASKS)
    assert set(data.PREPARABLE) | set(data.IMPORTABLE) == set(TASKS)
    assert data.TREE_TASKS == {t.id: t.source.tree for t in TASKS.values() if t.source.tree}


def test_discovery_finds_exactly_the_task_folders():
    """Every folder under runner/tasks is a task package whose TASK is registered, once."""
    import importlib

    folders = sorted(p for p in (PACKAGE / "tasks").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == TASK_DIRS, "a folder under runner/tasks without an __init__.py"
    declared = [importlib.import_module(f"runner.tasks.{d.name}").TASK for d in TASK_DIRS]
    assert sorted(t.id for t in declared) == sorted(TASKS)
    assert all(TASKS[t.id] is t for t in declared)


TOY_INIT = '''\
"""A toy task: what one new folder holds."""

from runner.tasks.base import DataSource, DawnbenchFormat, Task

TASK = Task(
    "toy-blocks", "top1", 0.9, 64, 4, (1, 8, 8), ("top1Accuracy",),
    listed=99,
    source=DataSource(f"{__name__}.source", imported=False, how_to_stage="run `runner data prepare toy-blocks`"),
    synthetic="runner.staging.blocks:stage_arrays",
    dawnbench_format=DawnbenchFormat("ToyBlocks", "top1Accuracy", percent=True),
    mlperf_training="resnet",
    public_train_size=256,
    threshold_ladder=(80.0, 90.0),
)
'''
TOY_SOURCE = '''\
"""The toy task's data: made, not fetched."""


def prepare(target):
    raise NotImplementedError
'''
TOY_RULES = """\
threshold = 0.9
descent_similarity = 0.1
cross_seed_mistakes = 0.9
cross_seed_weights = 0.5
probe_gap = 0.1
probe_items = 2000
evidence_fraction = 1.5
information_budget = 32768
"""
TOY_CHECK = '''\
import json, sys
from pathlib import Path

import runner
from runner import data
from runner.dawnbench.tasks import BY_TASK_ID
from runner.manifest.schema import ENTRY_SCHEMA
from runner.mlperf.from_result import PUBLIC_TRAIN_SIZE
from runner.mlperf.training_log import TASK_BENCHMARK
from runner.study.threshold import DEFAULT_LADDERS
from runner.tasks import get_task
import test_task_folders

staged = data.synthetic("toy-blocks", Path(sys.argv[1]), n_train=32, n_eval=16, seed=0)
print(json.dumps({
    "package": runner.__file__,
    "problems": test_task_folders.problems(get_task("toy-blocks")),
    "tables": [name for name, table in [
        ("SOURCES", data.SOURCES), ("PREPARABLE", data.PREPARABLE), ("HOW_TO_STAGE", data.HOW_TO_STAGE),
        ("FORMAT", BY_TASK_ID), ("PUBLIC_TRAIN_SIZE", PUBLIC_TRAIN_SIZE), ("TASK_BENCHMARK", TASK_BENCHMARK),
        ("DEFAULT_LADDERS", DEFAULT_LADDERS), ("manifest enum", ENTRY_SCHEMA["properties"]["task"]["enum"]),
    ] if "toy-blocks" in table],
    "staged": [staged.task, staged.counts, len(staged.load_eval_labels())],
}))
'''


def test_a_new_task_is_one_folder(tmp_path):
    """A copy of the package with one more folder under runner/tasks: the task is registered,
    every derived table holds it, its declaration passes the interface check, and its
    synthetic stand-in stages."""
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "runner", ignore=shutil.ignore_patterns("__pycache__"))
    toy = copy / "runner" / "tasks" / "toy_blocks"
    toy.mkdir()
    (toy / "__init__.py").write_text(TOY_INIT)
    (toy / "source.py").write_text(TOY_SOURCE)
    (toy / "rules").mkdir()
    (toy / "rules" / "1.toml").write_text(TOY_RULES)
    (tmp_path / "check.py").write_text(textwrap.dedent(TOY_CHECK))
    done = subprocess.run([sys.executable, str(tmp_path / "check.py"), str(tmp_path / "staged")],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": f"{copy}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["package"].startswith(str(copy))
    assert report["problems"] == []
    assert report["tables"] == ["SOURCES", "PREPARABLE", "HOW_TO_STAGE", "FORMAT", "PUBLIC_TRAIN_SIZE",
                                "TASK_BENCHMARK", "DEFAULT_LADDERS", "manifest enum"]
    assert report["staged"] == ["toy-blocks", {"train": 32, "eval": 16}, 16]
