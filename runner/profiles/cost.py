"""Dollars from seconds, always with the price's provenance beside the figure."""

from __future__ import annotations

from runner.profiles.profile import Profile


def cost_usd(seconds: float, profile: Profile) -> float:
    """On-demand cost of ``seconds`` on the profile's instances (billed per second, per node)."""
    return seconds / 3600 * profile.price.usd_per_hour * profile.nodes


def price_fields(profile: Profile) -> dict:
    """The provenance ``result.json``'s ``cost`` section records next to each figure."""
    price = profile.price
    return {
        "usd_per_hour": price.usd_per_hour,
        "profile": profile.id,
        "price_date": price.date,
        "price_region": price.region,
        "price_source": price.source,
    }
