"""``runner audit BUNDLE --replay``: re-evaluate a bundle's models with Docker."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner.cli.verify import print_checks
from runner.errors import UserError
from runner.verify.replay import replay


def run(args) -> int:
    if not args.replay:
        raise UserError("runner audit needs --replay (the only audit that needs Docker)",
                        "run `runner audit BUNDLE --replay`, or `runner verify BUNDLE` for the offline checks")
    console = Console(highlight=False)
    checks = replay(Path(args.bundle))
    print_checks(console, checks)
    failed = [c.name for c in checks if not c.ok]
    if failed:
        console.print(f"[red bold]NOT replayed[/]: {', '.join(failed)}")
        return 1
    console.print("[green bold]replayed[/]: the bundle's predictions are what its models give")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "audit", help="rebuild a bundle's entry and re-evaluate its models (needs Docker)",
        description="Rebuild the entry image from the bundle's own entry files, re-evaluate the "
        "crossing checkpoint and the final model with the runner's evaluator on your own data, and "
        "require the bundle's predictions (exactly on CPU; within 0.1%% of items on GPUs).",
    )
    p.add_argument("bundle", help="a result folder or its .tar.gz")
    p.add_argument("--replay", action="store_true", help="re-evaluate the crossing checkpoint and final model")
    p.set_defaults(func=run)
