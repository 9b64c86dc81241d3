"""Claims that mean something: a claim names a profile that pins the speed class, a host is
compared with it only when it meets that profile, and the default entry's claim is borne
out by its archived, signed bundles."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from runner.claims import Comparison, applicable_claim, claims_of, pins_speed_class
from runner.errors import UserError
from runner.manifest import load_entry
from runner.profiles import load_profile, match
from runner.verify.claim_evidence import check_evidence

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "entries" / "mnist-cnn-cpu"


def _cpu(vendor: str, family: int, flags: list[str]) -> dict:
    return {"cpu": {"architecture": "x86_64", "vendor": vendor, "family": family, "model_name": "x",
                    "logical_cores": 2, "flags": flags},
            "memory": {"total_bytes": 24 * 2**30}}


SAPPHIRE = _cpu("GenuineIntel", 6, ["avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"])
ZEN4 = _cpu("AuthenticAMD", 25, ["avx2", "fma", "avx512f", "avx512_bf16"])
ZEN3 = _cpu("AuthenticAMD", 25, ["avx2", "fma"])
ZEN5 = _cpu("AuthenticAMD", 26, ["avx2", "fma", "avx512f", "avx512_bf16"])


@pytest.mark.parametrize("host, amx, zen4, zen5", [(SAPPHIRE, True, False, False), (ZEN4, False, True, False),
                                                   (ZEN3, False, False, False), (ZEN5, False, False, True)])
def test_the_2_core_profiles_split_by_what_changes_speed(host, amx, zen4, zen5):
    assert not match(load_profile("cpu-2core-x86"), host)  # the loose profile admits them all
    assert (not match(load_profile("cpu-2core-x86-amx"), host)) is amx
    assert (not match(load_profile("cpu-2core-x86-zen4"), host)) is zen4
    assert (not match(load_profile("cpu-2core-x86-zen5"), host)) is zen5


def test_a_family_mismatch_is_named():
    (mismatch,) = match(load_profile("cpu-2core-x86-zen4"), ZEN5)
    assert str(mismatch) == "cpu.family: expected one of 25, found 26"


def test_only_profiles_that_pin_the_speed_class_may_carry_claims():
    assert not pins_speed_class(load_profile("cpu-2core-x86"))
    for profile in ("cpu-2core-x86-amx", "cpu-2core-x86-zen4", "aws-c7i-large", "aws-p3.2xlarge"):
        assert pins_speed_class(load_profile(profile)), profile


def test_a_claim_on_a_loose_profile_is_refused_with_the_fix(tmp_path):
    entry = tmp_path / "mnist-cnn-cpu"
    shutil.copytree(DEFAULT, entry)
    manifest = yaml.safe_load((entry / "entry.yaml").read_text())
    del manifest["claimed"]["profile"]
    (entry / "entry.yaml").write_text(yaml.safe_dump(manifest))
    with pytest.raises(UserError) as caught:
        load_entry(entry)
    assert "admits CPUs of different speed" in caught.value.problem
    assert "claimed.profile" in caught.value.fix


def test_a_host_is_compared_with_the_claim_only_on_the_claims_profile():
    claimed = {"tta_seconds": 8.0, "profile": "cpu-2core-x86-amx"}
    same = applicable_claim(claimed, "cpu-2core-x86", SAPPHIRE)
    assert same.comparable
    assert same.line(8.0, 10.0, "r1") == "claimed TTA 8 s on cpu-2core-x86-amx; measured 10.00 s (1.25x the claim) in r1"
    other = applicable_claim(claimed, "cpu-2core-x86", ZEN4)
    assert not other.comparable
    line = other.line(8.0, 13.0, "r2")
    assert "not compared" in line and "cpu.vendor: expected GenuineIntel, found AuthenticAMD" in line
    assert "x the claim" not in line


def test_a_host_is_compared_with_the_claim_of_the_profile_it_meets():
    """One recipe, two speed classes: each host gets the figure measured on its own class."""
    claimed = {"tta_seconds": 8.0, "profile": "cpu-2core-x86-amx",
               "other_profiles": [{"profile": "cpu-2core-x86-zen4", "tta_seconds": 6.0,
                                   "bundles": ["results/archive/x.tar.gz"]}]}
    assert applicable_claim(claimed, "cpu-2core-x86", SAPPHIRE).line(None, 8.8, "r1").startswith(
        "claimed TTA 8 s on cpu-2core-x86-amx; measured 8.80 s (1.10x the claim)")
    zen4 = applicable_claim(claimed, "cpu-2core-x86", ZEN4)
    assert zen4.comparable and zen4.profile == "cpu-2core-x86-zen4" and zen4.tta_seconds == 6.0
    assert "(1.10x the claim)" in zen4.line(None, 6.6, "r2")
    zen3 = applicable_claim(claimed, "cpu-2core-x86", ZEN3)  # meets neither: the main claim's mismatches
    assert not zen3.comparable and zen3.profile == "cpu-2core-x86-amx" and "not compared" in zen3.line(None, 9.0, "r3")


def test_every_claim_of_the_default_entry_names_a_profile_that_pins_the_speed_class(tmp_path):
    entry = load_entry(DEFAULT)
    profiles = [c["profile"] for c in claims_of(entry.claimed, entry.hardware_profile)]
    assert len(set(profiles)) == len(profiles) >= 2
    folder = tmp_path / "mnist-cnn-cpu"
    shutil.copytree(DEFAULT, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    manifest["claimed"]["other_profiles"] = [{"profile": "cpu-2core-x86", "tta_seconds": 6.0,
                                              "bundles": ["results/archive/x.tar.gz"]}]
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest))
    with pytest.raises(UserError) as caught:
        load_entry(folder)
    assert "'cpu-2core-x86', which admits CPUs of different speed" in caught.value.problem


def test_every_claim_of_the_default_entry_is_borne_out_by_its_archived_signed_bundles():
    entry = load_entry(DEFAULT)
    claims = claims_of(entry.claimed, entry.hardware_profile)
    assert [c["profile"] for c in claims] == ["cpu-2core-x86-amx", "cpu-2core-x86-zen5"]
    for claim in claims:
        assert len(claim["bundles"]) == claim["runs"] >= 3
        assert check_evidence(entry, ROOT, ROOT / "results" / "archive" / "keys", claim) == [], claim["profile"]


def test_a_claim_borne_out_on_another_profile_is_not_evidence_for_this_one():
    """The Zen 5 bundles as evidence for the AMX figure: their hosts do not meet its profile."""
    entry = load_entry(DEFAULT)
    amx, zen5 = claims_of(entry.claimed, entry.hardware_profile)
    problems = check_evidence(entry, ROOT, ROOT / "results" / "archive" / "keys", {**amx, "bundles": zen5["bundles"]})
    assert problems and all(any(k in p for k in ("does not meet cpu-2core-x86-amx", "median TTA", "coefficient"))
                            for p in problems)
    assert any("cpu.vendor: expected GenuineIntel, found AuthenticAMD" in p for p in problems)


def test_a_claim_its_bundles_do_not_bear_out_is_named(tmp_path):
    entry = load_entry(DEFAULT)
    claimed = {**entry.claimed, "tta_seconds": round(entry.claimed["tta_seconds"] * 0.8, 2)}
    forged = entry.__class__(**{**entry.__dict__, "claimed": claimed})
    problems = check_evidence(forged, ROOT, ROOT / "results" / "archive" / "keys")
    assert problems and "median TTA" in problems[0]


def test_a_claim_without_a_time_is_one_line_beside_the_measurement():
    """A claim of latency alone names no TTA to set the run against: the line says so (it
    was a TypeError in the f-string), and a claim with one still gets its ratio."""
    latency_only = Comparison("cpu-2core-sapphirerapids", True, (), None, 1.5)
    assert latency_only.line(None, 12.0, "abc") == "no claimed TTA on cpu-2core-sapphirerapids; measured 12.00 s in abc"
    timed = Comparison("cpu-2core-sapphirerapids", True, (), 10.0)
    assert timed.line(None, 12.0, "abc").endswith("measured 12.00 s (1.20x the claim) in abc")
