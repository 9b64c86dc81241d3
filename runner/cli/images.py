"""``runner images list|build NAME``: base image recipes in ``images/``."""

from __future__ import annotations

from rich.console import Console

from runner.engine import get_engine
from runner.terminal import Column, compact_table
from runner.images import available, ensure_base, find_base, load_recipe


def list_images(args) -> int:
    engine = get_engine()
    rows = []
    for name in available():
        recipe = load_recipe(name)
        found = find_base(name, engine)
        ref = recipe.tag if recipe.kind == "debootstrap" else recipe.reference
        rows.append([name, recipe.kind, found.id[7:19] if found else "[yellow]no[/]", ref])
    Console().print(compact_table("base images", [
        Column("name"), Column("kind"), Column("built"), Column("tag or pinned reference", wrap=True)], rows))
    return 0


def build_image(args) -> int:
    engine = get_engine()
    console = Console()
    with console.status(f"building base image {args.name} (debootstrap takes about a minute)"):
        base = ensure_base(args.name, engine, force=args.force)
    state = f"built in {base.seconds:.0f} s" if base.built else "already present"
    console.print(f"{base.name}: {base.tag} ({base.id[:19]}) {state}")
    return 0
