"""``runner ledger``'s arguments."""

DESCRIPTION = ("Show or export the ledger of every run your signing key signed (an append-only hash chain "
               "under the runner home): what `runner verify --ledger` holds bundles to, and where `runner ls` "
               "takes \"k of N runs of this entry with this key\" from.")


def register(p) -> None:
    sub = p.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    s = sub.add_parser("show", help="list the runs the key signed, entry by entry",
                       description="Check the key's ledger chain and list its lines (index, time, entry, run, "
                       "seed, verdict, result digest), with how many runs of each entry the key made.")
    s.add_argument("--key", metavar="KEYID", help="the key id (or its start) whose ledger to show "
                   "(default: the configured signing key)")
    s.add_argument("--entry", metavar="ENTRY", help="only this entry's runs")
    s.add_argument("--json", action="store_true", help="print the lines as JSON")
    s.set_defaults(func="show")
    e = sub.add_parser("export", help="write the ledger to publish beside your bundles",
                       description="Check the key's ledger chain and write it as <key id>.jsonl, its local "
                       "folders cut (they are not hashed): auditors pass it to `runner verify --ledger`.")
    e.add_argument("--key", metavar="KEYID", help="the key id (or its start) whose ledger to export "
                   "(default: the configured signing key)")
    e.add_argument("-o", "--out", metavar="DIR", help="folder to write <key id>.jsonl in (default: here)")
    e.set_defaults(func="export")
