"""Ed25519 signing keys: generate a pair, load the signer, read a public key file.

The private key is a PEM file only its owner can read; the public key is a JSON file in
securesystemslib's key format plus its ``keyid``, so it can be published as it is.
Default place: ``runner.paths.keys_dir()`` (``signing.key``, ``signing.pub.json``);
``RUNNER_SIGNING_KEY`` names another private key file (its public key sits beside it), or
a securesystemslib private-key URI (``file2:PATH``, ``gcpkms:...``, ``awskms:...``,
``azurekms:...``, ``hsm:...``, ``hv:...``) with ``RUNNER_SIGNING_PUBKEY`` naming its public
key's JSON, so a CI or a cluster can sign with a key that never sits on its disk. A public
key file that is not the private key's own half is refused, when signing and when trusting.
Which keys a command trusts is ``runner.keys.trust``'s.

Every key file is read through ``runner.safe_read`` (kind ``key``: a regular file of at most
64 KiB, opened without blocking; a public key is depth-capped, finite JSON): a FIFO, device or
sparse giant where a key should be is refused on one line naming it. A link is followed only
where you configured it (``RUNNER_SIGNING_KEY``, ``RUNNER_SIGNING_PUBKEY``, a file you name).
The advice names what is wrong: a private key file others can read is told ``chmod 600`` on
the file, a key folder others can write (who could swap the key) ``chmod 700`` on the folder,
and a folder given where the key file belongs is told which file to name.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from securesystemslib.signer import SIGNER_FOR_URI_SCHEME, CryptoSigner, Key, Signer, SSlibKey

from runner import paths, safe_read
from runner.errors import UserError

PRIVATE_NAME = paths.SIGNING_KEY_NAME
PUBLIC_SUFFIX = ".pub.json"
ENV_VAR = paths.SIGNING_KEY_ENV
PUBKEY_ENV_VAR = "RUNNER_SIGNING_PUBKEY"


def key_uri_scheme(value: str) -> str | None:
    """The securesystemslib scheme of a private-key URI, None for a plain file path."""
    scheme, sep, _ = value.partition(":")
    return scheme if sep and scheme in SIGNER_FOR_URI_SCHEME else None


def signer_from_uri(uri: str, public: Path | None = None) -> Signer:
    """A signer for a key given by URI (``Signer.from_priv_key_uri``); the public key comes
    from ``public``, ``RUNNER_SIGNING_PUBKEY``, or beside a ``file2:`` key."""
    scheme = key_uri_scheme(uri)
    if public is None and os.environ.get(PUBKEY_ENV_VAR):
        public = Path(os.environ[PUBKEY_ENV_VAR]).expanduser()
    if public is None and scheme == "file2":
        public = public_path_for(Path(uri.partition(":")[2]))
    if public is None:
        raise UserError(f"the signing key {uri} has no public key given",
                        f"set {PUBKEY_ENV_VAR} to the key's public JSON (a *.pub.json file)")
    key = read_public_key(public.resolve())  # your own configuration: a link you made is followed
    if scheme == "file2":
        private = Path(uri.partition(":")[2]).expanduser()
        _require_pair(_public_half(private), key, private, public)
    try:
        return Signer.from_priv_key_uri(uri, key)
    except Exception as err:  # noqa: BLE001 - each scheme's library raises its own errors
        raise UserError(f"cannot load the {scheme} signing key {uri}: {type(err).__name__}: {err}",
                        f"check the URI and that {public} is its public key") from None


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public: Path
    keyid: str


def public_path_for(private: Path) -> Path:
    """``signing.key`` -> ``signing.pub.json`` (any ``X.key`` -> ``X.pub.json``)."""
    stem = private.name.removesuffix(".key")
    return private.with_name(stem + PUBLIC_SUFFIX)


def default_private_path() -> Path:
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else paths.keys_dir() / PRIVATE_NAME


def public_key_dict(key: Key) -> dict:
    return {"keyid": key.keyid, **key.to_dict()}


def public_key_json(key: SSlibKey) -> str:
    """A public key file's text, as ``runner keys generate`` writes it (and the trust store keeps it)."""
    return json.dumps(public_key_dict(key), indent=2, sort_keys=True) + "\n"


def _private_file() -> Path | None:
    """The configured private key's file, None for a key that is not a file here (KMS, HSM)."""
    configured = os.environ.get(ENV_VAR)
    scheme = key_uri_scheme(configured) if configured else None
    if configured and scheme == "file2":
        return Path(configured.partition(":")[2]).expanduser()
    return None if scheme else default_private_path()


def configured_public_path() -> Path | None:
    """The configured signing key's public JSON: ``RUNNER_SIGNING_PUBKEY``, else the
    ``*.pub.json`` beside the private key file; None for a KMS or HSM key without the variable."""
    if os.environ.get(PUBKEY_ENV_VAR):
        return Path(os.environ[PUBKEY_ENV_VAR]).expanduser()
    private = _private_file()
    return public_path_for(private) if private is not None else None


def configured_public_key() -> SSlibKey | None:
    """Your signing key's public key, None when no public key file is there; refused when
    the private key file beside it is of another pair."""
    public = configured_public_path()
    if public is None or not public.is_file():
        return None
    key = read_public_key(public.resolve())
    private = _private_file()
    if private is not None and private.is_file():
        _require_pair(_public_half(private), key, private, public)
    return key


def _public_half(private: Path) -> SSlibKey | None:
    """The public key of an Ed25519 private key file, None when it cannot be read as one
    (``load_signer`` says why when it signs)."""
    try:
        key = serialization.load_pem_private_key(safe_read.read_bytes(private, "key"), password=None)
    except (UserError, ValueError, TypeError):
        return None
    return CryptoSigner(key).public_key if isinstance(key, Ed25519PrivateKey) else None


def _require_pair(actual: SSlibKey | None, claimed: SSlibKey, private: Path, public: Path) -> None:
    """Refuse a public key file that is not the public half of the private key (``actual``:
    the private key's own public key; None when it could not be read, left to the signer)."""
    if actual is not None and actual.keyid != claimed.keyid:
        raise UserError(
            f"the public key {public} (key {claimed.keyid[:16]}) is not the public half of the signing key "
            f"{private} (key {actual.keyid[:16]})",
            "restore the public key file that belongs to this private key, or make a new pair with "
            "'runner keys generate --force'",
        )


def generate(out_dir: Path | None = None, force: bool = False) -> KeyPair:
    """Write a new Ed25519 pair; refuse to replace an existing key unless ``force``."""
    private = out_dir / PRIVATE_NAME if out_dir is not None else default_private_path()
    public = public_path_for(private)
    if not force and (private.exists() or public.exists()):
        raise UserError(
            f"a signing key already exists at {private if private.exists() else public}",
            "keep it, or pass --force to replace it (bundles signed with it will no longer "
            "verify against the new public key)",
        )
    private.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # a key folder only its owner can change
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_owner_only(private, pem)
    signer = CryptoSigner(key)
    try:
        public.write_text(public_key_json(signer.public_key))
    except OSError as err:
        private.unlink(missing_ok=True)
        public.unlink(missing_ok=True)
        raise UserError(f"cannot write the public key {public}: {err.strerror or err}",
                        f"free space on (or fix permissions of) {public.parent} and retry") from None
    return KeyPair(private, public, signer.public_key.keyid)


def _write_owner_only(path: Path, data: bytes) -> None:
    # Create with 0600 from the start so the key is never readable by others, even briefly.
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # a full disk fails here, not later on close
        os.chmod(tmp, 0o600)  # in case the umask or an ACL widened it
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)  # never leave a half-written key behind
        raise UserError(f"cannot write the signing key {path}: {err.strerror or err}",
                        f"free space on (or fix permissions of) {path.parent} and retry") from None


def load_signer(private: Path | None = None) -> Signer | None:
    """The configured signer, or None when no key is configured (the caller says so)."""
    configured = os.environ.get(ENV_VAR)
    if private is None and configured and key_uri_scheme(configured):
        return signer_from_uri(configured)
    path = private if private is not None else default_private_path()
    if not path.exists():
        if private is not None or os.environ.get(ENV_VAR):
            raise UserError(f"no signing key at {path}", f"run 'runner keys generate' or fix {ENV_VAR}")
        return None
    try:
        pem = safe_read.read_bytes(_private_key_file(path), "key")
    except safe_read.Unreadable as err:
        raise UserError(f"cannot read the signing key {err.problem}",
                        "restore the key file, or make a new pair with 'runner keys generate --force'") from None
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as err:
        raise UserError(f"cannot read the signing key {path}: {err}", "generate a new one with 'runner keys generate --force'") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"signing key {path} is not an Ed25519 key", "generate one with 'runner keys generate'")
    signer = CryptoSigner(key)
    public = public_path_for(path) if private is not None else configured_public_path()
    if public is not None and public.is_file():
        _require_pair(signer.public_key, read_public_key(public.resolve()), path, public)
    return signer


def _private_key_file(path: Path) -> Path:
    """The private key file ``path`` leads to (a link you made is followed), refused with the
    fix for what is actually wrong: a folder given for the file, a file others can read
    (``chmod 600`` the file), a folder others can write, who could swap the key (``chmod 700``
    the folder). A FIFO, device or giant is refused when it is read (``runner.safe_read``)."""
    real = path.resolve()
    if real.is_dir():
        inside = real / PRIVATE_NAME
        hint = f"set {ENV_VAR} to the key file {inside}" if inside.is_file() else \
            f"set {ENV_VAR} to a private key file (runner keys generate --out {real} writes {inside})"
        raise UserError(f"the signing key {path} is a folder, not a private key file", hint)
    info = real.stat()
    if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
        raise UserError(f"signing key {path} is readable by others (mode {info.st_mode & 0o777:o})",
                        f"run 'chmod 600 {real}'")
    folder = real.parent.stat()
    if folder.st_mode & 0o022 and not folder.st_mode & stat.S_ISVTX:
        raise UserError(f"the folder of the signing key {path}, {real.parent}, can be written by others "
                        f"(mode {folder.st_mode & 0o777:o}): they could replace the key",
                        f"run 'chmod 700 {real.parent}'")
    return real


def key_from_dict(data: dict, origin: str) -> SSlibKey:
    """A public key from its JSON; the keyid is recomputed, so a file cannot lie about it."""
    try:
        claimed = data.get("keyid")
        body = {k: data[k] for k in ("keytype", "scheme", "keyval")}
        if body["keytype"] != "ed25519" or body["scheme"] != "ed25519":
            raise ValueError(f"key type {body['keytype']}/{body['scheme']} is not ed25519")
        raw = bytes.fromhex(body["keyval"]["public"])
        key = SSlibKey.from_crypto(Ed25519PublicKey.from_public_bytes(raw), scheme="ed25519")
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise UserError(f"{origin} is not a public key file: {safe_read.visible(str(err))[:200]}",
                        "use a *.pub.json written by 'runner keys generate'") from None
    if claimed is not None and claimed != key.keyid:
        raise UserError(
            f"{origin} claims keyid {claimed} but its key's id is {key.keyid}",
            "use the public key file exactly as 'runner keys generate' wrote it",
        )
    return key


def read_public_key(path: Path, inside: Path | None = None) -> SSlibKey:
    """The public key of a ``*.pub.json`` file (``runner.safe_read``: a regular file, no link, at
    most 64 KiB of depth-capped, finite JSON; with ``inside``, resolving inside that folder)."""
    try:
        data = safe_read.read_json(path, "key", inside)
    except UserError as err:
        raise UserError(f"cannot read public key {err.problem}", "pass a *.pub.json file") from None
    if not isinstance(data, dict):
        raise UserError(f"{safe_read.visible(str(path))} is not a public key file (it holds a JSON "
                        f"{type(data).__name__})", "pass a *.pub.json file")
    return key_from_dict(data, safe_read.visible(str(path)))
