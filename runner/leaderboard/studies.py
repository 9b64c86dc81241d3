"""An entry's studies for the leaderboard's site: what each study's ``report.json`` says.

``runner study KIND ENTRY`` writes ``results/<entry>/studies/<kind>-<stamp>/`` with its
tables, plots and notes as data (``runner.study.report.report_data``) and links to the runs it
read. The site renders them with its own templates and links each run to the run's row on
the reproduction page, where its signature and verdict are shown.

A study's report is not signed (its runs are), and the results folder is only as trustworthy
as the machine that holds it, so what is read here is bounded and checked: a report over
``MAX_REPORT_BYTES`` or of another shape is skipped with the reason; a plot is copied only if
it is a regular PNG file of the study's own folder under ``MAX_PLOT_BYTES``; every string is
shown escaped (the templates autoescape) and with absolute paths cut to their last part, so
a published page never names a folder of the machine that built it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from runner import safe_read
from runner.results.layout import STUDY_REPORT_DATA, entries, entry_studies

REPORT_DATA = STUDY_REPORT_DATA
MAX_REPORT_BYTES = 2 * 2**20
MAX_PLOT_BYTES = 20 * 2**20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PLOT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.png")
# An absolute path: a "/" that starts a word, then at least one more "/"-separated part.
_ABSOLUTE = re.compile(r"(?<![\w.~:/-])/(?:[^\s/'\"<>]+/)+([^\s/'\"<>]*)")


def scrub(text: str | int | float) -> str:
    """``/home/me/results/mnist/x`` -> ``x``: no absolute path of the building machine."""
    return _ABSOLUTE.sub(lambda m: m.group(1) or ".", str(text))


@dataclass
class StudyTable:
    title: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Study:
    """One study of an entry, as its report describes it."""

    entry: str
    name: str  # its folder's name, ``<kind>-<UTC stamp>``: unique per entry
    kind: str
    written_at: str
    tables: list[StudyTable]
    plots: list[tuple[Path, str]]  # (the PNG in the study's folder, caption): checked, ready to copy
    notes: list[str]
    runs: list[str]  # run ids
    left_out: list[str] = field(default_factory=list)  # plots named but not copied, with why


def _strings(value, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                              for v in value):
        raise ValueError(f"{what} is not a list of strings")
    return [scrub(v) for v in value]


def _string(value, what: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"{what} is not a string")
    return scrub(value)


def _list(data: dict, key: str, what: str) -> list:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def _plot(folder: Path, item) -> tuple[tuple[Path, str] | None, str | None]:
    if not isinstance(item, dict) or not isinstance(item.get("file"), str):
        raise ValueError("a plot is not {file, caption}")
    name, caption = item["file"], _string(item.get("caption", ""), "a plot's caption")
    if not _PLOT_NAME.fullmatch(name):
        return None, f"{scrub(name)}: not a PNG file name of the study's folder"
    path = folder / name
    try:
        size = safe_read.size_of(path)
    except safe_read.Unreadable:  # absent, a link, a FIFO, a folder...
        return None, f"{name}: not a regular file of the study's folder"
    if size > MAX_PLOT_BYTES:
        return None, f"{name}: over {MAX_PLOT_BYTES // 2**20} MiB"
    try:
        fh, _ = safe_read.open_file(path, "plot", inside=folder)
        with fh:
            magic = fh.read(len(PNG_MAGIC))
    except (safe_read.Unreadable, OSError) as err:
        return None, f"{name}: {getattr(err, 'why', None) or 'cannot be read'}"
    if magic != PNG_MAGIC:
        return None, f"{name}: not a PNG"
    return (path, caption), None


def read_plot(path: Path, folder: Path) -> bytes:
    """A study's PNG, read as untrusted input: a regular file of ``folder`` (no link, FIFO or
    device), at most ``MAX_PLOT_BYTES``; ``safe_read.Unreadable`` otherwise."""
    data = safe_read.read_bytes(path, "plot", inside=folder)
    if len(data) > MAX_PLOT_BYTES:
        raise safe_read.Unreadable(path, f"is over {MAX_PLOT_BYTES // 2**20} MiB")
    if not data.startswith(PNG_MAGIC):
        raise safe_read.Unreadable(path, "is not a PNG")
    return data


def _report(folder: Path) -> dict:
    """The study's report.json as a JSON object, read through ``runner.safe_read``."""
    report = folder / REPORT_DATA
    if not report.exists() and not report.is_symlink():
        raise ValueError(f"no {REPORT_DATA} (a study written before the site showed studies: "
                         f"re-run it with --from-runs)")
    try:
        if safe_read.size_of(report) > MAX_REPORT_BYTES:  # a FIFO, link or folder: refused here
            raise ValueError(f"{REPORT_DATA} is over {MAX_REPORT_BYTES // 2**20} MiB")
        return safe_read.read_json_object(report, "report", inside=folder)
    except safe_read.Unreadable as err:
        raise ValueError(f"{REPORT_DATA} {err.why}") from None


def read_study(folder: Path, entry: str) -> Study:
    """The study in ``folder``; ValueError (the reason) when its report cannot be shown."""
    if folder.is_symlink():
        raise ValueError("its folder is a link (a study's folder is the runner's own)")
    data = _report(folder)
    if data.get("schema_version") != 1:
        raise ValueError(f"{REPORT_DATA} is not a study report of schema version 1")
    if data.get("entry") != entry:
        raise ValueError(f"its report names entry {scrub(str(data.get('entry')))!r}, not {entry!r}")
    kind = data.get("kind")
    if not isinstance(kind, str) or not re.fullmatch(r"[a-z][a-z-]{0,39}", kind):
        raise ValueError("its kind is not a study's name")
    tables = []
    for table in _list(data, "tables", "its tables"):
        if not isinstance(table, dict) or not isinstance(table.get("rows"), list):
            raise ValueError("a table is not {title, headers, rows}")
        headers = _strings(table.get("headers"), "a table's headers")
        rows = [_strings(row, "a table's row") for row in table["rows"]]
        tables.append(StudyTable(_string(table.get("title", ""), "a table's title"), headers, rows))
    plots, left_out = [], []
    for item in _list(data, "plots", "its plots"):
        plot, why = _plot(folder, item)
        if plot:
            plots.append(plot)
        elif why:  # _plot says why whenever it shows no plot
            left_out.append(why)
    runs = _strings(data.get("runs") or [], "its runs")
    return Study(entry, folder.name, kind, _string(data.get("written_at", ""), "its time"), tables, plots,
                 _strings(data.get("notes") or [], "its notes"), runs, left_out)


def load_studies(results: Path) -> tuple[list[Study], list[str]]:
    """Every entry's studies under ``results``; one that cannot be shown is skipped with why."""
    studies, skipped = [], []
    for entry in entries(results):
        for folder in entry_studies(results, entry):
            try:
                studies.append(read_study(folder, entry))
            except (OSError, ValueError) as err:
                skipped.append(f"study {entry}/{folder.name}: {err}")
            except (TypeError, AttributeError, KeyError, IndexError) as err:  # a shape no check foresaw
                skipped.append(f"study {entry}/{folder.name}: {REPORT_DATA} is not of a study report's shape "
                               f"({type(err).__name__})")
    return studies, skipped
