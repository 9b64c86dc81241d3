"""The keys a command trusts: one set, which every command that judges a signature reads
through ``trusted_keys``.

``--trusted-keys PATH`` (a ``*.pub.json`` or a folder of them) when given; else the trust
store under the runner's home (``<home>/trusted-keys/<keyid>.pub.json``, filled by ``runner
keys trust`` and ``runner keys generate``) and your own signing key's public key. A key that
merely sits beside bundles (``results/archive/keys/``, a bundle's ``bundle/signer.pub.json``)
is never trusted by default: whoever wrote the bundles could have written it too. It is
trusted when you say so, with ``runner keys trust FILE``.

A folder of keys (``--trusted-keys FOLDER``, ``runner keys trust FOLDER``) is someone else's
folder: each ``*.pub.json`` is read through ``runner.safe_read`` (a regular file, no link, at
most 64 KiB of JSON), and one that cannot be read as a key is skipped with a one-line warning
naming it and why, the folder's other keys still used; a folder without one usable key is
refused. A single file given, or a file in the trust store (your own folder), that is not a
key is refused, naming it.

Each stored key has a sidecar ``<keyid>.origin.json``: the file it was trusted from and when
(UTC). The store holds keys exactly as ``runner keys generate`` writes them, so the folder
itself can be passed to ``--trusted-keys`` elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from securesystemslib.signer import SSlibKey

from runner import paths, safe_read
from runner.errors import UserError
from runner.keys import PUBLIC_SUFFIX, configured_public_key, configured_public_path, public_key_json, read_public_key

ORIGIN_SUFFIX = ".origin.json"
OWN_KEY = "your signing key"  # a TrustedKey's source when it is trusted as yours
MIN_PREFIX = 8  # hex digits of a key id that untrust accepts


@dataclass(frozen=True)
class TrustedKey:
    key: SSlibKey
    source: str  # the file it was trusted from, or OWN_KEY
    added: str | None  # when it entered the store (UTC, ISO 8601); None for your key outside it
    path: Path  # its file

    @property
    def keyid(self) -> str:
        return self.key.keyid

    def to_dict(self) -> dict:
        return {"keyid": self.keyid, "source": self.source, "added": self.added, "path": str(self.path)}


def trusted_keys(option: str | Path | None) -> list[SSlibKey]:
    """The keys to trust: ``option`` (``--trusted-keys``: a file or a folder of ``*.pub.json``)
    when given, else the trust store and your own signing key."""
    if option:
        return _keys_at(Path(option).expanduser())
    return [t.key for t in list_trusted()]


def list_trusted() -> list[TrustedKey]:
    """What ``trusted_keys(None)`` trusts: the store's keys by id, then your own key when the
    store lacks it. A file in the store that is not a valid key is refused, naming it."""
    store = paths.trusted_keys_dir()
    found = [_stored(f) for f in sorted(store.glob("*" + PUBLIC_SUFFIX))] if store.is_dir() else []
    own = configured_public_key()
    if own is not None and own.keyid not in {t.keyid for t in found}:
        path = configured_public_path()
        assert path is not None  # the key was just read from it (configured_public_key)
        found.append(TrustedKey(own, OWN_KEY, None, path))
    return found


def trust(file: str | Path, inside: Path | None = None) -> SSlibKey:
    """Copy a public key into the store (its id recomputed from the key, the file rewritten
    canonically); trusting a key again changes nothing. With ``inside`` (a folder of keys), the
    file must be a regular file in it, not a link."""
    source = Path(file).expanduser()
    key = read_public_key(source if inside is not None else source.resolve(), inside)
    store = paths.trusted_keys_dir()
    target = store / (key.keyid + PUBLIC_SUFFIX)
    if _text_of(target) == public_key_json(key):
        return key
    store.mkdir(parents=True, exist_ok=True)
    origin = {"source": str(source.resolve()), "added": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    _write(store / (key.keyid + ORIGIN_SUFFIX), json.dumps(origin, indent=2, sort_keys=True) + "\n")
    _write(target, public_key_json(key))
    return key


def untrust(keyid: str) -> str:
    """Take a key out of the store by its id or a unique start of it (at least 8 hex digits);
    the full id of the key taken out."""
    prefix = keyid.strip().lower()
    if not re.fullmatch(f"[0-9a-f]{{{MIN_PREFIX},64}}", prefix):
        raise UserError(f"{keyid!r} is not a key id", f"give at least {MIN_PREFIX} hex digits of an id "
                        "that `runner keys list` shows")
    store = paths.trusted_keys_dir()
    ids = [f.name.removesuffix(PUBLIC_SUFFIX) for f in sorted(store.glob("*" + PUBLIC_SUFFIX))] if store.is_dir() else []
    found = [i for i in ids if i.startswith(prefix)]
    if len(found) != 1:
        listed = ", ".join(i[:16] for i in (found or ids)) or "none"
        raise UserError(f"{'no trusted key' if not found else f'{len(found)} trusted keys'} with an id starting {prefix} in "
                        f"{store} ({'matching' if found else 'trusted'}: {listed})",
                        "give more of the id" if found else "pass an id that `runner keys list` shows")
    (store / (found[0] + PUBLIC_SUFFIX)).unlink()
    (store / (found[0] + ORIGIN_SUFFIX)).unlink(missing_ok=True)
    return found[0]


def _stored(path: Path) -> TrustedKey:
    """A key of the store with its origin; a file that is not the key it is named for is refused."""
    keyid = path.name.removesuffix(PUBLIC_SUFFIX)
    fix = f"run 'runner keys untrust {keyid}', then trust the key again from its publisher's file"
    try:
        key = read_public_key(path, path.parent)
    except UserError as err:
        raise UserError(f"the trust store's {path} is not a valid key ({err.problem})", fix) from None
    if key.keyid != keyid:
        raise UserError(f"the trust store's {path} holds key {key.keyid[:16]}, not the key it is named for", fix)
    try:
        origin = safe_read.read_json(path.with_name(keyid + ORIGIN_SUFFIX), "key", path.parent)
    except UserError:
        origin = {}
    origin = origin if isinstance(origin, dict) else {}
    return TrustedKey(key, str(origin.get("source") or "unknown"), origin.get("added"), path)


def _keys_at(path: Path) -> list[SSlibKey]:
    """The keys of a ``*.pub.json`` file, or of every one in a folder (``keys_in``)."""
    if path.is_dir():
        return keys_in(path)
    if not path.exists():
        raise UserError(f"no trusted key file at {path}", "pass a *.pub.json file or a folder of them")
    return [read_public_key(path.resolve())]  # a file you name may be a link you made


def keys_in(folder: Path) -> list[SSlibKey]:
    """The keys of every ``*.pub.json`` in ``folder``: one that cannot be read as a key (a
    FIFO, a link, a giant, not JSON, not a key) is skipped with a one-line warning naming it;
    a folder without one usable key is refused."""
    files = sorted(folder.glob("*" + PUBLIC_SUFFIX))
    if not files:
        raise UserError(f"no *{PUBLIC_SUFFIX} files in {folder}", "put the publishers' public keys there")
    found, skipped = [], []
    for file in files:
        try:
            found.append(read_public_key(file, folder))
        except UserError as err:
            skipped.append(err.problem)
            warn(f"{err.problem}; skipped (the other keys of {safe_read.visible(str(folder))} are used)")
    if not found:
        raise UserError(f"no usable key in {safe_read.visible(str(folder))} ({len(skipped)} skipped: {skipped[0]})",
                        "put the publishers' *.pub.json files there, as `runner keys generate` writes them")
    return found


def warn(text: str) -> None:
    """One warning line on stderr (a key skipped), whatever the command prints on stdout."""
    print(f"runner: warning: {' '.join(text.split())}", file=sys.stderr)


def _text_of(path: Path) -> str | None:
    """A store file's text, None when there is none to read."""
    try:
        return safe_read.read_text(path, "key")
    except UserError:
        return None


def _write(path: Path, text: str) -> None:
    """``text`` to a temporary file that then replaces ``path`` (never half a key)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {err.strerror or err}",
                        f"free space on (or fix permissions of) {path.parent} and retry") from None
