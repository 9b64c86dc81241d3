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
