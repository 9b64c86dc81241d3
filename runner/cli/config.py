"""``runner config``: the user's settings the host cannot tell (MLPerf submitter fields)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner import paths
from runner.mlperf import config


def set_value(args) -> int:
    path = config.set_value(args.key, args.value)
    print(f"{args.key} = {args.value!r}  ({path})")
    return 0


def unset_value(args) -> int:
    path, was_set = config.unset_value(args.key)
    print(f"{args.key} unset  ({path})" if was_set else f"{args.key} was not set  ({path})")
    return 0


def show(args) -> int:
    values = config.load_settings()
    table = Table(title=f"settings ({paths.config_path()})")
    for col in ("key", "value", "what it is"):
        table.add_column(col)
    for key, (meaning, allowed) in config.KEYS.items():
        value = values.get(key)
        # The allowed values are plain text: "[open|closed]" would be read as rich markup and vanish.
        table.add_row(f"{config.SECTION}.{key}", escape(value) if value else "[dim](not set)[/]",
                      escape(meaning) + (f"; one of: {' | '.join(allowed)}" if allowed else ""))
    Console().print(table)
    return 0
