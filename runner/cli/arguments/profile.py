"""``runner profile``'s arguments."""

DESCRIPTION = ("Hardware profiles name the hardware a claim was made on, and its price: the rules a "
               "host's fingerprint must meet (GPU name, count and memory; CPU vendor, model and cores) "
               "and what an hour of it costs.")


def register(p) -> None:
    sub = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="every profile with its GPUs, limits and price",
                   description="Every profile in hardware_profiles/: its instance, the hardware its rules "
                   "ask for, and its price.").set_defaults(func="run_list")
    show = sub.add_parser("show", help="one profile's rules and price",
                          description="One profile's matching rules, container limits and price, with "
                          "the price's source.")
    show.add_argument("id", help="profile id (file name without .yaml)")
    show.set_defaults(func="run_show")
    m = sub.add_parser("match", help="check a host against a profile; exit 1 on any mismatch",
                       description="Check this host (or a saved fingerprint) against a profile's rules: "
                       "one line per mismatch; exit 0 only when it matches.")
    m.add_argument("id", metavar="PROFILE", help="profile id")
    m.add_argument("fingerprint", metavar="FINGERPRINT_JSON", nargs="?",
                   help="a fingerprint file (e.g. a result's fingerprint.json); default: capture this host")
    m.set_defaults(func="run_match")
