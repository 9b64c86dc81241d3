"""The leaderboard in a terminal: one rich table per task and objective."""

from __future__ import annotations

from rich.console import Console, Group
from rich.text import Text

from runner.leaderboard import formats
from runner.leaderboard.tables import Row, Table
from runner.safe_read import visible
from runner.terminal import Column, compact_table, markup


def spread_lines(table: Table, spread) -> list[str]:
    """The counting runs behind a median, in short lines ("median of 3 runs", "5.91–6.40 s",
    "CoV 4.1%", "resolution 4.9 s"): a narrow column, never a wrapped figure."""
    if spread.runs == 1:
        lines = ["1 run"]
    else:
        lines = [f"median of {spread.runs} runs",
                 f"{table.show_reproduced(spread.low)}–{table.show_reproduced(spread.high)}"]
    if spread.cv is not None:
        lines.append(f"CoV {100 * spread.cv:.1f}%")
    if spread.resolution is not None:
        lines.append(f"resolution {spread.resolution:.1f} s")
    return lines


def reproduction_cell(table: Table, row: Row) -> str:
    """The median of the runs that count, with their spread; when none counts, no figure: why
    the newest run does not count."""
    repro = row.reproduction
    if repro is None:
        return "[dim]not reproduced[/]"
    counts = "".join(f"\n[dim]{markup(note)}[/]" for note in (row.ledger, row.rules) if note)
    if row.reproduced is None or row.spread is None:
        return f"— [dim]no run counts[/]\n[red]({markup(repro.reason)})[/]" + counts
    value = markup(table.show_reproduced(row.reproduced))
    return f"[green]{value}[/] ✓\n[dim]" + markup("\n".join(spread_lines(table, row.spread))) + "[/]" + counts


def submission_cell(row: Row) -> str:
    """Model, team, hardware (and why the runs are not held against the claim), framework."""
    hardware = row.hardware + (f" ({row.not_compared})" if row.not_compared else "")
    lines = [f"[bold]{markup(row.model)}[/]"] + [markup(x) for x in (row.team, hardware, row.framework) if x]
    return "\n".join(lines)


def energy_cell(table: Table, row: Row) -> str:
    """The reproduction's joules-to-accuracy (training tables) or joules per 10,000 items of its
    fastest gated backend (inference tables); "—" when not reproduced or not measured."""
    repro = row.reproduction
    if repro is None:
        return "—"
    if table.objective.kind == "train":
        value, unit = repro.record.joules_to_accuracy, "J"
    else:
        gated = repro.record.gated_backends()
        value, unit = (gated[0].joules_per_10k if gated else None), "J/10k"
    return "—" if value is None else f"{value:,.1f} {unit}"


def render(table: Table, top: int | None = None) -> Group:
    """The table readable at 80 columns: the submission's model, team, hardware and framework
    in one column that wraps, the figures in columns that never do, Energy only when some row
    has it."""
    rows = []
    for row in table.rows[:top] if top else table.rows:
        ratio = formats.ratio(row.ratio) if row.spread is not None else "—"
        rows.append([str(row.rank), markup(table.show(row.claimed)), reproduction_cell(table, row), ratio,
                     submission_cell(row), markup(formats.month(row.date)), energy_cell(table, row)])
    columns = [Column("Rank", number=True), Column("Claimed", number=True),
               Column("Reproduced", wrap=True, min_width=16), Column("Ratio", number=True),
               Column("Submission", wrap=True), Column("Date"), Column("Energy", number=True)]
    title = Text.assemble((visible(table.title), "bold"), visible(f": {table.column} ({table.criterion})"))
    return Group(title, compact_table(None, columns, rows, show_lines=True))


def print_tables(tables: list[Table], console: Console, top: int | None = None) -> None:
    for table in tables:
        if table.rows:
            console.print(render(table, top))
            if top and len(table.rows) > top:
                console.print(f"[dim]… {len(table.rows) - top} more rows[/]")
        else:
            console.print(f"[bold]{markup(table.title)}[/] — {markup(table.criterion)}: [dim]no claims or reproductions[/]")
        console.print()
