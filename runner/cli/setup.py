"""``runner setup``: get this host ready to build entries (idempotent, quick when done).

Installs ``docker.io`` and ``debootstrap`` when missing (Debian-like hosts, as root),
starts ``dockerd`` when it is not running, and builds the default base image.
"""

from __future__ import annotations

import shutil

from rich.console import Console

from runner import keys, paths
from runner.engine import engine_version, ensure_engine
from runner.engine.daemon import apt_install
from runner.engine.kinds import choose, current
from runner.images import ensure_base

DEFAULT_BASE = "python3.11-bookworm"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "setup", help="install/start the Docker engine and debootstrap, build the default base image"
    )
    p.add_argument("--base", default=DEFAULT_BASE, help=f"base image to build (default {DEFAULT_BASE})")
    p.add_argument("--no-install", action="store_true",
                   help="only check and start; never install packages")
    p.add_argument("--engine", choices=["docker", "podman"],
                   help="the container engine for this and later commands on this host (default: the one "
                        "chosen before, else docker); podman runs rootful with the runc runtime")
    p.set_defaults(func=run)


def run(args) -> int:
    console = Console()

    if args.engine:
        choose(args.engine)
    client = ensure_engine(install=not args.no_install)
    version = engine_version(client)
    console.print(f"[green]ok[/] {current().name} engine {version['version']} (API {version['api']})")
    if shutil.which("debootstrap") is None:
        if args.no_install:
            console.print("[yellow]missing[/] debootstrap (rerun without --no-install)")
            return 1
        with console.status("installing debootstrap"):
            apt_install(["debootstrap"], paths.home() / "logs" / "apt.log")
    console.print(f"[green]ok[/] debootstrap ({shutil.which('debootstrap')})")
    with console.status(f"building base image {args.base} (about a minute the first time)"):
        base = ensure_base(args.base, client)
    state = f"built in {base.seconds:.0f} s" if base.built else "present"
    console.print(f"[green]ok[/] base image {base.tag} {state}")
    # Results are signed from the first run on; an existing key is never replaced.
    private = keys.default_private_path()
    if not private.exists():
        keys.generate()
        console.print(f"[green]ok[/] signing key created in {private.parent}")
    else:
        console.print(f"[green]ok[/] signing key {private}")
    return 0
