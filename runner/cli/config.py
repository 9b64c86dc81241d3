"""``runner config``: the user's settings the host cannot tell (MLPerf submitter fields)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from runner.terminal import Column, compact_table, hanging_text, whole

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
    rows = []
    for key, (meaning, allowed) in config.KEYS.items():
        value = values.get(key)
        # The allowed values are plain text: "[open|closed]" would be read as rich markup and vanish.
        rows.append([f"{config.SECTION}.{key}", escape(value) if value else "[dim](not set)[/]",
                     escape(meaning) + (f"; one of: {' | '.join(allowed)}" if allowed else "")])
    # the key is what `runner config set` takes: never cut short
    Console().print(compact_table(f"settings ({paths.config_path()})", [
        Column("key"), Column("value", wrap=True), Column("what it is", wrap=True)], rows, hide_empty=False))
    print_missing(Console(highlight=False), config.load_submission())
    return 0


def print_missing(console: Console, submission) -> None:
    """The MLPerf submitter warning, here and in ``runner export mlperf`` only (a run's MLPerf
    log leaves the settings not made out, and says nothing): which keys an MLPerf submission
    still needs, and the command that sets the first."""
    from runner.mlperf.training_log import missing_submission_keys  # lazy: start-up (the MLPerf log's tables)

    missing = missing_submission_keys(submission)
    if missing:
        lead = Text.assemble(("MLPerf submission", "yellow"), ": ")
        why = (f"not set: {', '.join(missing)} (`runner export mlperf` needs every one; a run's MLPerf log "
               "leaves them out). Fix:")
        console.print(hanging_text(lead, why, console.width, 4), soft_wrap=True)
        console.print(whole(config.set_command(missing[0])), soft_wrap=True)  # a command: whole, never folded
