"""``runner setup``: get this host ready to build entries (idempotent, quick when done).

Installs the engine (``docker.io``, ``podman`` or Charliecloud's packages) and ``mmdebstrap``
(else ``debootstrap``) when missing (Debian-like hosts, as root), starts the engine's daemon
where it has one, checks that it can run entries with the runner's guarantees. The default base image is built by the
first build that needs it, while that build fetches its wheels and stages its data
(``--base NAME`` builds one now); the host engine has none: it lists the host's Python
environment instead.
"""

from __future__ import annotations

import os
import shutil

from rich.console import Console
from rich.markup import escape

from runner import keys, paths
from runner.engine import ensure_engine
from runner.engine.daemon import apt_install
from runner.engine.host import UNSANDBOXED_ENV
from runner.engine.kinds import choose, current
from runner.errors import UserError
from runner.cli.arguments.setup import DEFAULT_BASE
from runner.images import ensure_base, find_base
from runner.images.debootstrap import TOOL_ENV, bootstrap_tool


def run(args) -> int:
    console = Console()

    if args.engine:
        choose(args.engine)
    if args.unsandboxed:
        if current().name != "host":
            raise UserError("--unsandboxed is for the host engine only", "add --engine host, or leave it out")
        os.environ[UNSANDBOXED_ENV] = "1"
    engine = ensure_engine(install=not args.no_install)
    version = engine.version()
    console.print(f"[green]ok[/] {current().name} engine {version.version} (API {version.api})")
    refusal = engine.refusal()
    if refusal:  # it answers, but `runner reproduce` would refuse every run: say so now
        console.print(f"[red]refused[/] {escape(refusal)}; `runner doctor` says what this host has")
        return 1
    if engine.own_root:  # no image to build: the entries run with this host's Python
        facts = engine.facts()
        console.print(f"[green]ok[/] host environment: Python {facts['version']} at {escape(facts['python'])}, "
                      f"sandbox {facts['sandbox']}; results of this engine never count")
    elif not _base_image(console, args, engine):
        return 1
    # Results are signed from the first run on; an existing key is never replaced.
    private = keys.default_private_path()
    if not private.exists():
        keys.generate()
        console.print(f"[green]ok[/] signing key created in {private.parent}")
    else:
        console.print(f"[green]ok[/] signing key {private}")
    return 0


def _base_image(console: Console, args, engine) -> bool:
    """A bootstrap tool installed and the default base image built (every engine with images).
    mmdebstrap is installed where it is missing (it builds the base in half debootstrap's
    time); where that fails, debootstrap builds it."""
    if not args.no_install and shutil.which("mmdebstrap") is None and not os.environ.get(TOOL_ENV):
        try:
            with console.status("installing mmdebstrap"):
                apt_install(["mmdebstrap"], paths.home() / "logs" / "apt.log")
        except UserError as err:
            if shutil.which("debootstrap") is None:
                raise
            console.print(f"[yellow]not installed[/] mmdebstrap ({escape(err.problem)}): debootstrap builds base images",
                          soft_wrap=True)
    if bootstrap_tool() is None:
        if args.no_install:
            console.print("[yellow]missing[/] mmdebstrap or debootstrap (rerun without --no-install)")
            return False
        with console.status("installing debootstrap"):
            apt_install(["debootstrap"], paths.home() / "logs" / "apt.log")
    name, path = bootstrap_tool() or ("?", "?")
    console.print(f"[green]ok[/] {name} ({path})")
    if args.base is None:  # built by the first build that needs it, beside its wheels and data
        found = find_base(DEFAULT_BASE, engine)
        state = (f"{found.tag} present" if found else
                 f"{DEFAULT_BASE}: built by the first `runner build` or `runner reproduce`, "
                 "while it fetches the wheels and stages the data (`runner setup --base NAME` builds it now)")
        console.print(f"[green]ok[/] base image {state}", soft_wrap=True)
        return True
    with console.status(f"building base image {args.base} (about a minute the first time)"):
        base = ensure_base(args.base, engine)
    state = f"built in {base.seconds:.0f} s" if base.built else "present"
    console.print(f"[green]ok[/] base image {base.tag} {state}")
    return True
