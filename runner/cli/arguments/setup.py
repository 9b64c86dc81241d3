"""``runner setup``'s arguments."""

DEFAULT_BASE = "python3.11-bookworm"

DESCRIPTION = ("Get this host ready to build entries (idempotent, quick when done): install docker.io "
               "and debootstrap when missing (Debian-like hosts, as root), start the engine when it is "
               "not running, and create the signing key (the base image is built by the first build that needs it).")


def register(parser) -> None:
    parser.add_argument("--base", default=None, metavar="NAME",
                        help=f"build this base image now (e.g. {DEFAULT_BASE}); by default the first build "
                             "that needs one builds it, beside its wheels and data")
    parser.add_argument("--no-install", action="store_true",
                        help="only check and start; never install packages")
    parser.add_argument("--engine", choices=["docker", "podman", "charliecloud", "host"],
                        help="the container engine for this and later commands on this host (default: the one "
                             "chosen before, else docker); podman runs rootful with the runc runtime; charliecloud runs with no "
                             "daemon; host runs entries with this host's Python, no image (results never count)")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="host engine only: accept a host without bubblewrap (runs must pass it too)")
