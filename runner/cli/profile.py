"""``runner profile``: list, show and match hardware profiles."""

from __future__ import annotations

from rich.console import Console

from runner.fingerprint import capture_host, load_fingerprint
from runner.profiles import describe_pattern, list_profiles, load_profile, match
from runner.terminal import Column, compact_table


def _hardware(profile) -> str:
    """What the profile's rules ask for, in words (its patterns as ``match`` applies them)."""
    if profile.gpu:
        g = profile.gpu
        return f"{g.count}x GPU whose name {describe_pattern(g.name_pattern)}, {g.memory_gib:g} GiB"
    limits = profile.container_limits
    model = f"CPU model {describe_pattern(profile.cpu.model_pattern)}" if profile.cpu.model_pattern else "CPU"
    return f"{model}: {limits.cpus:g} cpus, {limits.memory}" if limits else model


def run_list(args) -> int:
    rows = []
    for pid in list_profiles():
        p = load_profile(pid)
        rows.append([p.id, f"{p.cloud or '-'} {p.instance_type or ''}".strip(), _hardware(p),
                     f"{p.price.usd_per_hour:g}", f"{p.price.region}, {p.price.date}"])
    # the id is the thing a user types next: never cut short
    table = compact_table("hardware profiles", [
        Column("id"), Column("instance", wrap=True), Column("hardware", wrap=True), Column("USD/h", number=True),
        Column("priced in, on", wrap=True)], rows)
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
            f"GPU rules: {g.count} GPUs whose name {describe_pattern(g.name_pattern)} (any case), "
            f"{g.memory_gib:g} GiB each (within 5%)"
            + (f", compute capability {g.compute_capability}" if g.compute_capability else "")
            + (", MIG allowed" if g.allow_mig else ", MIG disabled")
            + (f", driver >= {g.min_driver}" if g.min_driver else "")
        )
    c = p.cpu
    cpu_rules = [
        f"architecture {c.architecture}" if c.architecture else None,
        f"vendor {c.vendor}" if c.vendor else None,
        f"model {describe_pattern(c.model_pattern)} (any case)" if c.model_pattern else None,
        f"family {' or '.join(map(str, c.families))}" if c.families else None,
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
