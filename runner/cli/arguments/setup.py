"""``runner setup``'s arguments."""

DEFAULT_BASE = "python3.11-bookworm"

DESCRIPTION = ("Get this host ready to build entries (idempotent, quick when done): install docker.io "
               "and debootstrap when missing (Debian-like hosts, as root), start the engine when it is "
               "not running, build the default base image and create the signing key.")


def register(parser) -> None:
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"base image to build (default {DEFAULT_BASE})")
    parser.add_argument("--no-install", action="store_true",
                        help="only check and start; never install packages")
    parser.add_argument("--engine", choices=["docker", "podman", "charliecloud", "host"],
                        help="the container engine for this and later commands on this host (default: the one "
                             "chosen before, else docker); podman runs rootful with the runc runtime; charliecloud runs with no "
                             "daemon; host runs entries with this host's Python, no image (results never count)")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="host engine only: accept a host without bubblewrap (runs must pass it too)")
