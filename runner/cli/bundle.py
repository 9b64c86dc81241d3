"""``runner bundle``: sign a result folder again, or pack it for transport.

``sign`` signs only a run this runner measured, as it measured it: the folder is held to its
bundle when it has one (``runner.verify.custody``: intact, and signed by this key), then to the
runner's record of the run (``runner.bundle.sign_again``), which a deleted bundle does not erase.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.bundle import bundle_name, pack, sign_again
from runner.errors import UserError
from runner.safe_read import visible
from runner.verify.custody import require_intact


def _folder(text: str) -> Path:
    folder = Path(text)
    if not (folder / "result.json").is_file():
        raise UserError(f"{folder} is not a result folder (no result.json)", "pass a folder written by 'runner reproduce'")
    return folder


def sign(args) -> int:
    console = Console()
    folder = _folder(args.result_dir)
    # A folder bundled before is signed again only as it was signed (runner.verify.custody),
    # and any folder only as this runner measured it (runner.bundle.measured).
    require_intact(folder, "signing it again", unbundled_ok=True)
    bundle = sign_again(folder, "signing it again")
    for warning in bundle.warnings:
        console.print(f"[yellow]warning[/]: {escape(visible(warning))}")
    if bundle.signed:
        assert bundle.keyid is not None  # a signed bundle names its key (runner.bundle.sign_folder)
        console.print(f"signed {len(bundle.files)} files with key {bundle.keyid[:16]}: {bundle.envelope}")
    return 0 if bundle.signed else 1


def pack_command(args) -> int:
    """<entry>-<run_id>.tar.gz in -o/--out DIR (a folder, as every --out), else beside the folder."""
    folder = _folder(args.result_dir)
    target = None
    if args.out:
        out = Path(args.out)
        if out.name.endswith(".tar.gz") and not out.is_dir():
            raise UserError(f"-o/--out names the folder to write into, not the bundle's file ({out})",
                            f"pass a folder: the bundle is named {bundle_name(folder)} (<entry>-<run_id>.tar.gz, "
                            "as in the archive)")
        target = out / bundle_name(folder)
    out = pack(folder, target)
    Console().print(f"packed {out}")
    return 0
