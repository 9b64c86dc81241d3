"""Result bundles: a result folder's files, their digests and a signed claim about them.

``make_bundle`` adds ``bundle/manifest.json`` (every file's sha256) and, with a signer,
``bundle/statement.dsse.json`` (an in-toto Statement v1 in a DSSE envelope, Ed25519) and
``bundle/signer.pub.json``. ``pack`` writes the folder as a deterministic ``.tar.gz``.
``open_bundle`` opens someone else's bundle safely for ``runner verify``.

The runner signs a run once, when it is finished (``finish_folder``: its record, finished in
memory, written once as result.json, then the folder signed, which changes nothing in it),
keeping its record of what it measured outside the folder (``runner.bundle.measured``); a
later signature (``sign_again``, ``sign_folder``: ``runner bundle sign``, ``runner reinfer``)
is given only to a folder whose files still match that record. ``make_bundle`` bundles any
folder (leaving out what verify would refuse, and recording a ledger place, in its result.json).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from securesystemslib.signer import Signer

from runner import paths, safe_read
from runner.bundle.claim import PREDICATE_TYPE, build_predicate
from runner.results import assemble
from runner.results.record import RESULT_FILE, Result
from runner.bundle.filelist import (
    ENVELOPE,
    PROFILE_FILE,
    SIGNER_KEY,
    file_digests,
    unverifiable,
    write_manifest,
)
from runner.bundle.measured import record_measured, require_measured
from runner.bundle.open import Limits, OpenedBundle, UnsafeBundleError, open_bundle
from runner.bundle.signing import PAYLOAD_TYPE, sign_statement, write_envelope
from runner.bundle.statement import build_statement
from runner.bundle.tarball import pack_folder
from runner.errors import UserError
from runner.keys import load_signer, public_key_dict
from runner.keys.ledger import appending
from runner.report import reporter


__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "PROFILE_FILE",
    "Bundle",
    "Limits",
    "OpenedBundle",
    "UnsafeBundleError",
    "bundle_name",
    "make_bundle",
    "open_bundle",
    "pack",
    "record_measured",
    "settle_outputs",
    "finish_folder",
    "sign_again",
    "sign_folder",
]


@dataclass(frozen=True)
class Bundle:
    root: Path
    manifest: Path
    envelope: Path | None  # None when unsigned
    keyid: str | None
    files: dict[str, str]  # path -> sha256, what the statement covers
    warnings: list[str] = field(default_factory=list)
    ledger: dict | None = None  # its place in the key's ledger (result.json's ``ledger``), when recorded

    @property
    def signed(self) -> bool:
        return self.envelope is not None


def _read_result(result_dir: Path) -> Result:
    path = result_dir / RESULT_FILE
    try:
        return Result.read(result_dir)
    except FileNotFoundError:
        raise UserError(f"{result_dir} has no result.json", "bundle a folder written by 'runner reproduce'") from None
    except ValueError as err:
        raise UserError(f"{path} is not a result ({err})", "re-run the reproduction") from None


def _add_profile(result_dir: Path, result: Result, warnings: list[str]) -> None:
    """Copy the run's hardware profile in, so its price and rules are signed with the claim."""
    target = result_dir / PROFILE_FILE
    if target.exists():
        return
    profile_id = (result.hardware or {}).get("profile") or (result.cost.profile if result.cost else None)
    source = paths.profiles_dir() / f"{profile_id}.yaml" if profile_id else None
    if source is None or not source.is_file():
        warnings.append(
            f"no hardware profile {profile_id!r} to include; verify's hardware and cost checks will fail"
        )
        return
    shutil.copyfile(source, target)


def _leave_out_unverifiable(result_dir: Path, result: Result, warnings: list[str]) -> bool:
    """Never sign what ``runner verify`` refuses to open. Files the entry wrote under
    ``output/`` that verify would refuse (a link, a FIFO, a hard link, a file over verify's
    per-file limit, a sparse 100 GiB file among them, or more than its total) are removed,
    unread, and named in the result's notes (``result``, in memory: the caller writes it);
    any other such file refuses the bundle. Returns whether anything was left out."""
    refused = unverifiable(result_dir)
    if not refused:
        return False
    runner_owned = [r for r in refused if not r.entry_output]
    if runner_owned:
        raise UserError(
            f"{result_dir} cannot be bundled: runner verify would refuse "
            + "; ".join(map(str, runner_owned[:5])) + (f" and {len(runner_owned) - 5} more" if len(runner_owned) > 5 else ""),
            "remove or shrink those files where the run wrote them, then `runner reproduce` the entry again",
        )
    for item in refused:
        path = result_dir / item.path
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    named = "; ".join(map(str, refused[:10])) + (f"; and {len(refused) - 10} more" if len(refused) > 10 else "")
    note = f"left out of the bundle, unread, because runner verify would refuse them: {named}"
    assemble.left_out(result, note)
    warnings.append(note)
    return True


def settle_outputs(result_dir: Path, result: Result) -> None:
    """At the end of a run, before the runner records what it measured: the entry's outputs
    that verify would refuse (a FIFO, a link, a sparse giant) are left out, unread, and named
    in its record (``result``, not yet written), so the record and the signature cover the
    same files."""
    warnings: list[str] = []
    _leave_out_unverifiable(Path(result_dir), result, warnings)
    for warning in warnings:
        reporter().print(f"[yellow]{warning}[/]", highlight=False)


def make_bundle(result_dir: Path, signer: Signer | None = None, *, ledger: bool = False) -> Bundle:
    """Write ``bundle/manifest.json`` and, when ``signer`` is given, the signed statement.

    Any earlier bundle files are replaced, so re-bundling after a change is safe. Without
    a signer the bundle is unsigned: the returned warnings say so and verify will fail
    its signature checks. With ``ledger`` (the runner signing a run: ``sign_folder``,
    ``runner bundle sign``) the signing is remembered in the key's ledger
    (``runner.keys.ledger``): result.json records its place before it is hashed, and the
    line with its digest is appended once it is signed, the ledger locked in between.
    """
    result_dir = Path(result_dir)
    if not result_dir.is_dir():
        raise UserError(f"no result folder at {result_dir}", "pass a folder written by 'runner reproduce'")
    warnings: list[str] = []
    result = _read_result(result_dir)
    _add_profile(result_dir, result, warnings)
    for rel in (ENVELOPE, SIGNER_KEY):
        (result_dir / rel).unlink(missing_ok=True)
    if _leave_out_unverifiable(result_dir, result, warnings):  # before a byte is hashed
        result.write(result_dir)
    if signer is None:
        return _manifest_only(result_dir, warnings)
    if not ledger:
        return _sign(result_dir, result, signer, warnings)
    with appending(signer.public_key.keyid) as book:
        place = book.position(result.entry.name, bool(result.smoke), result.run_id)
        assemble.ledgered(result, place)
        result.write(result_dir)
        bundle = _sign(result_dir, result, signer, warnings)
        _append(book, place, result, bundle)
    return replace(bundle, ledger=place)


def finish_folder(result_dir: Path, result: Result, clock=None, *, sign: bool) -> Bundle | None:
    """The end of a run this runner measured: its record (``result``: finished in memory, the
    cross-seed record and the outputs left out in it) is written once as result.json, with
    its timings (``clock``) ending in "writing", then the folder, now finished, is signed once
    (``_sign`` writes the files under ``bundle/`` and changes nothing else), and the runner's
    record of what it measured is brought up to date. The signing key's ledger place goes
    into the record before it is written, the ledger locked from then until its line is
    appended. With ``sign`` False (``--no-sign``) the folder is only written (None); with no key
    it gets an unsigned manifest."""
    result_dir = Path(result_dir)

    def write() -> None:
        if clock is not None:
            result.write_last(result_dir, clock)
        else:
            result.write(result_dir)

    signer = load_signer() if sign else None
    if not sign:
        write()
        record_measured(result_dir)
        return None
    if signer is None:
        write()
        bundle = _manifest_only(result_dir, [])
        record_measured(result_dir, bundle.files)
    else:
        with appending(signer.public_key.keyid) as book:
            place = book.position(result.entry.name, bool(result.smoke), result.run_id)
            assemble.ledgered(result, place)
            write()
            bundle = replace(_sign(result_dir, result, signer, []), ledger=place)
            _append(book, place, result, bundle)
        record_measured(result_dir, bundle.files)
    _said(bundle)
    return bundle


def _manifest_only(result_dir: Path, warnings: list[str]) -> Bundle:
    """An unsigned bundle: the manifest only, and a warning that says so."""
    digests = file_digests(result_dir)
    manifest = write_manifest(result_dir, digests)
    warnings.append(
        "the bundle is NOT signed: no signing key is configured "
        "(run 'runner keys generate', or set RUNNER_SIGNING_KEY)"
    )
    return Bundle(result_dir, manifest, None, None, digests, warnings)


def _append(book, place: dict, result: Result, bundle: Bundle) -> None:
    """The ledger's line for a signed run: its place, its verdict and its result's digest."""
    training = result.training
    book.append(place, entry=result.entry.name, smoke=bool(result.smoke), run_id=result.run_id,
                seed=result.seed, verdict={"status": result.status, "conforming": result.conforming is True,
                                           "reached": bool(training and training.reached)},
                result_sha256=bundle.files[RESULT_FILE], folder=bundle.root)


def _sign(result_dir: Path, result: Result, signer: Signer, warnings: list[str]) -> Bundle:
    """The manifest, the signed statement and the signer's public key, for the folder as it is."""
    digests = file_digests(result_dir)
    manifest = write_manifest(result_dir, digests)
    statement = build_statement(digests, PREDICATE_TYPE, build_predicate(result, digests))
    envelope = sign_statement(statement, signer)
    write_envelope(result_dir / ENVELOPE, envelope)
    (result_dir / SIGNER_KEY).write_text(
        json.dumps(public_key_dict(signer.public_key), indent=2, sort_keys=True) + "\n"
    )
    return Bundle(result_dir, manifest, result_dir / ENVELOPE, signer.public_key.keyid, digests, warnings)


def _sign_and_record(result_dir: Path) -> Bundle:
    """Sign with the configured key (unsigned without one) and record what was signed as
    what this runner measured (``runner.bundle.measured``)."""
    bundle = make_bundle(result_dir, load_signer(), ledger=True)
    record_measured(result_dir, bundle.files)
    return bundle


def sign_again(result_dir: Path, action: str, *, rewritten: Iterable[str] = (),
               fields: Iterable[str] = ()) -> Bundle:
    """A later signature of a run this runner measured (``runner bundle sign``, ``runner
    reinfer``): refused unless every file is as the runner's record says (less ``rewritten``
    paths and result.json ``fields``, what ``action`` wrote itself), then signed and recorded."""
    require_measured(result_dir, action, rewritten=rewritten, fields=fields)
    return _sign_and_record(result_dir)


def sign_folder(result_dir: Path, *, again: str | None = None, rewritten: Iterable[str] = (),
                fields: Iterable[str] = ()) -> Bundle:
    """Bundle a result folder with the configured key, saying so when there is none. Without
    ``again`` it is the signature at the end of a run (the folder is what the run measured:
    the record is written); with ``again`` (the action, for a refusal) it is ``sign_again``."""
    bundle = sign_again(result_dir, again, rewritten=rewritten, fields=fields) if again else _sign_and_record(result_dir)
    _said(bundle)
    return bundle


def _said(bundle: Bundle) -> None:
    """The signature said (or that there is none: once per command), and what was left out."""
    if not bundle.signed:  # the same for every run of the command: said once
        reporter().warn_once(
            "[yellow]not signed[/]: no signing key is configured. "
            "Fix: run `runner keys generate`, then `runner reproduce` again"
        )
    else:
        place = bundle.ledger
        reporter().print(f"[bold]bundle[/] signed by key {(bundle.keyid or '')[:16]}" + (
            f" (ledger index {place['index']}, run {place['entry_runs']} of this entry)" if place else ""))
    for warning in bundle.warnings:
        if warning.startswith("left out of the bundle"):
            reporter().print(f"[yellow]{warning}[/]", highlight=False)


def bundle_name(result_dir: Path) -> str:
    """``<entry>-<run_id>.tar.gz``: the name a packed bundle goes by, as in the archive
    (``results/archive/``), read from the folder's result.json."""
    try:
        raw = safe_read.read_json_object(Path(result_dir) / RESULT_FILE, "result")
        name = f"{raw['entry']['name']}-{raw['run_id']}.tar.gz"
    except (ValueError, KeyError, TypeError) as err:
        raise UserError(f"{result_dir}/{RESULT_FILE} names no entry and run id ({type(err).__name__})",
                        "pack a result folder written by runner reproduce") from None
    if Path(name).name != name or name.startswith("."):
        raise UserError(f"{result_dir}/{RESULT_FILE} names an entry or run id that is no file name ({name!r})",
                        "pack a result folder written by runner reproduce")
    return name


def pack(result_dir: Path, out_path: Path | None = None) -> Path:
    """The bundle as a deterministic ``.tar.gz`` (default: ``bundle_name`` beside the folder)."""
    result_dir = Path(result_dir)
    out = Path(out_path) if out_path is not None else result_dir.parent / bundle_name(result_dir)
    return pack_folder(result_dir, out)
