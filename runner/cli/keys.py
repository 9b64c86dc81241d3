"""``runner keys``: the Ed25519 key that signs result bundles, and the keys you trust."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import keys
from runner.errors import UserError
from runner.safe_read import visible
from runner.keys import trust as store
from runner.terminal import json_text


def generate(args) -> int:
    """A new pair; the one reproduce signs with is also added to your trust store (a pair
    written elsewhere is trusted once RUNNER_SIGNING_KEY names it, or with `runner keys trust`)."""
    out = Path(args.out).expanduser() if args.out else None
    configured = out is None or out.resolve() == keys.default_private_path().parent.resolve()
    replaced = _keyid_at(keys.public_path_for(out / keys.PRIVATE_NAME if out else keys.default_private_path()))
    pair = keys.generate(out, force=args.force)
    console = Console()
    console.print(f"private key  {pair.private}  (mode 600: keep it secret)")
    console.print(f"public key   {pair.public}  (publish it; auditors pass it to --trusted-keys)")
    console.print(f"key id       {pair.keyid}")
    if not configured:
        console.print(f"[yellow]note[/]: reproduce signs with {keys.default_private_path()}; "
                      f"set {keys.ENV_VAR}={pair.private} to sign with this key")
        return 0
    store.trust(pair.public)
    console.print("trusted      yes: added to your trust store (`runner keys list`)")
    if replaced and replaced != pair.keyid and replaced in {t.keyid for t in store.list_trusted()}:
        console.print(f"[yellow]note[/]: the replaced key {replaced[:16]} is still trusted; "
                      f"`runner keys untrust {replaced[:16]}` stops trusting it")
    return 0


def _keyid_at(public: Path) -> str | None:
    """The id of the key a public file holds, None when there is none to read."""
    try:
        return keys.read_public_key(public).keyid if public.is_file() else None
    except UserError:
        return None


def show(args) -> int:
    private = keys.default_private_path()
    public = keys.configured_public_path() or keys.public_path_for(private)
    key = keys.configured_public_key()
    if key is None:
        raise UserError(f"no signing key is configured (looked for {public})", "run 'runner keys generate'")
    if args.json:
        print(json_text(keys.public_key_dict(key), indent=2, sort_keys=True))
        return 0
    console = Console()
    console.print(f"key id       {key.keyid}")
    console.print(f"type         {key.keytype} ({key.scheme})")
    console.print(f"public key   {escape(visible(str(public)))}")
    console.print(f"private key  {escape(visible(str(private)))}" + ("" if private.exists() else "  [red](missing: cannot sign)[/]"))
    return 0


def trust(args) -> int:
    """Each FILE, or every ``*.pub.json`` of a folder: in a folder, a file that is not a key is
    skipped with a warning naming it (``runner.keys.trust.keys_in``'s rule)."""
    for name in args.file:
        path = Path(name).expanduser()
        folder = path if path.is_dir() else None
        files = sorted(path.glob("*" + keys.PUBLIC_SUFFIX)) if folder else [path]
        if not files:
            raise UserError(f"no *{keys.PUBLIC_SUFFIX} files in {path}", "pass the publishers' public key files")
        trusted = 0
        for file in files:
            known = {t.keyid for t in store.list_trusted() if t.source != store.OWN_KEY}
            try:
                key = store.trust(file, folder)
            except UserError as err:
                if folder is None:
                    raise
                store.warn(f"{err.problem}; skipped")
                continue
            trusted += 1
            print(f"{'already trusted' if key.keyid in known else 'trusted'} {key.keyid}  ({visible(str(file))})")
        if folder is not None and not trusted:
            raise UserError(f"no usable key in {visible(str(path))}", "pass the publishers' public key files")
    return 0


def list_trusted(args) -> int:
    found = store.list_trusted()
    if args.json:
        print(json_text([t.to_dict() for t in found], indent=2))
        return 0
    if not found:
        print("no trusted keys: `runner keys trust FILE` adds one, `runner keys generate` makes yours")
    for t in found:
        when = f", added {t.added}" if t.added else ""
        print(f"{t.keyid}  {visible(t.source)}{visible(when)}")
    return 0


def untrust(args) -> int:
    keyid = store.untrust(args.keyid)
    own = keys.configured_public_key()
    note = "; still trusted as your signing key" if own is not None and own.keyid == keyid else ""
    print(f"untrusted {keyid}{note}")
    return 0
