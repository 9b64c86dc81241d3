"""``runner verify``'s arguments."""

from runner.cli.argtypes import trusted_keys_argument

DESCRIPTION = ("Open each BUNDLE (a result folder or .tar.gz) safely and check its signature, "
               "files, scores, time-to-accuracy, hardware and cost against the keys you trust, your labels and "
               "hardware profiles; several bundles of one key are held to each other's place in the key's "
               "ledger, and to the ledger itself with --ledger. The exit code is the verdict: 0 verified and the run "
               "counts; 1 not verified (a check failed); 3 verified but the run does not count (incomplete, "
               "non-conforming, a smoke run, a study's variant, not isolated by its engine), with the reasons "
               "one per line; 2 a usage error. Several bundles: the worst of them.")


def register(parser) -> None:
    parser.add_argument("bundle", nargs="+", help="a result folder or its .tar.gz (several: their ledger places "
                        "are checked together)")
    parser.add_argument("--ledger", metavar="FILE", action="append", default=[],
                        help="a key's ledger as its owner published it (`runner ledger export`): the chain and "
                        "each bundle of that key at its index (repeatable, one per key)")
    trusted_keys_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON (with verified, counts and the reasons)")
