"""``runner export dawnbench RESULT``: a reproduced result in DAWNBench's submission format.

Writes what dawn-bench-entries holds, laid out as that repository is:
``<Task>/train/<name>.json`` with ``<name>.tsv`` beside it (``epoch hours <accuracy>``),
and one ``<Task>/inference/<name>.json`` per backend that passed the accuracy gate. Names
follow the README: ``[author]_[model]_[hardware tag]_[framework]``.
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path

from securesystemslib.signer import SSlibKey

from runner.bundle.open import open_results
from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import COST_ITEMS, FormatTask, format_task
from runner.dawnbench.tsv import FormatError, read_curve, write_curve
from runner.errors import UserError
from runner.results.view import ResultRecord, read_record
from runner.verify.verdict import judge, require_counts

VERSION = "v1.0"


def file_name(*parts: str) -> str:
    """README naming: parts joined by ``_``, each without spaces or path characters."""
    return "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", p.strip()).strip("-") or "unknown" for p in parts)


def _refuse_unfit(record: ResultRecord) -> None:
    """A run that counts may still have no figure: it never reached the threshold."""
    if not record.reached or record.tta_seconds is None:
        raise UserError(
            f"{record.folder} never reached the threshold; DAWNBench takes only runs that do",
            "export a run whose result.json says training.reached",
        )


def _curve(record: ResultRecord, ft: FormatTask) -> tuple[tuple[str, ...], list[CurvePoint]]:
    try:
        points = read_curve(record.curve_path(), (ft.metric_field,))
    except FormatError as err:
        raise UserError(err.problem, "the result's curve.tsv is damaged; re-run or restore it") from None
    columns = tuple(c for c in ft.columns if all(c in p.scores for p in points))
    if not ft.percent and any(p.scores[ft.metric_field] > 1 for p in points):
        # Results written before curve.tsv held F1 as DAWNBench's fraction.
        points = [CurvePoint(p.epoch, p.hours, {**p.scores, ft.metric_field: p.scores[ft.metric_field] / 100}) for p in points]
    return columns, points


def _common(record: ResultRecord, author: str, email: str, hardware: str, framework: str) -> dict:
    out = {
        "version": VERSION,
        "author": author,
        "authorEmail": email,
        "framework": framework,
        "model": record.model,
        "hardware": hardware,
        "timestamp": record.date,
    }
    if record.source:
        out["codeURL"] = record.source
    return out


def _runner_misc(record: ResultRecord, **extra) -> dict:
    return {"runner": {
        "entry": record.entry, "run_id": record.run_id, "conforming": record.conforming,
        "nonconforming_reasons": record.nonconforming_reasons, "hardware_profile": record.profile,
        "tta_seconds": record.tta_seconds, **extra,
    }}


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4) + "\n")
    return path


def export_dawnbench(result: Path, out: Path, author: str, email: str = "", hardware: str | None = None,
                     *, trusted_keys: list[SSlibKey]) -> list[Path]:
    """Write the training JSON + TSV and the inference JSONs of ``result`` (a result folder,
    or a bundle's ``.tar.gz``, opened safely) under ``out``: only a run that counts
    (``runner.verify.verdict``) is a submission; any other is refused before anything is
    written."""
    with ExitStack() as stack:
        (folder,) = open_results([result], stack)
        record = read_record(folder)  # a missing or malformed result.json says so first
        require_counts(judge(Path(result), trusted_keys), f"{result} is not exported")
        _refuse_unfit(record)
        return _export(record, out, author, email, hardware)


def _export(record: ResultRecord, out: Path, author: str, email: str, hardware: str | None) -> list[Path]:
    ft = format_task(record.task)
    hardware = hardware or f"runner hardware profile {record.profile}"
    columns, points = _curve(record, ft)
    written = []

    name = file_name(author, record.model, record.profile or "host", record.framework)
    train = _common(record, author, email, hardware, record.framework)
    train["costPerHour"] = record.usd_per_hour
    train["misc"] = _runner_misc(record, joules_to_accuracy=record.joules_to_accuracy)
    written.append(_write(out / ft.folder / "train" / f"{name}.json", train))
    tsv = out / ft.folder / "train" / f"{name}.tsv"
    write_curve(tsv, columns, points)
    written.append(tsv)

    for backend in record.gated_backends():
        framework = " ".join(x for x in (backend.name, backend.version) if x)
        data = _common(record, author, email, hardware, framework)
        data["latency"] = backend.mean_ms
        data["cost"] = None if backend.cost_per_10k_usd is None else backend.cost_per_10k_usd / COST_ITEMS
        score = (backend.scores or {}).get(record.metric)
        data[ft.metric_field] = None if score is None else ft.from_fraction(score)
        data["misc"] = _runner_misc(record, backend=backend.name, latency_ms=backend.latency_ms,
                                    joules_per_10k_items=backend.joules_per_10k)
        bname = file_name(author, record.model, record.profile or "host", backend.name)
        written.append(_write(out / ft.folder / "inference" / f"{bname}.json", data))
    return written
