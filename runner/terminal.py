"""How the runner's tables look in a terminal, readable at 80 columns.

One yes/no style for every boolean, ``--`` for a figure that is not there, numbers that never
wrap (a number split over two lines reads as two numbers), no vertical rules (they cost three
columns each), and a column that is empty in every row left out (an Energy column with
nothing measured tells nothing). Long text (paths, reasons) wraps instead, or goes below the
table as lines of its own.

Outside tables: a line and its details wrap with a hanging indent (``hanging``: never back to
column 0), and a path or a command is never folded (``whole``: a line of its own, however
long, so a copy of it is the path).
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from rich import box
from rich.markup import escape
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from runner.safe_read import visible

if TYPE_CHECKING:
    from rich.console import RenderableType

MISSING = "--"
# Cells that say nothing: a column made only of these is left out.
EMPTY = frozenset({"", MISSING, "—", "-", "not measured"})


# Text from a result, bundle or report is data: its control characters are made visible
# (``runner.safe_read.visible``) and it is never read as rich markup. ``text`` makes such a
# string a cell of its own, ``markup`` puts it inside a markup string the runner wrote;
# the tables below make any control character left in a cell visible all the same.


def text(value: object, style: str = "") -> Text:
    """``value`` (a string from data) as a rich ``Text``: control characters visible, no markup."""
    return Text(visible(str(value)), style=style)


def markup(value: object) -> str:
    """``value`` (a string from data) for a markup string: control characters visible, its
    brackets escaped (``[red]`` prints as itself)."""
    return escape(visible(str(value)))


_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@overload
def inert(cell: str) -> str: ...
@overload
def inert(cell: None) -> None: ...
@overload
def inert(cell: RenderableType) -> RenderableType: ...


def inert(cell: RenderableType | None) -> RenderableType | None:
    """A table cell with every control character but the line break made visible (a cell the
    runner wrote may span lines; none of its own holds another control character)."""
    if isinstance(cell, Text):
        if _CONTROLS_BUT_NEWLINE.search(cell.plain):
            return Text(_CONTROLS_BUT_NEWLINE.sub(lambda m: visible(m.group()), cell.plain), style=cell.style)
        return cell
    if isinstance(cell, str):
        return _CONTROLS_BUT_NEWLINE.sub(lambda m: visible(m.group()), cell)
    return cell


def finite(value: object) -> object:
    """``value`` with every NaN or infinity (not JSON) replaced by None, tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def json_text(data: object, **options) -> str:
    """``data`` as strict JSON (what every ``--json`` prints): a non-finite number is null,
    never ``NaN`` or ``Infinity``, which no JSON parser need accept."""
    return json.dumps(finite(data), allow_nan=False, **{"indent": 2, **options})


def print_json(data: object, **options) -> None:
    print(json_text(data, **options))


def yes_no(value: bool | None) -> str:
    return MISSING if value is None else ("yes" if value else "no")


def fmt(value: float | int | None, spec: str, missing: str = MISSING) -> str:
    return missing if value is None else format(value, spec)


@dataclass(frozen=True)
class Column:
    header: str
    number: bool = False  # right-aligned and never wrapped
    wrap: bool = False  # long text that may wrap (otherwise kept on one line)
    keep_empty: bool = False  # shown even when every cell is empty
    min_width: int | None = None  # a wrapping column never narrower (its figure stays whole)

    def add_to(self, table: Table) -> None:
        table.add_column(self.header, justify="right" if self.number else "left", min_width=self.min_width,
                         no_wrap=not self.wrap, overflow="fold" if self.wrap else "ellipsis")


def _plain(cell: object) -> str:
    if isinstance(cell, Text):
        return cell.plain.strip()
    return Text.from_markup(str(cell)).plain.strip()


def compact_table(title: str | None, columns: list[Column], rows: list[list], hide_empty: bool = True,
                  **options) -> Table:
    """A table without vertical rules; with ``hide_empty``, its all-empty columns are left out."""
    keep = [i for i, c in enumerate(columns)
            if c.keep_empty or not hide_empty or not rows or any(_plain(row[i]) not in EMPTY for row in rows)]
    table = Table(title=inert(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, collapse_padding=True, **options)
    for i in keep:
        columns[i].add_to(table)
    for row in rows:
        table.add_row(*(inert(row[i]) for i in keep))
    return table


def _cell_text(cell: object) -> Text:
    """A cell as the table prints it: a ``Text`` as it is, markup read (control characters visible)."""
    shown = inert(cell) if isinstance(cell, Text) else Text.from_markup(inert(str(cell)))
    return shown if isinstance(shown, Text) else Text(str(shown))


def plain_table(title: str, columns: list[Column], rows: list[list], width: int) -> Text | None:
    """``compact_table(title, columns, rows, hide_empty=False)`` as it prints when every cell
    fits on one line: the same characters, laid out here in one pass rather than by rich's
    table (which measures and renders each of a few thousand cells: most of ``runner ls``'s
    time over 100 runs). None when it would not fit ``width`` (rich's table then shrinks it)."""
    cells = [[_cell_text(cell) for cell in row] for row in rows]
    if any("\n" in cell.plain for row in cells for cell in row):
        return None
    widths = [max([cell_len(c.header)] + [cell_len(row[i].plain) for row in cells]) for i, c in enumerate(columns)]
    total = sum(widths) + 2 * (len(widths) - 1)
    if total > width:
        return None

    def line(values: list[Text], style: str = "") -> Text:
        out = Text(style=style)
        for i, (value, column) in enumerate(zip(values, columns)):
            pad = " " * (widths[i] - cell_len(value.plain))
            out.append_text(Text(pad) + value if column.number else value + Text(pad))
            if i < len(columns) - 1:
                out.append("  ")
        return out

    heading = Text.from_markup(inert(title))
    heading.append(" " * max(total - cell_len(heading.plain), 0))
    lines = [heading, line([Text(c.header) for c in columns], "bold"), Text("─" * total), *map(line, cells)]
    return Text("\n").join(lines)


def key_values(rows: list[tuple[str, str]]) -> Table:
    """Two columns, a name and its value (which may wrap), without a header."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(inert(key), inert(value))
    return table


def hanging(lead: str, detail: str, width: int, indent: int) -> list[str]:
    """``lead`` and ``detail`` wrapped to ``width`` columns, every line after the first indented
    by ``indent`` (its details under it, never back to column 0); a word longer than a line (a
    path, a URL) is kept whole on a line of its own, never folded."""
    wrapper = textwrap.TextWrapper(width=max(width, indent + 24), initial_indent=lead,
                                   subsequent_indent=" " * indent, break_long_words=False,
                                   break_on_hyphens=False)
    return wrapper.wrap(detail) or [lead.rstrip()]


def hanging_text(lead: Text, detail: str, width: int, indent: int) -> Text:
    """``lead`` (styled, the runner's) then ``detail`` (data: shown as it is, control
    characters visible), wrapped with a hanging indent at ``width``; print it with
    ``soft_wrap=True`` (already wrapped: rich must neither wrap nor cut it again)."""
    lines = hanging(lead.plain, visible(detail), width, indent)
    first = lead.copy()
    first.append(lines[0][len(lead.plain):])
    return Text("\n").join([first, *(Text(line) for line in lines[1:])])


def whole(value: object, style: str = "") -> Text:
    """A path or a command as a line of its own that is never wrapped, folded or cut: a copy
    of the line is the path. Printed alone, with ``soft_wrap=True`` (``console.print`` joins
    bare texts into one and drops their own settings); inside a group, with ``crop=False``."""
    return Text(visible(str(value)), style=style, no_wrap=True, overflow="ignore")
