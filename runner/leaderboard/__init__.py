"""``runner leaderboard``: DAWNBench's tables from imported claims and reproduced results,
in a terminal and as a static HTML site with each reproduction's curve and latencies."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from securesystemslib.signer import SSlibKey

from runner.dawnbench.claims import Claim, load_claims
from runner.leaderboard.reproductions import Reproduction, load_reproductions
from runner.leaderboard.studies import Study, load_studies
from runner.leaderboard.tables import Table, build_tables


@dataclass
class Leaderboard:
    claims: list[Claim]
    reproductions: list[Reproduction]
    tables: list[Table]
    skipped: list[str]  # results (and studies) that could not be read, with why
    studies: list[Study]  # every entry's studies (results/<entry>/studies/), for the site


def build(results: Path, trusted_keys: list[SSlibKey]) -> Leaderboard:
    claims = load_claims(results)
    repros, skipped = load_reproductions(results, trusted_keys)
    studies, unreadable = load_studies(results)
    return Leaderboard(claims, repros, build_tables(claims, repros), skipped + unreadable, studies)


__all__ = ["Leaderboard", "build"]
