"""``runner ls`` and ``runner show`` in a terminal: a table of runs per entry, and one run's
summary, curve and files. Short run ids here; the full ids are in the files and ``--json``."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from runner.runs import RunRow, ledger_counts
from runner.runs.curve import draw_curve
from runner.safe_read import visible
from runner.terminal import MISSING, Column, compact_table, fmt, key_values, markup, plain_table, text, whole, yes_no

if TYPE_CHECKING:
    from runner.runs.show import RunView

WIDE = 100  # from this width on, ls shows each run's date too


def _verdict(row: RunRow) -> Text:
    """"counts", "verified" (but does not count) or "no" (not verified)."""
    return Text("counts") if row.counts else Text("verified") if row.verified else Text("no", style="red")


def runs_table(entry: str, rows: list[RunRow], width: int):
    """One entry's runs, real runs before smoke runs."""
    wide = width >= WIDE
    columns = [Column("run"), *([Column("started (UTC)")] if wide else []), Column("status"), Column("reached"),
               Column("TTA s", number=True), Column("conforming"), Column("smoke"), Column("verdict")]
    cells = [[text(row.short_id), *([text(row.date)] if wide else []), text(row.status), yes_no(row.reached),
              fmt(row.tta_seconds, ".2f"), yes_no(row.conforming), yes_no(row.smoke), _verdict(row)]
             for row in rows]
    for row, line in zip(rows, cells):
        if row.variant:  # a study's variant: marked, and named below the table
            line[0] = text(f"{row.short_id}*")
    runs = f"{len(rows)} run{'s' if len(rows) != 1 else ''}"
    title = f"[bold]{markup(entry)}[/] ({runs})"
    # every column of ls says something, even "no" or "--" in every row
    return plain_table(title, columns, cells, width) or compact_table(title, columns, cells, hide_empty=False)


def variant_lines(rows: list[RunRow]) -> Text | None:
    """``* s7-eeeeee: study variant, -one-cycle,label-smoothing`` for each variant run: a
    study's run with a switch off or another placement, never the entry's recipe."""
    lines = [visible(f"* {row.short_id}: study variant, {row.variant_label}") for row in rows if row.variant]
    return Text("\n".join(lines), style="dim") if lines else None


def verdict_lines(rows: list[RunRow]) -> Text | None:
    """Why each real run that does not count does not (its first reason): a smoke run says so
    in its own column."""
    lines = [visible(f"{row.short_id}: {row.verdict.word}: {row.verdict.reason.removeprefix('not verified: ')}")
             for row in rows if not row.counts and not row.smoke]
    return Text("\n".join(lines), style="dim") if lines else None


def ledger_lines(rows: list[RunRow]) -> Text | None:
    """``3 of 7 runs of this entry with key 1a2b3c4d5e6f7a8b`` for each key whose verified runs
    carry their place in its ledger: the runs listed against every run of the entry the key
    signed (smoke runs counted apart)."""
    lines = [visible(f"{here} of {made} {'smoke ' if smoke else ''}run{'s' if made != 1 else ''} of this entry "
                     f"with key {key[:16]}")
             for key, smoke, here, made in ledger_counts(rows)]
    return Text("\n".join(lines)) if lines else None


def ls_renderables(rows: list[RunRow], width: int) -> list:
    out = []
    for entry in dict.fromkeys(r.entry for r in rows):
        of_entry = [r for r in rows if r.entry == entry]
        out.append(runs_table(entry, of_entry, width))
        if (why := verdict_lines(of_entry)) is not None:
            out.append(why)
        if (counts := ledger_lines(of_entry)) is not None:
            out.append(counts)
        if (notes := variant_lines(of_entry)) is not None:
            out.append(notes)
    return out


def _percent(value: float | None, percent: bool) -> str:
    if value is None:
        return MISSING
    return f"{value * 100:.2f}%" if percent else f"{value:.4f}"


def summary_rows(view: RunView) -> list[tuple[str, str]]:
    from runner.claims import variant_problem  # lazy: start-up (show's rows only; ls loads no claim)

    r, row = view.result, view.row
    training = r.training
    threshold = _percent(r.task.threshold, view.percent)
    rows = [("status", markup(r.status + (f": {r.incomplete_reason}" if r.incomplete_reason else ""))),
            ("task", f"{markup(r.task.id)}, {markup(r.task.metric)} ≥ {threshold}"),
            ("seed", str(r.seed)), ("smoke", yes_no(r.smoke) + (" (synthetic data: never a figure)" if r.smoke else ""))]
    if r.variant is not None:
        rows.append(("study variant", markup(variant_problem(r.variant) or "")))
    crossing = view.crossing()
    if training and training.reached:
        at = "" if crossing is None else (
            (f", at epoch {markup(crossing['epoch'])}" if crossing.get("epoch") is not None
             else f", at evaluation {markup(crossing.get('index'))}")
            + f": {markup(r.task.metric)} {_percent((crossing.get('scores') or {}).get(r.task.metric), view.percent)}")
        rows.append(("reached", "yes" + at))
        step = training.tta_resolution_seconds
        rows.append(("TTA", f"{training.tta_seconds:.2f} s" + ("" if step is None else f" (resolution {step:.1f} s)")))
    else:
        rows.append(("reached", "no"))
    if r.cost is not None:
        rows.append(("cost", (f"${r.cost.training_usd:.6f}" if r.cost.training_usd is not None else MISSING)
                     + f" on {markup(r.cost.profile)} at ${r.cost.usd_per_hour:g}/h"))
    conforming = yes_no(r.conforming)
    if not r.conforming and r.nonconforming_reasons:
        conforming += ": " + markup("; ".join(r.nonconforming_reasons))
    rows.append(("conforming", conforming))
    verdict = row.verdict
    rows.append(("verdict", markup(verdict.summary)))
    rows += [("rules", markup(note.removeprefix("rules: "))) for note in verdict.notes]
    if isinstance(place := row.ledger, dict):
        rows.append(("ledger", markup(f"run {place.get('entry_runs')} of this entry with key "
                                      f"{str(place.get('key_id'))[:16]} (index {place.get('index')})")
                     + ("" if row.ledger_key else " (not verified)")))
    for name, b in r.inference.items():
        lat = b.latency_ms or {}
        gate = "gate pass" if b.passed_gate else f"gate fail ({markup(b.gate_reason or b.error or '?')})"
        rows.append((f"{markup(name)}", f"p50 {fmt(lat.get('p50'), '.3f')} ms, mean {fmt(lat.get('mean'), '.3f')} "
                                         f"ms, {gate}"))
    return rows


def file_rows(view: RunView) -> list[tuple[str, str]]:
    """The run's files, relative to its folder (the folder itself is a line of its own)."""
    if view.bundle:
        return [("inside", markup(", ".join(view.files.values())))]
    return [(name, markup(rel + ("/" if name in ("logs", "model", "inference", "bundle") else "")))
            for name, rel in view.files.items()]


def check_command(view: RunView) -> str:
    """``runner verify FOLDER``, quoted for a shell where the folder needs it."""
    return f"runner verify {shlex.quote(view.location)}"


def show_renderable(view: RunView, width: int) -> Group:
    """The summary, the curve, the files; the folder (or bundle) and the command that checks
    it are lines of their own, never folded (print with ``crop=False``): a copy is the path."""
    row = view.row
    title = Text.assemble((visible(row.entry), "bold"), " ", (visible(row.short_id), "bold cyan"),
                          f"  run {visible(row.run_id)}")
    parts: list[RenderableType] = [title, key_values(summary_rows(view)), Text("")]
    if view.curve:
        unit = "%" if view.percent else ""
        lines = draw_curve([(p.seconds, p.score) for p in view.curve], view.threshold, unit, width=width)
        parts += [Text("time to accuracy", style="bold"), Text("\n".join(lines), no_wrap=True, overflow="crop")]
    else:
        parts.append(Text(f"no curve: {visible(str(view.curve_problem))}", style="dim"))
    parts += [Text(""), Text("files in the bundle" if view.bundle else "files in the folder", style="bold"),
              whole(view.location), key_values(file_rows(view)),
              Text(""), Text("check it", style="bold"), whole(check_command(view))]
    return Group(*parts)
