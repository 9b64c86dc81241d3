"""What every study shares: its folder, its runs, and the figures read back from a run."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from runner import data, paths, safe_read
from runner.data.synthetic import SMOKE_SIZES
from runner.errors import UserError
from runner.events import ENTRY, RUNNER, read_events
from runner.plan import LOCAL, SLURM, make_plan
from runner.reproduce import launch
from runner.results import write_json
from runner.results.layout import STUDIES_DIR
from runner.results.record import Result
from runner.score.tta import EVAL_FREEZE, EVAL_THAW

SUMMARY_FILE = "summary.json"
RUNS_DIR = "runs"


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class StudyOutput:
    """A finished study: its folder, the summary written there, and what the report shows."""

    kind: str
    entry: str
    folder: Path
    summary: dict
    plots: list[tuple[str, str]] = field(default_factory=list)  # (file name, caption)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SavedStudy:
    """What a study's run or reader hands its report (its row's ``report``): the study's
    folder, with ``summary.json`` written and its runs linked, and the run folders it read."""

    folder: Path
    summary: dict
    runs: tuple[Path, ...] = ()


def new_study_folder(entry_name: str, kind: str) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = paths.results_dir() / entry_name / STUDIES_DIR
    folder, n = base / f"{kind}-{stamp}", 1
    while folder.exists():  # two studies in one second
        n += 1
        folder = base / f"{kind}-{stamp}-{n}"
    folder.mkdir(parents=True)
    return folder


def link_runs(study: Path, folders: list[Path]) -> None:
    """``runs/<run_id>`` -> each signed run folder (relative links, so the tree can move)."""
    target = study / RUNS_DIR
    target.mkdir(exist_ok=True)
    for folder in folders:
        link = target / folder.name
        if not link.exists():
            link.symlink_to(os.path.relpath(folder.resolve(), target))


def write_summary(study: Path, summary: dict) -> None:
    write_json(study / SUMMARY_FILE, summary)


def save_study(kind: str, folders: list[Path], summary: dict) -> SavedStudy:
    """A new study folder holding its summary and links to the runs it read."""
    folder = new_study_folder(summary["entry"], kind)
    link_runs(folder, folders)
    write_summary(folder, summary)
    return SavedStudy(folder, summary, tuple(folders))


def left_out(results: list[Result], folders: list[Path], alike: dict) -> list[dict]:
    """The runs the figures leave out: non-conforming ones (not smoke runs), with why."""
    out = []
    for f, r in zip(folders, results):
        reasons = ([] if r.conforming or r.smoke else [str(x) for x in r.nonconforming_reasons] or ["non-conforming"])
        reasons += [str(x) for x in alike.get(f, [])]
        if reasons:
            out.append({"run_id": r.run_id, "reasons": reasons})
    return out


def run_entry(entry_path: str, opts, slurm=None) -> list[Path]:
    """Signed runs of the entry, made by ``runner reproduce``'s own code path: on this host,
    or with ``slurm`` (``runner.slurm.SlurmOptions``) as one Slurm job array."""
    return launch(make_plan(entry_path, opts, SLURM if slurm is not None else LOCAL), slurm)


def with_runs(opts, runs: int, **changes):
    return replace(opts, runs=runs, **changes)


def check_run_folders(folders: list[Path]) -> list[Path]:
    """Run folders a user named: each must hold a result.json (read through ``Result``)."""
    checked = []
    for folder in folders:
        folder = Path(folder)
        if not (folder / "result.json").is_file():
            raise UserError(f"{folder} is not a run folder (no result.json)",
                            "pass folders under results/<entry>/ made by `runner reproduce`")
        checked.append(folder)
    return checked


def read_curve(folder: Path) -> list[tuple[int, float, float]]:
    """DAWNBench's curve.tsv as (epoch, training seconds, primary accuracy in percent), read
    through ``runner.safe_read`` (a run folder is untrusted input): ``Unreadable`` naming the
    file and the line when it is not a regular file or not a curve."""
    path = Path(folder) / "curve.tsv"
    if not path.exists() and not path.is_symlink():
        return []
    lines = safe_read.read_text(path, "text").splitlines()
    if not lines:
        return []
    header = lines[0].split("\t")
    column = 3 if len(header) > 3 and header[3] == "top5Accuracy" else 2  # ImageNet's metric is top-5
    points = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) > column and cells[column]:
            try:
                point = (int(cells[0]), float(cells[1]) * 3600, float(cells[column]))
            except ValueError:
                raise safe_read.Unreadable(path, f"line {number} is not epoch, hours and accuracy") from None
            if not all(math.isfinite(x) for x in point[1:]):
                raise safe_read.Unreadable(path, f"line {number} holds a number that is not finite")
            points.append(point)
    return points


def train_set_size(result: Result) -> int | None:
    """Items in the training set the run was given (smoke runs: the synthetic set's size)."""
    if result.smoke:
        return SMOKE_SIZES["n_train"]
    try:
        staged = data.staged(result.task.id)
    except UserError:
        return None
    labels = Path(staged.train_dir) / "labels.npy"
    return int(np.load(labels, mmap_mode="r").shape[0]) if labels.is_file() else None


def epoch_seconds(folder: Path) -> list[float]:
    """Seconds inside each epoch the entry marked (``epoch_start``..``epoch_stop``, host-
    stamped on arrival), minus any time the runner had it frozen in between."""
    events = read_events(Path(folder) / "events.jsonl")
    frozen, start_of = [], {}
    freeze_at = None
    for ev in events:
        if ev.origin == RUNNER and ev.key == EVAL_FREEZE:
            freeze_at = ev.t
        elif ev.origin == RUNNER and ev.key == EVAL_THAW and freeze_at is not None:
            frozen.append((freeze_at, ev.t))
            freeze_at = None
    durations = []
    for ev in events:
        if ev.origin != ENTRY or ev.key not in ("epoch_start", "epoch_stop"):
            continue
        epoch = ev.metadata.get("epoch_num")
        if ev.key == "epoch_start":
            start_of[epoch] = ev.t
        elif epoch in start_of:
            start = start_of.pop(epoch)
            paused = sum(max(0.0, min(b, ev.t) - max(a, start)) for a, b in frozen)
            durations.append(ev.t - start - paused)
    return durations


def throughput(folder: Path, result: Result) -> float | None:
    """Training samples per second: the training set once per marked epoch, over the time
    inside those epochs (DAWNBench's figure 1)."""
    size, seconds = train_set_size(result), epoch_seconds(folder)
    if not size or not seconds or sum(seconds) <= 0:
        return None
    return size * len(seconds) / sum(seconds)


def crossing_epoch(result: Result) -> int | None:
    """The epoch of the first evaluation that met the threshold (None: never met)."""
    t = result.training
    if not t or not t.reached or t.crossing is None:
        return None
    ev = t.evaluations[t.crossing]
    return ev.get("epoch") if ev.get("epoch") is not None else ev["index"] + 1


def fmt(value, spec: str, missing: str = "--") -> str:
    return missing if value is None else format(value, spec)


def custody_problem(folder: Path) -> str | None:
    """None when ``folder`` is signed and every file is as signed (``runner verify``'s own
    integrity checks: the signature under the bundled key, every file's digest, the signed
    claim against result.json, the plan); else why it is not. Whose key signed is not judged
    here (a study may read another signer's runs)."""
    from runner.bundle.filelist import ENVELOPE  # lazy: start-up (verify's checks, for the studies that mark runs)
    from runner.verify.checks import run_check  # lazy: start-up (verify's checks, for the studies that mark runs)
    from runner.verify.custody import SIGNED  # lazy: start-up (verify's checks, for the studies that mark runs)
    from runner.verify.evidence import Auditor, Evidence  # lazy: start-up (verify's checks, for the studies that mark runs)

    if not (Path(folder) / ENVELOPE).is_file():
        return "unsigned (no signed bundle)"
    with tempfile.TemporaryDirectory(prefix="runner-study-custody-") as scratch:
        evidence = Evidence(Path(folder), Auditor(), Path(scratch))
        failed = [c for c in (run_check(name, check, evidence) for name, check in SIGNED) if not c.ok]
    if failed:
        return "not what was signed (" + "; ".join(f"{c.name}: {c.detail}" for c in failed) + ")"
    return None


@contextmanager
def run_entry_copy(folder: Path, entry_name: str) -> Iterator[Path]:
    """The entry files a run used (its signed ``entry/``), copied to a folder named as the
    entry (``load_entry`` wants that, and refuses links): read, never imported on the host."""
    files = Path(folder) / "entry"
    if not (files / "entry.yaml").is_file():
        raise UserError(f"{folder} holds no entry files (entry/entry.yaml)",
                        "pass a run folder made by `runner reproduce`")
    with tempfile.TemporaryDirectory(prefix="runner-study-entry-") as tmp:
        copy = Path(tmp) / entry_name
        _copy_plain_tree(files, copy)
        yield copy


def _copy_plain_tree(source: Path, target: Path) -> None:
    """``source``'s folders and regular files copied to ``target``, each file read through
    ``runner.safe_read`` (a FIFO, a device or a link among a run's entry files is refused by
    name, never opened or followed)."""
    target.mkdir()
    for here, folders, names in os.walk(source):
        rel = Path(here).relative_to(source)
        for name in folders:
            if (Path(here) / name).is_symlink():
                raise safe_read.Unreadable(Path(here) / name, "is a link; a run's entry files hold none")
            (target / rel / name).mkdir()
        for name in names:
            with open(target / rel / name, "wb") as out:
                for chunk in safe_read.iter_chunks(Path(here) / name, "text"):
                    out.write(chunk)
