"""How DAWNBench's leaderboard wrote its figures: time to accuracy as h:mm:ss rounded *up*
to the second, costs in dollars to the cent, latency in milliseconds, dates as month and
year ("Mar 2020").

The rounding is read off the published ImageNet table: 157.55 s shows as 0:02:38,
162.34 s as 0:02:43, 561.18 s as 0:09:22 and 1085.18 s as 0:18:06 (rounding to the
nearest second would give 0:02:42, 0:09:21 and 0:18:05).

The site took the ceiling of the figure exactly as the file's hours times 3600 gives it, float
noise included: QANet's SQuAD run (``SQuAD/train/dawn_qanet_1tpu.tsv``, epoch 18, 0.765277777778
h) is 2755.0000000008 s and shows as 0:45:56, not 0:45:55. No tolerance is taken off, so every
published row shows as the site showed it (checked on all 118 published submissions: QANet's is
the only one whose figure sits within a microsecond above a whole second).
"""

from __future__ import annotations

import math
from datetime import date


def duration(seconds: float | None) -> str:
    """h:mm:ss, rounded up to the second ("0:02:38"); days spelled out past 24 h."""
    if seconds is None or not math.isfinite(seconds):  # a hand-edited result: never a traceback
        return "—"
    if seconds < 0:
        return "-" + duration(-seconds)
    total = math.ceil(seconds)  # as the site did: 2755.0000000008 s is 0:45:56
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days} day{'s' if days != 1 else ''}, {clock}" if days else clock


def run_duration(seconds: float | None) -> str:
    """A measured TTA: under a minute with its decimals ("6.07 s"; h:mm:ss would round it up to
    "0:00:07"), else as ``duration``."""
    if seconds is None:
        return "—"
    return f"{seconds:.2f} s" if seconds < 60 else duration(seconds)


def tta(seconds: float | None, resolution: float | None) -> str:
    """A measured TTA beside its resolution, the step its evaluations time it in:
    "6.07 s (resolution 4.9 s)"; the resolution is left out where a result does not state it."""
    text = run_duration(seconds)
    return text if seconds is None or resolution is None else f"{text} (resolution {resolution:.1f} s)"


def dollars(usd: float | None) -> str:
    """To the cent; a figure under half a cent keeps two significant digits ("$0.0021")
    rather than showing "$0.00"."""
    if usd is None or not math.isfinite(usd):
        return "—"
    if usd < 0:
        return "-" + dollars(-usd)
    if usd == 0 or usd >= 0.005:
        return f"${usd:,.2f}"
    decimals = 1 - math.floor(math.log10(usd))
    return f"${usd:.{decimals}f}"


def milliseconds(ms: float | None) -> str:
    """Up to four decimals, trailing zeros dropped (0.1345, 43.45, 705.9); the column
    header names the unit, as DAWNBench's did."""
    if ms is None or not math.isfinite(ms):
        return "—"
    return f"{ms:.4f}".rstrip("0").rstrip(".")


def ratio(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.2f}×"


def month(iso: str) -> str:
    """"2018-11-06" -> "Nov 2018"."""
    try:
        return date.fromisoformat(iso).strftime("%b %Y")
    except (TypeError, ValueError):
        return str(iso)
