"""``runner keys``'s arguments."""

from runner.paths import SIGNING_KEY_ENV, SIGNING_KEY_NAME

DESCRIPTION = ("Manage the Ed25519 key 'runner reproduce' signs bundles with "
               f"(default {SIGNING_KEY_NAME} under the runner home; {SIGNING_KEY_ENV} names another).")


def register(p) -> None:
    sub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    g = sub.add_parser("generate", help="write a new key pair (private key readable only by you)",
                       description="Write a new Ed25519 key pair: the private key (mode 600) and its public "
                       "JSON, which auditors pass to --trusted-keys. An existing key is kept unless --force.")
    g.add_argument("-o", "--out", metavar="DIR",
                   help="folder for signing.key and signing.pub.json (default: the runner home's keys/)")
    g.add_argument("--force", action="store_true", help="replace an existing key")
    g.set_defaults(func="generate")
    s = sub.add_parser("show", help="print the configured public key and its id",
                       description="Print the key id, type and files of the key results are signed with.")
    s.add_argument("--json", action="store_true", help="print the public key file as JSON")
    s.set_defaults(func="show")
