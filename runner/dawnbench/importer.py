"""``runner import dawnbench PATH``: DAWNBench submission files -> claims.

PATH is one JSON file or a folder walked recursively (the layout of
stanford-futuredata/dawn-bench-entries: ``<Task>/{train,inference}/<name>.json``, a
training JSON with its ``<name>.tsv`` beside it). Every variant that repository holds is
read; a file that cannot be read is reported with its path and what is wrong, one line.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

from runner.dawnbench.claims import KINDS, Claim, CurvePoint
from runner.dawnbench.tasks import BY_FOLDER, BY_METRIC_FIELD, COST_ITEMS, FORMAT_TASKS, FormatTask, format_task
from runner.dawnbench.tsv import FormatError, read_curve, read_text
from runner.errors import UserError
from runner.events import bounded_json
from runner.manifest.untrusted_yaml import MAX_NUMBER

TEXT_FIELDS = ("author", "model", "hardware", "framework", "timestamp")
# Counted kinds of files, as the closing figures name them.
TRAIN_JSON, INFERENCE_JSON, TSV = "train JSON", "inference JSON", "TSV"


@dataclass
class ImportReport:
    claims: list[Claim] = field(default_factory=list)
    read: Counter = field(default_factory=Counter)  # TRAIN_JSON / INFERENCE_JSON / TSV -> files read
    failures: list[FormatError] = field(default_factory=list)


def import_dawnbench(path: Path, task_id: str | None = None) -> ImportReport:
    """Read every submission under ``path``; a file that cannot be read is collected in
    ``failures`` (the others are still read), a missing ``path`` is a UserError."""
    path = Path(path)
    report = ImportReport()
    if not path.exists():
        raise UserError(f"no such file or folder: {path}", "pass a DAWNBench submission JSON or a folder of them")
    if path.is_file():
        if path.suffix.lower() == ".tsv":
            path = path.with_suffix(".json")  # a curve is read through its training JSON
        files, root = [path], path.parent
    else:
        files, root = sorted(p for p in path.rglob("*") if p.suffix.lower() == ".json" and p.is_file()), path
    paired: set[Path] = set()
    for file in files:
        try:
            claim, tsv = _read_submission(file, root, task_id)
        except FormatError as err:
            report.failures.append(err)
            continue
        report.claims.append(claim)
        report.read[TRAIN_JSON if claim.kind == "train" else INFERENCE_JSON] += 1
        if tsv is not None:
            paired.add(tsv.resolve())
            report.read[TSV] += 1
    if path.is_dir():
        for tsv in sorted(p for p in path.rglob("*") if p.suffix.lower() == ".tsv"):
            if tsv.resolve() not in paired and not tsv.with_suffix(".json").exists():
                report.failures.append(FormatError(tsv, "a curve without its training JSON", f"add {tsv.with_suffix('.json').name} beside it"))
    return report


def _load_json(path: Path) -> dict:
    try:  # bounded: depth, integer digits and non-finite numbers (NaN, 1e400) are refused
        data = bounded_json(read_text(path))
    except json.JSONDecodeError as err:
        raise FormatError(path, f"not valid JSON (line {err.lineno} column {err.colno}: {err.msg})") from None
    except ValueError as err:  # the limits: a number or nesting no submission holds
        raise FormatError(path, f"refused: {err}") from None
    if not isinstance(data, dict):
        raise FormatError(path, f"a JSON {type(data).__name__}, not an object of submission fields")
    return data


def _kind(path: Path, data: dict) -> str:
    folder = path.parent.name.lower()
    if folder in KINDS:
        return folder
    if "latency" in data:
        return "inference"
    if path.with_suffix(".tsv").exists():
        return "train"
    raise FormatError(path, "neither under train/ nor inference/, with no latency field and no TSV beside it",
                      "put it under <Task>/train/ or <Task>/inference/ as in dawn-bench-entries")


def _format_task(path: Path, data: dict, task_id: str | None) -> FormatTask:
    """--task if given; else the folder (``<Task>/<kind>/<file>``: parent or grandparent);
    else the accuracy field when it names one task."""
    if task_id:
        return format_task(task_id)
    for folder in (path.parent.name, path.parent.parent.name):
        if folder.lower() in BY_FOLDER:
            return BY_FOLDER[folder.lower()]
    for metric_field, task in BY_METRIC_FIELD.items():
        if metric_field in data:
            return task
    folders = "/".join(t.folder for t in FORMAT_TASKS)
    raise FormatError(path, f"cannot tell the task: it is under no {folders} folder",
                      "put it under its task's folder, or pass --task")


def _text(path: Path, data: dict, name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if name not in data else f"{value!r}"
        raise FormatError(path, f"field {name!r} must be a non-empty string (got {got})")
    return value.strip()


def _number(path: Path, data: dict, name: str, required: bool = False) -> float | None:
    """A number, or None when the field is absent or null (costs are optional)."""
    value = data.get(name)
    if value is None:
        if required:
            raise FormatError(path, f"field {name!r} is {'missing' if name not in data else 'null'}; it must be a number")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(path, f"field {name!r} is {value!r}, not a number")
    if value < 0:
        raise FormatError(path, f"field {name!r} is negative ({value})")
    if value > MAX_NUMBER:  # beyond any latency, cost or accuracy: it would overflow the tables
        raise FormatError(path, f"field {name!r} is {value:.3g}, larger than {MAX_NUMBER:g}")
    return float(value)


def _date(path: Path, text: str) -> str:
    try:  # strptime accepts unpadded months and days ("2019-7-22")
        return datetime.strptime(text, "%Y-%m-%d").date().isoformat()
    except ValueError:
        raise FormatError(path, f"timestamp {text!r} is not a date yyyy-mm-dd") from None


def _accuracy(path: Path, ft: FormatTask, value: float | None, notes: list[str]) -> float | None:
    """The metric as a fraction. One SQuAD file gives F1 in percent (82.52): read as such."""
    if value is None:
        return None
    if not ft.percent and value > 1:
        notes.append(f"{ft.metric_field} {value} is in percent, not a fraction: read as {value / 100:.6g}")
        return value / 100
    if ft.percent and value > 100:
        raise FormatError(path, f"{ft.metric_field} is {value}, above 100 percent")
    return ft.to_fraction(value)


def _read_submission(path: Path, root: Path, task_id: str | None) -> tuple[Claim, Path | None]:
    data = _load_json(path)
    kind = _kind(path, data)
    ft = _format_task(path.resolve(), data, task_id)
    text = {name: _text(path, data, name) for name in TEXT_FIELDS}
    code_url = data.get("codeURL") if isinstance(data.get("codeURL"), str) else None
    # misc is free-form (an object in the README, a string in one published file): not read.
    common = partial(
        Claim, name=path.stem, task=ft.task_id, kind=kind, team=text["author"], model=text["model"],
        hardware=text["hardware"], framework=text["framework"], date=_date(path, text["timestamp"]),
        source=_relative(path, root), code_url=code_url,
    )
    notes: list[str] = []
    if kind == "inference":
        latency = _number(path, data, "latency")
        cost = _number(path, data, "cost")
        if latency is None and cost is None:
            raise FormatError(path, "an inference file with neither 'latency' nor 'cost'")
        raw = _number(path, data, ft.metric_field)
        if raw is None:
            raw = _number(path, data, "accuracy")  # the README's CIFAR10 example names it so
        accuracy = _accuracy(path, ft, raw, notes)
        per_10k = None if cost is None else cost * COST_ITEMS  # the files give USD per item
        return common(latency_ms=latency, cost_per_10k_usd=per_10k, accuracy=accuracy, notes=notes), None

    tsv = path.with_suffix(".tsv")
    if not tsv.exists():
        raise FormatError(path, f"a training file without its curve {tsv.name} beside it", f"add {tsv.name} (epoch hours {ft.metric_field})")
    curve = _fractional_f1(tsv, ft, read_curve(tsv, (ft.metric_field,)), notes)
    cost_per_hour = _number(path, data, "costPerHour")
    crossing = _first_crossing(ft, curve)
    tta_hours = None if crossing is None else crossing.hours
    if crossing is None:
        best = max(p.scores[ft.metric_field] for p in curve)
        notes.append(f"no row of {tsv.name} reaches {ft.metric_field} {ft.threshold} (best {best})")
    return common(
        tta_hours=tta_hours,
        cost_per_hour_usd=cost_per_hour,
        cost_usd=None if tta_hours is None or cost_per_hour is None else tta_hours * cost_per_hour,
        curve=curve,
        accuracy=None if crossing is None else ft.to_fraction(crossing.scores[ft.metric_field]),
        notes=notes,
    ), tsv


def _fractional_f1(tsv: Path, ft: FormatTask, curve: list[CurvePoint], notes: list[str]) -> list[CurvePoint]:
    if ft.percent or all(p.scores[ft.metric_field] <= 1 for p in curve):
        return curve
    notes.append(f"{tsv.name}: {ft.metric_field} in percent, read as fractions")
    return [CurvePoint(p.epoch, p.hours, {**p.scores, ft.metric_field: p.scores[ft.metric_field] / 100}) for p in curve]


def _first_crossing(ft: FormatTask, curve: list[CurvePoint]) -> CurvePoint | None:
    """DAWNBench's TTA: the first row (in file order) whose metric meets the threshold."""
    for point in curve:
        if ft.task.meets(ft.to_fraction(point.scores[ft.metric_field])):
            return point
    return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve().parent).as_posix()
    except ValueError:
        return str(path)
