"""``runner config``: the user's settings the host cannot tell (MLPerf submitter fields)."""

from __future__ import annotations

from rich.console import Console
from runner.terminal import Column, compact_table

from runner import paths
from runner.mlperf import config


def set_value(args) -> int:
    path = config.set_value(args.key, args.value)
    print(f"{args.key} = {args.value!r}  ({path})")
    return 0


def show(args) -> int:
    values = config.load_settings()
    rows = []
    for key, (meaning, allowed) in config.KEYS.items():
        value = values.get(key)
        rows.append([f"{config.SECTION}.{key}", value if value else "[dim](not set)[/]",
                     meaning + (f" [{'|'.join(allowed)}]" if allowed else "")])
    # the key is what `runner config set` takes: never cut short
    Console().print(compact_table(f"settings ({paths.config_path()})", [
        Column("key"), Column("value", wrap=True), Column("what it is", wrap=True)], rows, hide_empty=False))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "config", help="set or show your settings (MLPerf submitter, storage, cooling...)",
        description="Settings the host cannot tell about itself, kept in the runner home's config.yaml.",
    )
    sub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    s = sub.add_parser("set", help="set one value, e.g. runner config set mlperf.org \"My Lab\"")
    s.add_argument("key", help="mlperf.<key>; 'runner config show' lists them")
    s.add_argument("value")
    s.set_defaults(func=set_value)
    sh = sub.add_parser("show", help="list every setting and its value")
    sh.set_defaults(func=show)
