"""An entry's claim, and what makes it mean something.

A claimed TTA is only comparable on hardware of the speed it was measured on. Two hosts
that meet a loose profile (any x86 with AVX2) can be 1.6 times apart (an Intel host with
AMX against a Zen 4 without), so a claim names the profile it was measured on
(``claimed.profile``, by default the entry's own) and that profile must pin the speed
class: a GPU model, or a CPU vendor and its ISA features. ``runner reproduce`` compares a
measurement with the claim only on a host that meets the claim's profile, and says why not
otherwise.

A claim may also carry its evidence: ``claimed.bundles``, signed result bundles archived in
the repository (``results/archive/``). ``runner.verify.claim_evidence.check_evidence`` opens
and verifies each one, and checks that they are the entry's conforming runs on the claim's
profile and that their median TTA (and its coefficient of variation) is the figure claimed.
This module stays below the manifest (which checks a claim's profile at load) and the
scorer: it imports only the profiles.

One recipe measured on hosts of several speed classes carries one claim per class: the main
one, and ``claimed.other_profiles`` (each its profile, figure and bundles). A host is
compared with the claim of the first profile it meets.

``applicable_claim`` is the one rule for which claim a run is compared with (and
``result_claim`` applies it to a result folder): ``runner reproduce``, the leaderboard,
``runner compare`` and ``check_evidence`` all go through it, so no view prints a ratio
against a claim that another says does not apply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from runner.errors import UserError
from runner.profiles import Profile, load_profile, match
from runner.safe_read import object_field

# A claim, and a reproduction that counts on the leaderboard, needs this many runs with seeds
# the runner drew, compared across seeds (runner.score.across_runs): one run cannot show that
# its model was trained from its seed rather than carried in.
REQUIRED_RUNS = 3


def claim_profile_id(entry) -> str:
    return (entry.claimed or {}).get("profile") or entry.hardware_profile


def claims_of(claimed: dict | None, hardware_profile: str) -> list[dict]:
    """Each timed claim with its profile: the main one (profile defaulting to the entry's),
    then ``other_profiles`` in order."""
    claimed = claimed or {}
    found = []
    if "tta_seconds" in claimed or "latency_ms" in claimed:
        found.append({k: v for k, v in claimed.items() if k not in ("other_profiles", "dawnbench", "score")}
                     | {"profile": claimed.get("profile") or hardware_profile})
    found += [dict(other) for other in claimed.get("other_profiles") or []]
    return found


def pins_speed_class(profile: Profile) -> bool:
    """A GPU profile names its GPU; a CPU profile must name the vendor and more than the
    baseline ISA (AVX2/FMA), so that the hosts it admits run a recipe at one speed."""
    if profile.gpu is not None:
        return True
    baseline = {"avx2", "fma", "sse4_2", "avx"}
    return bool(profile.cpu.vendor) and bool(set(profile.cpu.required_flags) - baseline)


def check_claim_profile(entry, manifest_path: str) -> None:
    """At load: a timed claim names a profile that exists and pins the speed class."""
    for claim in claims_of(entry.claimed, entry.hardware_profile):
        profile_id = claim["profile"]
        profile = load_profile(profile_id)
        if not pins_speed_class(profile):
            raise UserError(
                f"{manifest_path}: the claim is measured on profile '{profile_id}', which admits CPUs of "
                "different speed (no vendor and ISA features pinned), so no one could compare with it",
                "name the profile it was measured on in claimed.profile (e.g. cpu-2core-x86-amx, "
                "cpu-2core-x86-zen4 or cpu-2core-x86-zen5; `runner profile match ID` says which this host meets)",
            )


@dataclass(frozen=True)
class Comparison:
    """Whether this host may compare its measurement with the claim, and why not."""

    profile: str
    comparable: bool
    mismatches: tuple[str, ...] = ()
    tta_seconds: float | None = None  # the claim of that profile
    latency_ms: float | None = None
    variant: str | None = None  # a study's variant of the entry (``variant_problem``): never compared

    @property
    def why_not(self) -> str:
        """"" when comparable, else the sentence reproduce prints."""
        if self.variant:
            return f"not compared: {self.variant}"
        return "" if self.comparable else f"not compared: this host does not meet {self.profile} ({'; '.join(self.mismatches)})"

    def line(self, claimed_tta: float | None, measured: float, run_id: str) -> str:
        claimed_tta = claimed_tta if claimed_tta is not None else self.tta_seconds
        if claimed_tta is None:  # a claim of latency alone: no time to set the run's against
            return f"no claimed TTA on {self.profile}; measured {measured:.2f} s in {run_id}"
        basis = f"claimed TTA {claimed_tta:g} s on {self.profile}"
        if self.comparable:
            return f"{basis}; measured {measured:.2f} s ({measured / claimed_tta:.2f}x the claim) in {run_id}"
        return f"{basis}; measured {measured:.2f} s in {run_id}, {self.why_not}"


def _figure(claim: dict, key: str) -> float | None:
    value = claim.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def applicable_claim(entry_claimed: dict | None, hardware_profile: str, fingerprint: dict) -> Comparison:
    """The claim a run on this host is compared with: the first whose profile it meets; else
    the main claim, not comparable, with the rules the host breaks."""
    first = None
    for claim in claims_of(entry_claimed, hardware_profile) or [{"profile": hardware_profile}]:
        profile_id = claim["profile"]
        try:
            mismatches = tuple(str(m) for m in match(load_profile(profile_id), fingerprint))
        except UserError as exc:
            mismatches = (exc.problem,)
        seen = Comparison(profile_id, not mismatches, mismatches, _figure(claim, "tta_seconds"),
                          _figure(claim, "latency_ms"))
        if seen.comparable:
            return seen
        first = first or seen
    assert first is not None  # one claim at least was seen: claims_of's, or the profile alone
    return first


def result_claim(folder: Path) -> Comparison | None:
    """``applicable_claim`` for a result folder: its entry's claim, its profile and the
    fingerprint of its host; None when the entry claims no figure or the folder cannot say."""
    try:
        result = json.loads((Path(folder) / "result.json").read_text())
        fingerprint = json.loads((Path(folder) / "fingerprint.json").read_text())
    except (OSError, ValueError):
        return None
    result = result if isinstance(result, dict) else {}
    entry = object_field(result, "entry")
    claimed = entry.get("claimed")
    hardware = object_field(result, "hardware")
    try:
        if not isinstance(claimed, dict) or not claims_of(claimed, ""):
            return None
        applies = applicable_claim(claimed, str(hardware.get("profile") or ""),
                                   fingerprint if isinstance(fingerprint, dict) else {})
    except (TypeError, KeyError, AttributeError, ValueError):  # a malformed claim or fingerprint: no claim applies
        return None
    if variant := variant_problem(result.get("variant")):
        return replace(applies, comparable=False, variant=variant)
    return applies


def variant_problem(variant) -> str | None:
    """Why a run of a study's variant (result.json's ``variant``: switches off, another placement)
    is not the entry's recipe, for a claim or a leaderboard; None for the entry as declared."""
    if variant is None:
        return None
    if not isinstance(variant, dict):
        return "its study-variant record is malformed"
    parts = []
    if variant.get("switches_off"):
        parts.append("switches off: " + ", ".join(map(str, variant["switches_off"])))
    if "nodes" in variant or "processes_per_node" in variant:
        parts.append(f"{variant.get('nodes', '?')} node(s) x {variant.get('processes_per_node', '?')} process(es), "
                     "not the manifest's placement")
    return f"a study variant ({'; '.join(parts) or 'marked'}), not the entry's recipe"


def cross_seed_problem(record) -> str | None:
    """Why a run's cross-seed record does not let it count for a claim or a leaderboard;
    None when its checks passed (``runner.score.across_runs``). A run from before the record
    (no ``training.cross_seed``) is not judged by it: its bundle's own checks stand."""
    if record is None:
        return None
    if not isinstance(record, dict):
        return "its cross-seed record is malformed"
    if record.get("checked") is not True:
        return f"cross-seed checks not passed: {record.get('why_not') or 'not recorded'}"
    return None
