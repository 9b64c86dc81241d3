"""The leaderboard in a terminal: one rich table per task and objective."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from runner.leaderboard import formats
from runner.leaderboard.tables import Row, Table


def reproduction_cell(table: Table, row: Row) -> str:
    repro = row.reproduction
    if repro is None:
        return "[dim]not reproduced[/]"
    value = escape(table.show_reproduced(row.reproduced))
    if repro.verified and row.spread:
        return f"[green]{value}[/] ✓\n[dim]{escape(table.show_spread(row.spread))}[/]"
    if repro.verified:
        return f"[green]{value}[/] ✓"
    return f"{value} [red]({escape(repro.verdict)})[/]"


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


def render(table: Table, top: int | None = None) -> RichTable:
    out = RichTable(title=f"{table.title}: {table.column} ({table.criterion})", title_justify="left", expand=False)
    out.add_column("Rank", justify="right", no_wrap=True)
    for name in ("Claimed", "Reproduced", "Ratio"):
        out.add_column(name, justify="right", no_wrap=True)
    for name in ("Model", "Team", "Hardware", "Framework"):
        out.add_column(name, overflow="fold")
    out.add_column("Date", no_wrap=True)
    out.add_column("Energy", justify="right", no_wrap=True)
    for row in table.rows[:top] if top else table.rows:
        ratio = formats.ratio(row.ratio) if row.reproduction is not None and row.reproduction.verified else "—"
        out.add_row(
            str(row.rank), escape(table.show(row.claimed)), reproduction_cell(table, row), ratio,
            escape(row.model), escape(row.team), escape(row.hardware + (f" ({row.not_compared})" if row.not_compared else "")),
            escape(row.framework), formats.month(row.date),
            energy_cell(table, row),
        )
    return out


def print_tables(tables: list[Table], console: Console, top: int | None = None) -> None:
    for table in tables:
        if table.rows:
            console.print(render(table, top))
            if top and len(table.rows) > top:
                console.print(f"[dim]… {len(table.rows) - top} more rows[/]")
        else:
            console.print(f"[bold]{table.title}[/] — {table.criterion}: [dim]no claims or reproductions[/]")
        console.print()
