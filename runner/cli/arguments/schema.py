"""``runner schema``'s arguments."""

DESCRIPTION = "Print the JSON Schema of entry.yaml, or check an entry's manifest."


def register(parser) -> None:
    parser.add_argument("--result", action="store_true", help="print result.json's schema instead")
    parser.add_argument("--check", metavar="ENTRY", help="validate ENTRY/entry.yaml instead")
