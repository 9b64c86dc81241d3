"""``runner keys``: the Ed25519 key that signs result bundles."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from runner import keys
from runner.errors import UserError


def generate(args) -> int:
    pair = keys.generate(Path(args.out).expanduser() if args.out else None, force=args.force)
    console = Console()
    console.print(f"private key  {pair.private}  (mode 600: keep it secret)")
    console.print(f"public key   {pair.public}  (publish it; auditors pass it to --trusted-keys)")
    console.print(f"key id       {pair.keyid}")
    if args.out and Path(args.out).expanduser().resolve() != keys.default_private_path().parent.resolve():
        console.print(f"[yellow]note[/]: reproduce signs with {keys.default_private_path()}; "
                      f"set {keys.ENV_VAR}={pair.private} to sign with this key")
    return 0


def show(args) -> int:
    private = keys.default_private_path()
    public = keys.public_path_for(private)
    if not public.exists():
        raise UserError(f"no signing key is configured (looked for {public})", "run 'runner keys generate'")
    key = keys.read_public_key(public)
    if args.json:
        print(json.dumps(keys.public_key_dict(key), indent=2, sort_keys=True))
        return 0
    console = Console()
    console.print(f"key id       {key.keyid}")
    console.print(f"type         {key.keytype} ({key.scheme})")
    console.print(f"public key   {public}")
    console.print(f"private key  {private}" + ("" if private.exists() else "  [red](missing: cannot sign)[/]"))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "keys", help="create or show the key that signs result bundles",
        description="Manage the Ed25519 key 'runner reproduce' signs bundles with "
        f"(default {keys.PRIVATE_NAME} under the runner home; {keys.ENV_VAR} names another).",
    )
    sub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    g = sub.add_parser("generate", help="write a new key pair (private key readable only by you)")
    g.add_argument("--out", metavar="DIR", help="folder for signing.key and signing.pub.json (default: the runner home's keys/)")
    g.add_argument("--force", action="store_true", help="replace an existing key")
    g.set_defaults(func=generate)
    s = sub.add_parser("show", help="print the configured public key and its id")
    s.add_argument("--json", action="store_true", help="print the public key file as JSON")
    s.set_defaults(func=show)
