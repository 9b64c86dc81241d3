"""Every run a key signs, remembered: an append-only, hash-chained ledger per key.

``<home>/ledger/<key id>.jsonl`` holds one JSON line per signing: its ``index``, the
``previous`` line's hash (``GENESIS`` for the first), the key, the entry, whether it was a
smoke run, the run id and seed, the verdict (status, conforming, reached), the sha256 of the
signed result.json, the time, and the result folder (local: to find the run again; neither
hashed nor published); ``hash`` is the sha256 of the line's canonical JSON without those two. A run signed again (its result changed
after the cross-seed checks, a re-inference) gets a new line: the ledger counts signings,
``entry_runs`` counts distinct runs.

Before a run is signed, its result.json records its place (``position``: key, index, the
head before it and how many runs of the entry the key has made, this one included); the line,
appended once the result's digest is known, holds that digest: no digest is circular. The
chain is held under an exclusive file lock from the read of its head to the append, so runs
signed at once (``--runs N``, Slurm tasks gathered, two reproductions) chain in turn; a
chain broken on disk is never appended to.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from runner import paths, safe_read
from runner.errors import UserError

GENESIS = "0" * 64  # the head of an empty ledger: the first line's ``previous``
EARLIER_LIMIT = 8  # earlier runs the cross-seed checks compare a new run with
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# A line's fields and their types (``hash`` is checked by recomputing it).
LINE_FIELDS = {"index": int, "previous": str, "key": str, "entry": str, "smoke": bool, "run_id": str,
               "seed": int, "verdict": dict, "result_sha256": str, "time": str, "hash": str}
LOCAL = ("hash", "folder")  # not hashed: the line's own hash, and where the run lies on this host
POSITION_FIELDS = {"key_id": str, "index": int, "previous": str, "entry_runs": int}


def ledger_dir() -> Path:
    return paths.home() / "ledger"


def ledger_path(keyid: str) -> Path:
    if not _HEX64.match(keyid):
        raise UserError(f"the key id {keyid!r} is not a sha256 in hex", "sign with a key `runner keys generate` made")
    return ledger_dir() / f"{keyid}.jsonl"


def canonical(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def line_hash(line: dict) -> str:
    """sha256 of the line's canonical JSON, its own ``hash`` and the local ``folder`` left out
    (so a published ledger, its folders cut, chains the same)."""
    return hashlib.sha256(canonical({k: v for k, v in line.items() if k not in LOCAL})).hexdigest()


def published(lines: list[dict]) -> list[dict]:
    """The lines as their key's owner publishes them: the local folders cut."""
    return [{k: v for k, v in line.items() if k != "folder"} for line in lines]


def _typed(record: object, fields: dict[str, type]) -> str | None:
    """What is wrong with a record's fields (missing, mistyped), or None."""
    if not isinstance(record, dict):
        return "not an object"
    for name, kind in fields.items():
        value = record.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return f"{name} is {'missing' if name not in record else repr(value)[:40]}"
    return None


def chain_problem(lines: list[object]) -> str | None:
    """Why ``lines`` are not an intact chain (naming the first broken line, counted from 1),
    or None. The ledger may be anyone's file (``runner verify --ledger``): nothing is trusted."""
    previous, key = GENESIS, None
    for n, line in enumerate(lines):
        where = f"line {n + 1}"
        problem = _typed(line, LINE_FIELDS)
        if problem or not isinstance(line, dict):  # (not a dict is a problem: the check narrows it)
            return f"{where}: {problem}"
        if line["index"] != n:
            return f"{where}: index {line['index']}, expected {n}"
        if line["previous"] != previous:
            return f"{where}: previous {line['previous'][:16]} is not the hash of the line before ({previous[:16]})"
        if line_hash(line) != line["hash"]:
            return f"{where}: its hash is not the sha256 of its content (edited)"
        if key is not None and line["key"] != key:
            return f"{where}: key {line['key'][:16]}, the lines before are key {key[:16]}'s"
        previous, key = line["hash"], line["key"]
    return None


def parse(text: str) -> list[object]:
    """The ledger's lines as JSON values (``runner.safe_read.parse_json``: depth-capped, finite
    numbers); a line that is not such JSON raises ValueError naming it."""
    lines = []
    for n, raw in enumerate(text.splitlines()):
        try:
            lines.append(safe_read.parse_json(raw, f"line {n + 1}"))
        except safe_read.Unreadable as err:
            raise ValueError(err.problem) from None
    return lines


def read_chain(path: Path) -> list[dict]:
    """An intact ledger's lines; a broken one is a UserError naming its first broken line."""
    if not os.path.lexists(path):
        return []
    fix = (f"restore {path} from a backup (moving it aside starts a new chain at index 0, which every "
           "later bundle of this key shows)")
    try:
        text = safe_read.read_text(path, "ledger")
    except safe_read.Unreadable as err:
        raise UserError(f"the ledger {err.problem}", fix) from None
    if text and not text.endswith("\n"):
        raise UserError(f"the ledger {path} is broken at line {text.count(chr(10)) + 1}: cut short", fix)
    try:
        lines = parse(text)
    except ValueError as err:
        raise UserError(f"the ledger {path} is broken: {err}", fix) from None
    if problem := chain_problem(lines):
        raise UserError(f"the ledger {path} is broken at {problem}", fix)
    return lines  # type: ignore[return-value]


def runs_of(lines: list[dict], entry: str, smoke: bool) -> list[str]:
    """The distinct run ids of ``entry`` (smoke runs counted apart), in the order first signed."""
    return list(dict.fromkeys(line["run_id"] for line in lines if line["entry"] == entry and line["smoke"] is smoke))


def position(lines: list[dict], keyid: str, entry: str, smoke: bool, run_id: str) -> dict:
    """Where a run about to be signed goes: result.json's ``ledger`` section."""
    runs = runs_of(lines, entry, smoke)
    return {"key_id": keyid, "index": len(lines), "previous": lines[-1]["hash"] if lines else GENESIS,
            "entry_runs": len(runs) + (run_id not in runs)}


def position_problem(place: object) -> str | None:
    """What is wrong with a result's ``ledger`` section on its own, or None."""
    problem = _typed(place, POSITION_FIELDS)
    if problem or not isinstance(place, dict):  # (not a dict is a problem: the check narrows it)
        return problem
    if not _HEX64.match(place["key_id"]) or not _HEX64.match(place["previous"]):
        return "key_id and previous must be sha256 digests in hex"
    if place["index"] < 0 or not 1 <= place["entry_runs"] <= place["index"] + 1:
        return f"{place['entry_runs']} runs of the entry cannot stand at index {place['index']}"
    if (place["index"] == 0) != (place["previous"] == GENESIS):
        return f"index {place['index']} with previous {place['previous'][:16]}: only the first line follows the genesis"
    return None


class Ledger:
    """A key's ledger, held under its lock: its intact lines, where a run goes, the append."""

    def __init__(self, keyid: str, path: Path, lines: list[dict]):
        self.keyid, self.path, self.lines = keyid, path, lines

    def position(self, entry: str, smoke: bool, run_id: str) -> dict:
        return position(self.lines, self.keyid, entry, smoke, run_id)

    def append(self, place: dict, *, entry: str, smoke: bool, run_id: str, seed: int, verdict: dict,
               result_sha256: str, folder: Path) -> dict:
        """The line of a run signed at ``place`` (which must still be the head), written and synced."""
        if place["index"] != len(self.lines) or place["key_id"] != self.keyid:
            raise UserError(f"the ledger {self.path} moved while a run was signed", "sign the run again")
        line = {"index": place["index"], "previous": place["previous"], "key": self.keyid, "entry": entry,
                "smoke": bool(smoke), "run_id": run_id, "seed": seed, "verdict": verdict,
                "result_sha256": result_sha256, "folder": str(Path(folder).resolve()),
                "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        line["hash"] = line_hash(line)
        with open(self.path, "ab") as fh:
            fh.write(canonical(line) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.lines.append(line)
        return line


@contextmanager
def _locked(keyid: str, exclusive: bool) -> Iterator[Path]:
    path = ledger_path(keyid)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "a")
    except OSError as err:
        raise UserError(f"cannot open the ledger {path}: {err.strerror or err}",
                        f"free space on (or fix permissions of) {path.parent}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def appending(keyid: str) -> Iterator[Ledger]:
    """The key's ledger, locked against every other signer until the block ends."""
    with _locked(keyid, exclusive=True) as path:
        yield Ledger(keyid, path, read_chain(path))


def read_ledger(keyid: str) -> list[dict]:
    """The key's intact ledger (empty when it has none)."""
    if not ledger_path(keyid).exists():
        return []
    with _locked(keyid, exclusive=False) as path:
        return read_chain(path)


def earlier_runs(keyid: str, entry: str, smoke: bool, exclude: set[str],
                 limit: int = EARLIER_LIMIT) -> tuple[list[Path], list[str]]:
    """The key's earlier signed runs of ``entry`` (not those in ``exclude``), newest first, at
    most ``limit``: their folders where they still hold the result.json last signed, and a
    note for each run left out (its folder gone, its result changed since)."""
    latest: dict[str, dict] = {}
    for line in read_ledger(keyid):
        if line["entry"] == entry and line["smoke"] is smoke and line["run_id"] not in exclude:
            latest.pop(line["run_id"], None)
            latest[line["run_id"]] = line  # in the order last signed
    found: list[Path] = []
    skipped: list[str] = []
    for line in reversed(list(latest.values())):
        if len(found) == limit:
            break
        if not isinstance(line.get("folder"), str):
            skipped.append(f"{line['run_id']}: the ledger does not say where its folder is")
            continue
        folder = Path(line["folder"])
        try:
            digest = _digest(folder / "result.json")
        except safe_read.Unreadable as err:
            skipped.append(f"{line['run_id']}: its result.json cannot be read ({err.why})" if err.why != "does not exist"
                           else f"{line['run_id']}: its folder {folder} is gone")
            continue
        if digest != line["result_sha256"]:
            skipped.append(f"{line['run_id']}: its result.json is not the one signed at ledger index {line['index']}")
            continue
        found.append(folder)
    return found, skipped


def _digest(path: Path) -> str:
    """sha256 of a run's result.json, streamed through ``runner.safe_read`` (a FIFO or a giant
    where the ledger says a run lies is refused, never waited on)."""
    digest = hashlib.sha256()
    for chunk in safe_read.iter_chunks(path, "result"):
        digest.update(chunk)
    return digest.hexdigest()


def ledger_keys() -> list[str]:
    """The key ids that have a ledger under the runner home."""
    folder = ledger_dir()
    return sorted(p.stem for p in folder.glob("*.jsonl") if _HEX64.match(p.stem)) if folder.is_dir() else []
