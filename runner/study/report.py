"""A study as HTML: ``section`` is the fragment a site embeds (tables, plots, notes);
``write_report`` wraps it in a static page, ``report.html``, next to the study's PNGs, and
writes what the page shows as data, ``report.json``, which the leaderboard's site renders
with its own templates (``runner.leaderboard.studies``)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from runner.results import write_json
from runner.results.layout import STUDY_REPORT_DATA
from runner.study.common import RUNS_DIR, StudyOutput

REPORT_FILE = "report.html"
REPORT_DATA = STUDY_REPORT_DATA
REPORT_SCHEMA_VERSION = 1

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption, .note { color: #555; font-size: .9em; }
"""


def _table(table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in table.rows)
    return (f'<table class="study-table"><caption>{html.escape(table.title)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def section(out: StudyOutput, image_prefix: str = "") -> str:
    """The study's section: image paths are relative to the page (``image_prefix`` + file)."""
    parts = [f'<section class="study" id="{html.escape(out.kind)}">',
             f"<h2>{html.escape(out.kind)} study of {html.escape(out.entry)}</h2>"]
    parts += [_table(t) for t in out.tables]
    for name, caption in out.plots:
        parts.append(f'<figure><img src="{html.escape(image_prefix + name)}" alt="{html.escape(caption)}">'
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in out.notes]
    parts.append(f'<p class="note">runs: <code>{html.escape(str(out.folder / "runs"))}</code>; '
                 f'summary: <code>summary.json</code></p></section>')
    return "\n".join(parts)


def write_report(out: StudyOutput) -> Path:
    page = (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(out.kind)} study: {html.escape(out.entry)}</title><style>{_CSS}</style></head>"
            f"<body><h1>runner study: {html.escape(out.kind)} &middot; {html.escape(out.entry)}</h1>\n"
            f"{section(out)}\n</body></html>\n")
    path = out.folder / REPORT_FILE
    path.write_text(page)
    write_json(out.folder / REPORT_DATA, report_data(out))
    return path


def report_data(out: StudyOutput) -> dict:
    """What the report shows, as data: tables, plots (file names in the study's folder),
    notes, and the run ids the study read (its ``runs/`` links)."""
    runs = out.folder / RUNS_DIR
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": out.kind,
        "entry": out.entry,
        "written_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tables": [{"title": t.title, "headers": list(t.headers), "rows": [[str(c) for c in row] for row in t.rows]}
                   for t in out.tables],
        "plots": [{"file": name, "caption": caption} for name, caption in out.plots],
        "notes": list(out.notes),
        "runs": sorted(p.name for p in runs.iterdir()) if runs.is_dir() else [],
    }
