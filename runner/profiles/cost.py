"""Dollars from seconds, always with the price's provenance beside the figure."""

from __future__ import annotations

from runner.profiles.profile import Profile


def cost_usd(seconds: float, profile: Profile, nodes: int | None = None) -> float:
    """On-demand cost of ``seconds`` on the profile's instances (billed per second, per node).
    ``nodes``: the nodes the run used, when they differ from the profile's (a run allowed a
    mismatch pays for every node it ran on)."""
    return seconds / 3600 * profile.price.usd_per_hour * (nodes or profile.nodes)


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
