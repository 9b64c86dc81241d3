"""``runner config``'s arguments."""

DESCRIPTION = ("Settings the host cannot tell about itself (the MLPerf submitter's fields: organisation, "
               "division, status, storage, cooling...), kept in the runner home's config.yaml.")


def register(parser) -> None:
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    s = sub.add_parser("set", help="set one value, e.g. runner config set mlperf.org \"My Lab\"",
                       description="Set one setting. A key with a fixed set of values (mlperf.division, "
                       "mlperf.status, mlperf.system_type) takes only those; `runner config show` lists them.")
    s.add_argument("key", help="mlperf.<key>; 'runner config show' lists them")
    s.add_argument("value")
    s.set_defaults(func="set_value")
    u = sub.add_parser("unset", help="remove one value, e.g. runner config unset mlperf.org",
                       description="Remove one setting from config.yaml; what needs it says so again.")
    u.add_argument("key", help="mlperf.<key>; 'runner config show' lists them")
    u.set_defaults(func="unset_value")
    sh = sub.add_parser("show", help="list every setting, its value and its allowed values",
                        description="List every setting: its key, its value (or not set), what it is "
                        "and, where only some values are allowed, which.")
    sh.set_defaults(func="show")
