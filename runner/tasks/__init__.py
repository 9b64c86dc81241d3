"""The benchmark tasks: what is scored, against which threshold, on how many items.

Each task is one package here, ``runner/tasks/<name>/``, whose ``__init__`` declares its
``TASK`` (``runner.tasks.base.Task``), whose ``rules/<version>.toml`` hold the versions of its
rules (``runner.tasks.rules``: threshold and limits; the newest applies today) and whose
modules stage its data, make its synthetic stand-in and score it where that is its own. The registry finds the packages; every
per-task table elsewhere (data sources, staging help, DAWNBench formats, MLPerf names,
threshold ladders) is derived from ``TASKS``, so adding a task touches one folder.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from runner.errors import UserError
from runner.tasks.base import IMAGES, QUESTIONS, DataSource, DawnbenchFormat, ExtraSet, PublicInput, Task
from runner.tasks.rules import RULES_DIR, Rules, load_rules

__all__ = ["TASKS", "Task", "Rules", "PublicInput", "DataSource", "DawnbenchFormat", "ExtraSet", "IMAGES", "QUESTIONS",
           "get_task", "public_input", "extra_set", "discover"]


def discover(path: Iterable[str], prefix: str) -> dict[str, Task]:
    """Every task package under ``path`` (each subpackage must declare ``TASK`` and its rules),
    by task id, in their ``listed`` order, each under its newest rules."""
    found: dict[str, Task] = {}
    for info in pkgutil.iter_modules(list(path), prefix):
        if not info.ispkg:
            continue  # base, metrics: the registry's own modules
        module = importlib.import_module(info.name)
        task = getattr(module, "TASK", None)
        if not isinstance(task, Task):
            raise ImportError(f"task package {info.name} declares no TASK (a runner.tasks.base.Task)")
        if module.__file__ is None:
            raise ImportError(f"task package {info.name} has no __init__.py (its rules are read beside it)")
        task = with_rules(task, Path(module.__file__).parent / RULES_DIR)
        module.__dict__["TASK"] = task  # the package's task under its newest rules, as discovery returns it
        if task.id in found:
            raise ImportError(f"task id {task.id!r} is declared twice (again by {info.name})")
        found[task.id] = task
    return dict(sorted(found.items(), key=lambda item: (item[1].listed, item[0])))


def with_rules(task: Task, folder: Path) -> Task:
    """``task`` under the newest of the rules in ``folder``, knowing every version. The
    declaration states today's threshold too (it reads as the task's): the two must agree."""
    history = load_rules(folder, task.id)
    today = history[-1]
    if task.threshold != today.threshold:
        raise ImportError(f"task {task.id} declares threshold {task.threshold}, its newest rules "
                          f"({folder}/{today.version}.toml) {today.threshold}: declare the newest's")
    return replace(task.under(today), rules_history=history)


TASKS: dict[str, Task] = discover(__path__, f"{__name__}.")


def public_input(name: str) -> PublicInput:
    """A declared public input by name, whichever task declares it."""
    for task in TASKS.values():
        for item in task.public_inputs:
            if item.name == name:
                return item
    known = sorted({i.name for t in TASKS.values() for i in t.public_inputs})
    raise UserError(f"no public input named {name!r}", f"use one of: {', '.join(known)}")


def extra_set(name: str) -> tuple[Task, ExtraSet]:
    """A declared second test set by name, with the task that declares it."""
    for task in TASKS.values():
        for item in task.extra_sets:
            if item.name == name:
                return task, item
    known = sorted(i.name for t in TASKS.values() for i in t.extra_sets)
    raise UserError(f"no second test set named {name!r}", f"use one of: {', '.join(known)}")


def get_task(task_id: str) -> Task:
    try:
        return TASKS[task_id]
    except KeyError:
        raise UserError(
            f"unknown task '{task_id}'", f"use one of: {', '.join(sorted(TASKS))}"
        ) from None
