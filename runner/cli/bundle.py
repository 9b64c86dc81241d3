"""``runner bundle``: sign a result folder again, or pack it for transport."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner.bundle import make_bundle, pack
from runner.errors import UserError
from runner.keys import load_signer
from runner.verify.custody import require_intact


def _folder(text: str) -> Path:
    folder = Path(text)
    if not (folder / "result.json").is_file():
        raise UserError(f"{folder} is not a result folder (no result.json)", "pass a folder written by 'runner reproduce'")
    return folder


def sign(args) -> int:
    console = Console()
    folder = _folder(args.result_dir)
    # A folder bundled before is signed again only as it was signed (runner.verify.custody).
    require_intact(folder, "signing it again", unbundled_ok=True)
    signer = load_signer()
    bundle = make_bundle(folder, signer)
    for warning in bundle.warnings:
        console.print(f"[yellow]warning[/]: {warning}")
    if bundle.signed:
        console.print(f"signed {len(bundle.files)} files with key {bundle.keyid[:16]}: {bundle.envelope}")
    return 0 if bundle.signed else 1


def pack_command(args) -> int:
    out = pack(_folder(args.result_dir), Path(args.out) if args.out else None)
    Console().print(f"packed {out}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bundle", help="sign a result folder, or pack it as a deterministic .tar.gz",
        description="A bundle is a result folder plus bundle/manifest.json (every file's "
        "sha256) and bundle/statement.dsse.json (the signed claim). 'runner reproduce' makes it.",
    )
    sub = p.add_subparsers(dest="bundle_command", metavar="ACTION", required=True)
    s = sub.add_parser("sign", help="(re)write the manifest and sign it with your key")
    s.add_argument("result_dir", help="a result folder, e.g. results/mnist-cnn-cpu/<run_id>")
    s.set_defaults(func=sign)
    k = sub.add_parser("pack", help="write the bundle as a byte-reproducible .tar.gz")
    k.add_argument("result_dir", help="a bundled result folder")
    k.add_argument("-o", "--out", metavar="FILE", help="output file (default: <result_dir>.tar.gz beside it)")
    k.set_defaults(func=pack_command)
