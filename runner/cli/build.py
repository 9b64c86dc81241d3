"""``runner build entries/NAME``: build an entry's image hermetically and show its SBOM."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from runner.entry_build import build_entry, framework_versions, version_of
from runner.engine import get_engine
from runner.errors import BuildError
from runner.manifest import load_entry
from runner.terminal import Column, compact_table


def run(args) -> int:
    entry = load_entry(args.entry)
    engine = get_engine()
    console = Console()
    try:
        built = build_entry(entry, engine, no_cache=args.no_cache)  # the build draws its own progress
    except BuildError as err:
        if args.verbose and err.build_log:  # the output that explains it
            console.print("".join(err.build_log), markup=False, highlight=False)
        raise
    if args.verbose:
        console.print("".join(built.log), markup=False, highlight=False)
    how = "cache hit" if built.cached else "built"
    console.print(f"{entry.name}: {built.tag} ({built.image_id[:19]}) {how} in {built.seconds:.1f} s")
    console.print(f"base: {built.base.tag} ({built.base.id[:19]})")
    shown = framework_versions(built.sbom)
    shown |= {name: v for name in ("numpy", "onnxruntime") if (v := version_of(built.sbom, name))}
    console.print(f"SBOM: {len(built.sbom['python'])} Python, {len(built.sbom['debian'])} Debian packages"
                  + (f"; {', '.join(f'{k} {v}' for k, v in shown.items())}" if shown else ""))
    if args.sbom:
        rows = [[kind, escape(item["name"]), escape(item["version"])]
                for kind in ("python", "debian") for item in built.sbom[kind]]
        console.print(compact_table(f"{entry.name} SBOM", [Column("kind"), Column("name", wrap=True),
                                                           Column("version", wrap=True)], rows))
    return 0
