"""How DAWNBench's leaderboard wrote its figures: time to accuracy as h:mm:ss, costs in
dollars to the cent, latency in milliseconds, dates as month and year."""

from __future__ import annotations

import math
from datetime import date


def duration(seconds: float | None) -> str:
    """h:mm:ss, rounded to the second ("0:01:14"); days spelled out past 24 h."""
    if seconds is None:
        return "—"
    total = int(math.floor(seconds + 0.5))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days} day{'s' if days != 1 else ''}, {clock}" if days else clock


def dollars(usd: float | None) -> str:
    """To the cent; a figure under half a cent keeps two significant digits ("$0.0021")
    rather than showing "$0.00"."""
    if usd is None:
        return "—"
    if usd == 0 or usd >= 0.005:
        return f"${usd:,.2f}"
    decimals = 1 - math.floor(math.log10(usd))
    return f"${usd:.{decimals}f}"


def milliseconds(ms: float | None) -> str:
    """Up to four decimals, trailing zeros dropped (0.1345, 43.45, 705.9)."""
    if ms is None:
        return "—"
    text = f"{ms:.4f}".rstrip("0").rstrip(".")
    return f"{text} ms"


def ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def month(iso: str) -> str:
    """"2018-11-06" -> "Nov 2018"."""
    try:
        return date.fromisoformat(iso).strftime("%b %Y")
    except ValueError:
        return iso
