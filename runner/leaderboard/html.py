"""The leaderboard as a static site: ``index.html`` (inline CSS, no script, nothing
fetched from elsewhere) and ``plots/*.png``. Open it from disk; no server is needed."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from runner.dawnbench.claims import Claim
from runner.dawnbench.tasks import FORMAT_TASKS, format_task
from runner.leaderboard import formats, plots
from runner.leaderboard.reproductions import Reproduction
from runner.leaderboard.tables import Row, Table

PLOTS_DIR = "plots"

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1.5rem; color: #1d1d1f; background: #fff; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.5rem; border-bottom: 2px solid #8c1515; padding-bottom: .2rem; }
h3 { margin: 1.5rem 0 .4rem; font-size: 1.05rem; } .criterion { color: #555; font-weight: normal; }
nav a { margin-right: 1rem; } .lede { color: #444; max-width: 60rem; }
table.board { border-collapse: collapse; width: 100%; font-size: .85rem; }
table.board th, table.board td { border-bottom: 1px solid #ddd; padding: .3rem .5rem; text-align: left; vertical-align: top; }
table.board th { background: #f4f4f4; } td.num, td.date { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.verified { color: #0a7a2f; font-weight: 600; } .unverified { color: #b00020; }
.muted { color: #888; } .empty { color: #888; font-style: italic; }
article.run { border: 1px solid #ddd; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
article.run img { width: calc(50% - 0.5rem); min-width: 320px; height: auto; }
.figures { display: flex; flex-wrap: wrap; gap: 1rem; }
"""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def run_anchor(repro: Reproduction) -> str:
    return f"run-{_slug(repro.record.entry)}-{_slug(repro.record.run_id)}"


def _reproduced_cell(table: Table, row: Row) -> str:
    repro = row.reproduction
    if repro is None:
        return '<td class="num muted">not reproduced</td>'
    value = escape(table.show_reproduced(row.reproduced))
    link = f'<a href="#{run_anchor(repro)}">{value}</a>'
    spread = f'<br><span class="muted spread">{escape(table.show_spread(row.spread))}</span>' if row.spread else ""
    if repro.verified:
        return (f'<td class="num"><span class="verified" title="signed, complete, conforming">{link} ✓</span>'
                f"{spread}</td>")
    return f'<td class="num"><span class="unverified">{link} ({escape(repro.verdict)})</span></td>'


def _not_compared(row: Row) -> str:
    return f' <span class="muted">({escape(row.not_compared)})</span>' if row.not_compared else ""


def _table_html(table: Table) -> str:
    head = (f'<h3 id="{table.id}">{escape(table.title)} <span class="criterion">— {escape(table.criterion)}</span></h3>')
    if not table.rows:
        return head + f'<p class="empty" data-table="{table.id}">No claims or reproductions.</p>'
    lines = [head, (f'<table class="board" data-table="{table.id}"><thead><tr>'
             f"<th>Rank</th><th>{escape(table.column)} <span class=\"muted\">(claimed)</span></th><th>Reproduced</th>"
             "<th>Ratio</th><th>Model</th><th>Team</th><th>Hardware</th><th>Framework</th><th>Date</th></tr></thead><tbody>")]
    for row in table.rows:
        verified = row.reproduction is not None and row.reproduction.verified
        source = f' title="{escape(row.claim.source)}"' if row.claim else ""
        lines.append(
            f"<tr{source}><td class=\"num\">{row.rank}</td><td class=\"num\">{escape(table.show(row.claimed))}</td>"
            f"{_reproduced_cell(table, row)}<td class=\"num\">{formats.ratio(row.ratio) if verified else '—'}</td>"
            f"<td>{escape(row.model)}</td><td>{escape(row.team)}</td><td>{escape(row.hardware)}{_not_compared(row)}</td>"
            f"<td>{escape(row.framework)}</td><td class=\"date\">{formats.month(row.date)}</td></tr>"
        )
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _claim_for(repro: Reproduction, claims: list[Claim]) -> Claim | None:
    names = repro.record.dawnbench_claims
    return next((c for c in claims if c.kind == "train" and c.name in names and c.task == repro.record.task), None)


def _run_html(repro: Reproduction, claims: list[Claim], out: Path) -> str:
    rec = repro.record
    ft = format_task(rec.task)
    anchor = run_anchor(repro)
    figures = []
    if repro.curve:
        claim = _claim_for(repro, claims)
        png = plots.tta_curve(out / PLOTS_DIR / f"{anchor}-tta.png", ft, repro.curve,
                              f"{rec.entry} {rec.run_id}: time to accuracy", claim.curve if claim else None)
        figures.append(f'<img class="plot" src="{PLOTS_DIR}/{png.name}" alt="time-to-accuracy curve of {escape(rec.run_id)}">')
    if repro.latencies_ms:
        png = plots.latency_histogram(out / PLOTS_DIR / f"{anchor}-latency.png", repro.latencies_ms,
                                      f"{rec.entry} {rec.run_id}: batch-1 latency")
        figures.append(f'<img class="plot" src="{PLOTS_DIR}/{png.name}" alt="latency distribution of {escape(rec.run_id)}">')
    verdict = ('<span class="verified">verified reproduction ✓</span>' if repro.verified
               else f'<span class="unverified">not a verified reproduction: {escape("; ".join(repro.problems))}</span>')
    tta = formats.tta(rec.tta_seconds, rec.tta_resolution_seconds) if rec.reached else "threshold not reached"
    return (
        f'<article class="run" id="{anchor}"><h3>{escape(rec.entry)} · {escape(rec.run_id)}</h3>'
        f"<p>{verdict}<br>{escape(ft.folder)} · {escape(rec.model)} · {escape(rec.framework)} · profile "
        f"{escape(str(rec.profile))} · TTA {escape(tta)} ({'' if rec.tta_seconds is None else f'{rec.tta_seconds:.2f} s, '}"
        f"{formats.dollars(rec.training_usd)})<br><span class=\"muted\">{escape(repro.origin)}</span></p>"
        f'<div class="figures">{"".join(figures) or "<p class=empty>No curve or latencies in this result.</p>"}</div></article>'
    )


def write_site(out: Path, tables: list[Table], claims: list[Claim], repros: list[Reproduction]) -> Path:
    """Write ``out/index.html`` and its plots; returns the page's path."""
    if (out / PLOTS_DIR).exists():
        shutil.rmtree(out / PLOTS_DIR)  # ours: rebuilt from scratch each time
    (out / PLOTS_DIR).mkdir(parents=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    verified = sum(r.verified for r in repros)
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>runner leaderboard</title>", f"<style>{CSS}</style></head><body>",
        "<h1>Leaderboard: claims beside their reproductions</h1>",
        (f'<p class="lede">DAWNBench\'s tables from {len(claims)} imported claims and {len(repros)} reproduced '
         f"results ({verified} verified: signed by a trusted key, every file intact, complete and conforming). "
         "Claimed figures are as published; <em>Ratio</em> is reproduced / claimed, shown for verified "
         f"reproductions only. Built {stamp}.</p>"),
        "<nav>" + "".join(f'<a href="#{ft.task_id}">{escape(ft.folder)}</a>' for ft in FORMAT_TASKS)
        + '<a href="#reproductions">Reproductions</a></nav>',
    ]
    for ft in FORMAT_TASKS:
        parts.append(f'<section id="{ft.task_id}"><h2>{escape(ft.folder)}</h2>')
        parts += [_table_html(t) for t in tables if t.task.task_id == ft.task_id]
        parts.append("</section>")
    parts.append('<section id="reproductions"><h2>Reproductions</h2>')
    ordered = sorted(repros, key=lambda r: (not r.verified, r.record.task, r.record.entry, r.record.run_id))
    parts += [_run_html(r, claims, out) for r in ordered] or ['<p class="empty">No reproduced results yet.</p>']
    parts.append("</section></body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return index
