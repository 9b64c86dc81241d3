"""``runner images list|build NAME``: base image recipes in ``images/``."""

from __future__ import annotations

from rich.console import Console

from runner.engine import get_client
from runner.terminal import Column, compact_table
from runner.images import available, ensure_base, find_base, load_recipe


def register(subparsers) -> None:
    p = subparsers.add_parser("images", help="list or build the base images (recipes in images/)")
    sub = p.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    lister = sub.add_parser("list", help="show each recipe, its tag and whether it is built")
    lister.set_defaults(func=list_images)
    builder = sub.add_parser("build", help="build (or pull by digest) one base image")
    builder.add_argument("name", help="recipe folder name, e.g. python3.11-bookworm")
    builder.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    builder.set_defaults(func=build_image)


def list_images(args) -> int:
    client = get_client()
    rows = []
    for name in available():
        recipe = load_recipe(name)
        found = find_base(name, client)
        ref = recipe.tag if recipe.kind == "debootstrap" else recipe.reference
        rows.append([name, recipe.kind, found.id[7:19] if found else "[yellow]no[/]", ref])
    Console().print(compact_table("base images", [
        Column("name"), Column("kind"), Column("built"), Column("tag or pinned reference", wrap=True)], rows))
    return 0


def build_image(args) -> int:
    client = get_client()
    console = Console()
    with console.status(f"building base image {args.name} (debootstrap takes about a minute)"):
        base = ensure_base(args.name, client, force=args.force)
    state = f"built in {base.seconds:.0f} s" if base.built else "already present"
    console.print(f"{base.name}: {base.tag} ({base.id[:19]}) {state}")
    return 0
