"""``runner setup``: get this host ready to build entries (idempotent, quick when done).

Installs the engine (``docker.io``, ``podman`` or Charliecloud's packages) and ``debootstrap``
when missing (Debian-like hosts, as root), starts the engine's daemon where it has one, checks
that it can run entries with the runner's guarantees, and builds the default base image.
"""

from __future__ import annotations

import shutil

from rich.console import Console
from rich.markup import escape

from runner import keys, paths
from runner.engine import ensure_engine
from runner.engine.daemon import apt_install
from runner.engine.kinds import choose, current
from runner.images import ensure_base


def run(args) -> int:
    console = Console()

    if args.engine:
        choose(args.engine)
    engine = ensure_engine(install=not args.no_install)
    version = engine.version()
    console.print(f"[green]ok[/] {current().name} engine {version.version} (API {version.api})")
    refusal = engine.refusal()
    if refusal:  # it answers, but `runner reproduce` would refuse every run: say so now
        console.print(f"[red]refused[/] {escape(refusal)}; `runner doctor` says what this host has")
        return 1
    if shutil.which("debootstrap") is None:
        if args.no_install:
            console.print("[yellow]missing[/] debootstrap (rerun without --no-install)")
            return 1
        with console.status("installing debootstrap"):
            apt_install(["debootstrap"], paths.home() / "logs" / "apt.log")
    console.print(f"[green]ok[/] debootstrap ({shutil.which('debootstrap')})")
    with console.status(f"building base image {args.base} (about a minute the first time)"):
        base = ensure_base(args.base, engine)
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
