"""``runner keys``'s arguments."""

from runner.paths import SIGNING_KEY_ENV, SIGNING_KEY_NAME

DESCRIPTION = ("Manage the Ed25519 key 'runner reproduce' signs bundles with "
               f"(default {SIGNING_KEY_NAME} under the runner home; {SIGNING_KEY_ENV} names another), "
               "and the keys you trust: the trust store under the runner home, which ls, show, verify, "
               "audit and the leaderboard read unless --trusted-keys is given.")


def register(p) -> None:
    sub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    g = sub.add_parser("generate", help="write a new key pair (private key readable only by you)",
                       description="Write a new Ed25519 key pair: the private key (mode 600) and its public "
                       "JSON, which auditors pass to --trusted-keys; the key is added to your trust store. "
                       "An existing key is kept unless --force.")
    g.add_argument("-o", "--out", metavar="DIR",
                   help="folder for signing.key and signing.pub.json (default: the runner home's keys/)")
    g.add_argument("--force", action="store_true", help="replace an existing key")
    g.set_defaults(func="generate")
    s = sub.add_parser("show", help="print the configured public key and its id",
                       description="Print the key id, type and files of the key results are signed with.")
    s.add_argument("--json", action="store_true", help="print the public key file as JSON")
    s.set_defaults(func="show")
    t = sub.add_parser("trust", help="trust public keys: copy them into the trust store",
                       description="Copy each public key (a *.pub.json, or every one in a folder) into the "
                       "trust store under the runner home, checking that its id is its key's. Commands trust "
                       "the store's keys and your own; keys beside bundles (results/archive/keys/) are trusted "
                       "only once you trust them here.")
    t.add_argument("file", nargs="+", metavar="FILE", help="a *.pub.json file, or a folder of them")
    t.set_defaults(func="trust")
    ls = sub.add_parser("list", help="list the keys commands trust by default",
                        description="List the trust store's keys (where each was trusted from and when) "
                        "and your own signing key: the keys a command trusts without --trusted-keys.")
    ls.add_argument("--json", action="store_true", help="print the keys as JSON")
    ls.set_defaults(func="list_trusted")
    u = sub.add_parser("untrust", help="take a key out of the trust store",
                       description="Remove a key from the trust store by its id, or a unique start of it "
                       "(at least 8 hex digits).")
    u.add_argument("keyid", metavar="ID", help="the key's id, or a unique start of it")
    u.set_defaults(func="untrust")
