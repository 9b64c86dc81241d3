"""``runner verify``'s arguments."""

DESCRIPTION = ("Open BUNDLE (a result folder or .tar.gz) safely and check its signature, "
               "files, scores, time-to-accuracy, hardware and cost against your own keys, labels and "
               "hardware profiles. Exit 0 only when every check passes.")


def register(parser) -> None:
    parser.add_argument("bundle", help="a result folder or its .tar.gz")
    parser.add_argument("--trusted-keys", metavar="PATH",
                        help="a *.pub.json file or a folder of them (default: your own public key)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
