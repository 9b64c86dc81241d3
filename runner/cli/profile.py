"""``runner profile``: list, show and match hardware profiles."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from runner.fingerprint import capture_host, load_fingerprint
from runner.profiles import list_profiles, load_profile, match


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "profile",
        help="list, show or check hardware profiles (hardware_profiles/*.yaml)",
        description="Hardware profiles name the hardware a claim was made on, and its price.",
    )
    sub = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="every profile with its GPUs, limits and price").set_defaults(func=run_list)
    show = sub.add_parser("show", help="one profile's rules and price")
    show.add_argument("id", help="profile id (file name without .yaml)")
    show.set_defaults(func=run_show)
    m = sub.add_parser("match", help="check a host against a profile; exit 1 on any mismatch")
    m.add_argument("id", metavar="PROFILE", help="profile id")
    m.add_argument("fingerprint", metavar="FINGERPRINT_JSON", nargs="?",
                   help="a fingerprint file (e.g. a result's fingerprint.json); default: capture this host")
    m.set_defaults(func=run_match)


def _hardware(profile) -> str:
    if profile.gpu:
        g = profile.gpu
        return f"{g.count}x /{g.name_pattern}/ {g.memory_gib:g} GiB"
    limits = profile.container_limits
    return f"CPU: {limits.cpus:g} cpus, {limits.memory}" if limits else "CPU"


def run_list(args) -> int:
    table = Table(title="hardware profiles")
    table.add_column("id", no_wrap=True)  # the thing a user types next: never cut short
    for column in ("instance", "hardware", "USD/h", "priced in, on"):
        table.add_column(column)
    for pid in list_profiles():
        p = load_profile(pid)
        table.add_row(
            p.id, f"{p.cloud or '-'} {p.instance_type or ''}".strip(), _hardware(p),
            f"{p.price.usd_per_hour:g}", f"{p.price.region}, {p.price.date}",
        )
    Console().print(table)
    return 0


def run_show(args) -> int:
    p = load_profile(args.id)
    console = Console()
    console.print(f"[bold]{p.id}[/]  {p.description}")
    if p.cloud or p.instance_type:
        console.print(f"instance: {p.cloud or '-'} {p.instance_type or ''}")
    if p.gpu:
        g = p.gpu
        console.print(
            f"GPU rules: {g.count} GPUs named /{g.name_pattern}/, {g.memory_gib:g} GiB each (within 5%)"
            + (f", compute capability {g.compute_capability}" if g.compute_capability else "")
            + (", MIG allowed" if g.allow_mig else ", MIG disabled")
            + (f", driver >= {g.min_driver}" if g.min_driver else "")
        )
    c = p.cpu
    cpu_rules = [
        f"architecture {c.architecture}" if c.architecture else None,
        f"vendor {c.vendor}" if c.vendor else None,
        f"model /{c.model_pattern}/" if c.model_pattern else None,
        f">= {c.min_logical_cores} logical cores" if c.min_logical_cores else None,
        f"<= {c.max_logical_cores} logical cores" if c.max_logical_cores else None,
        f"flags {' '.join(c.required_flags)}" if c.required_flags else None,
        f">= {c.min_memory_gib:g} GiB memory" if c.min_memory_gib else None,
    ]
    console.print("CPU rules: " + (", ".join(r for r in cpu_rules if r) or "none"))
    if p.container_limits:
        console.print(f"container limits: {p.container_limits.cpus:g} cpus, {p.container_limits.memory}")
    pr = p.price
    console.print(f"price: ${pr.usd_per_hour:g}/h on demand, {pr.region}, read {pr.date}")
    console.print(f"  source: {pr.source}")
    if pr.note:
        console.print(f"  note: {pr.note}")
    return 0


def run_match(args) -> int:
    profile = load_profile(args.id)
    fingerprint = load_fingerprint(args.fingerprint) if args.fingerprint else capture_host()
    where = args.fingerprint or "this host"
    mismatches = match(profile, fingerprint)
    # Plain print, not rich: one line per mismatch, never wrapped, easy to grep.
    if not mismatches:
        print(f"{where} matches hardware profile {profile.id}")
        return 0
    print(f"{where} does not match hardware profile {profile.id}: {len(mismatches)} mismatch(es)")
    for m in mismatches:
        print(f"  - {m}")
    return 1
