"""The runner's own record of what it measured, kept outside the result folder.

When a run ends the runner writes ``<home>/measured/<run_id>.json``: the sha256 of every
file of the folder (``runner.bundle.filelist.file_digests``: everything but ``bundle/``), the
run id, the entry, the folder it was written in, and its record (so a change can be named
field by field). The run is finished once the reproduction's runs are compared across seeds
(``runner.bundle.finish_folder``): its files must still be the ones recorded
(``require_unchanged``), its result.json is written once and the folder signed once, and the
record is brought up to date with what was signed. Deleting ``bundle/`` in the folder changes
nothing here.

A later signature (``runner bundle sign``, ``runner reinfer``) is given only to a folder
whose files are still the ones measured (``require_measured``), less what the signing
command itself rewrites, and is refused when this host never measured the run. Each
legitimate signature then updates the record, so it stays the runner's own measurement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from runner import paths
from runner.bundle.claim import differences
from runner.bundle.filelist import file_digests
from runner.errors import UserError
from runner.results.folder import write_json
from runner.results.record import RESULT_FILE
from runner.safe_read import read_json_object

VERSION = 1
SAFE_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
SHOWN = 6  # changes named in a refusal before "and N more"


def measured_dir() -> Path:
    return paths.home() / "measured"


def _read_json(path: Path) -> dict | None:
    """A record or result.json read safely (runner.safe_read); None when absent or unreadable."""
    try:
        return read_json_object(path, "json")
    except UserError:
        return None


def _id_of(result: dict | None) -> str | None:
    """The run id a result names; None when it names none that is a file name."""
    run_id = (result or {}).get("run_id")
    return run_id if isinstance(run_id, str) and SAFE_RUN_ID.fullmatch(run_id) else None


def _run_id(folder: Path) -> str | None:
    """The folder's run id, from its result.json."""
    return _id_of(_read_json(Path(folder) / RESULT_FILE))


def record_path(run_id: str) -> Path:
    if not SAFE_RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not a file name")
    return measured_dir() / f"{run_id}.json"


def record_measured(folder: Path, files: Mapping[str, str] | None = None, result: dict | None = None) -> Path:
    """Write (atomically) the runner's record of ``folder`` as it measured it: ``files``
    (path -> sha256, as the bundle signed them; hashed here when not given), its run id,
    entry and path, and result.json as it is (``result``: the run's record before it is
    written, at the end of a run that is finished later). Called as each run ends, where the
    runner signs a run it ran, and after each later signature it allowed. Returns the
    record's path."""
    folder = Path(folder).resolve()
    result = result if result is not None else _read_json(folder / RESULT_FILE)
    run_id = _id_of(result)
    if result is None or run_id is None:
        raise UserError(f"{folder / RESULT_FILE} names no run id: the runner cannot record what it measured",
                        "pass a folder written by `runner reproduce`")
    entry = result.get("entry")
    record = {
        "version": VERSION,
        "run_id": run_id,
        "entry": entry.get("name") if isinstance(entry, dict) else None,
        "smoke": result.get("smoke"),
        "folder": str(folder),
        "recorded_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "files": dict(sorted((files if files is not None else file_digests(folder)).items())),
        "result": result,
    }
    path = record_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)
    return path


def read_measured(run_id: str) -> dict | None:
    """This host's record of run ``run_id``; None when there is none (or it is unreadable)."""
    try:
        path = record_path(run_id)
    except ValueError:
        return None
    record = _read_json(path)
    if record is None or not isinstance(record.get("files"), dict):
        return None
    return record


def measured_record(folder: Path) -> dict | None:
    """This host's record of the run in ``folder`` (by its result.json's run id), if any."""
    run_id = _run_id(Path(folder))
    return read_measured(run_id) if run_id else None


def _exempt(path: str, rewritten: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in rewritten)


def _value(value) -> str:
    text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _lookup(document, dotted: str):
    node = document
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if part.startswith("["):
            index = int(part[1:-1])
            node = node[index] if isinstance(node, list) and index < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
    return node


def result_changes(before: dict, after, fields: Iterable[str] = ()) -> list[str]:
    """result.json's fields that differ, as ``path old -> new`` (``fields``: dotted prefixes
    the caller rewrote itself, not compared)."""
    fields = tuple(fields)
    if not isinstance(after, dict):
        return ["(not a JSON object)"]
    out = []
    for dotted in differences(before, after):
        if any(dotted == f or dotted.startswith(f + ".") or dotted.startswith(f + "[") for f in fields):
            continue
        old, new = _lookup(before, dotted), _lookup(after, dotted)
        out.append(f"{dotted} {_value(old)} -> {_value(new)}")
    return out


def changes(folder: Path, record: Mapping, *, rewritten: Iterable[str] = (),
            fields: Iterable[str] = ()) -> list[str]:
    """What differs between ``folder`` and the record of what was measured, one phrase per
    file (``checkpoints/3.pt changed``, ``x added``, ``y removed``, ``result.json changed
    (training.tta_seconds 18.34 -> 0.5)``). ``rewritten``: paths (or folders) the signing
    command itself writes; ``fields``: result.json's fields it writes."""
    rewritten = tuple(rewritten)
    measured = record["files"]
    now = file_digests(Path(folder))
    found = []
    for path in sorted(set(measured) | set(now)):
        if path == RESULT_FILE and path in measured and path in now and measured[path] != now[path]:
            fields_changed = result_changes(record.get("result") or {},
                                            _read_json(Path(folder) / RESULT_FILE), fields)
            if fields_changed:
                found.append(f"{path} changed ({', '.join(fields_changed[:SHOWN])}"
                             + (f" and {len(fields_changed) - SHOWN} more" if len(fields_changed) > SHOWN else "")
                             + ")")
            continue
        if _exempt(path, rewritten) or measured.get(path) == now.get(path):
            continue
        found.append(f"{path} {'added' if path not in measured else 'removed' if path not in now else 'changed'}")
    return found


def require_measured(folder: Path, action: str, *, rewritten: Iterable[str] = (),
                     fields: Iterable[str] = ()) -> dict:
    """Refuse ``action`` (a signature) on ``folder`` unless this host measured its run and
    every file is as measured, less ``rewritten`` paths and result.json ``fields`` (what the
    command signing it wrote itself). Returns the record."""
    folder = Path(folder)
    return require_unchanged(folder, _run_id(folder), action, rewritten=rewritten, fields=fields)


def require_unchanged(folder: Path, run_id: str | None, action: str, *, rewritten: Iterable[str] = (),
                      fields: Iterable[str] = ()) -> dict:
    """``require_measured`` for run ``run_id`` (a run not yet written names it itself)."""
    record = read_measured(run_id) if run_id else None
    if record is None:
        raise UserError(f"this runner did not measure run {run_id or folder.name} ({folder}): it signs only runs "
                        f"it measured; {action} refused",
                        "sign it on the host that ran it, or `runner reproduce` the entry here")
    found = changes(folder, record, rewritten=rewritten, fields=fields)
    if found:
        named = ", ".join(found[:SHOWN]) + (f" and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
        raise UserError(f"{folder} is not what this runner measured: {named}; {action} refused",
                        "start again from the signed bundle, or `runner reproduce` the entry again")
    return record
