"""``runner ledger``: the runs a signing key signed (``runner.keys.ledger``)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import keys
from runner.errors import UserError
from runner.keys.ledger import ledger_dir, ledger_keys, ledger_path, published, read_ledger, runs_of
from runner.results.folder import write_text_atomically
from runner.results.layout import short_id
from runner.terminal import Column, compact_table, yes_no, json_text


def _configured_keyid() -> str | None:
    key = keys.configured_public_key()
    return key.keyid if key is not None else None


def _keyid(option: str | None) -> str:
    """The key whose ledger to read: ``--key`` (an id or a unique start), else the configured key."""
    have = ledger_keys()
    if option:
        found = [k for k in have if k.startswith(option.lower())]
        if len(found) != 1:
            raise UserError(f"{'no' if not found else len(found)} ledger(s) of a key {option!r} under "
                            f"{ledger_dir()}", "pass a key id `runner ledger show` lists, in full")
        return found[0]
    keyid = _configured_keyid()
    if keyid is None:
        raise UserError("no signing key is configured, so no ledger is yours",
                        "pass --key KEYID" + (f" (ledgers here: {', '.join(k[:16] for k in have)})" if have else ""))
    return keyid


def show(args) -> int:
    keyid = _keyid(args.key)
    lines = read_ledger(keyid)
    chosen = [line for line in lines if args.entry in (None, line["entry"])]
    if args.json:
        print(json_text({"key": keyid, "ledger": str(ledger_path(keyid)), "lines": chosen}, indent=2))
        return 0
    console = Console(highlight=False)
    console.print(f"key {keyid[:16]}: {len(lines)} signing(s), chain intact"
                  + (f", head {lines[-1]['hash'][:16]}" if lines else ""))
    console.print(f"[dim]{escape(str(ledger_path(keyid)))}[/]", soft_wrap=True)
    if not chosen:
        return 0
    cells = [[str(line["index"]), line["time"][:16].replace("T", " "), escape(line["entry"]),
              short_id(line["run_id"]) + (" smoke" if line["smoke"] else ""), str(line["seed"]),
              str(line["verdict"].get("status")), yes_no(line["verdict"].get("reached") is True),
              yes_no(line["verdict"].get("conforming") is True), line["result_sha256"][:12]] for line in chosen]
    columns = [Column("#", number=True), Column("signed (UTC)"), Column("entry", wrap=True), Column("run"),
               Column("seed", number=True), Column("status"), Column("reached"), Column("conforming"),
               Column("result")]
    console.print(compact_table(None, columns, cells, hide_empty=False))
    for entry in dict.fromkeys(line["entry"] for line in chosen):
        real, smoke = len(runs_of(lines, entry, False)), len(runs_of(lines, entry, True))
        console.print(f"{escape(entry)}: {real} run{'s' if real != 1 else ''} with this key"
                      + (f" (and {smoke} smoke run{'s' if smoke != 1 else ''})" if smoke else ""))
    return 0


def export(args) -> int:
    keyid = _keyid(args.key)
    lines = read_ledger(keyid)
    if not lines:
        raise UserError(f"key {keyid[:16]} has signed nothing yet (no ledger)", "sign a run first (`runner reproduce`)")
    folder = Path(args.out).expanduser() if args.out else Path.cwd()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{keyid}.jsonl"
    write_text_atomically(target, [json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n"
                                   for line in published(lines)])
    console = Console(highlight=False)
    console.print(f"wrote {escape(str(target))}", soft_wrap=True)
    console.print(f"{len(lines)} lines, head {lines[-1]['hash'][:16]}; auditors pass it to "
                  "`runner verify BUNDLE... --ledger FILE`")
    return 0
