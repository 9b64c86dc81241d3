"""Hardware profiles: loading and validation, matching recorded GPU hosts (every mismatch
named), the real host against the CPU profiles, container limits and cost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.errors import UserError
from runner.fingerprint import capture_host, load_fingerprint
from runner.profiles import (
    cost_usd,
    hardware_record,
    list_profiles,
    load_profile,
    load_profile_file,
    match,
    match_nodes,
    price_fields,
    profile_from_dict,
    require_match,
)

RECORDED = Path(__file__).parent / "data" / "fingerprints"


def recorded(name: str) -> dict:
    return load_fingerprint(RECORDED / name)


def rules(mismatches) -> list[str]:
    return [m.rule for m in mismatches]


# --- the shipped profiles ----------------------------------------------------------------


def test_every_shipped_profile_loads_with_a_dated_sourced_price():
    ids = list_profiles()
    for required in ("aws-p3.2xlarge", "aws-p3.16xlarge", "aws-p4d.24xlarge", "aws-p5.48xlarge",
                     "aws-c7i-large", "cpu-2core-x86"):
        assert required in ids
    for pid in ids:
        p = load_profile(pid)
        assert p.id == pid and p.path.name == f"{pid}.yaml"
        assert p.price.usd_per_hour > 0 and p.price.region and p.price.source
        assert len(p.price.date) == 10
        # A profile either names GPUs or grants a CPU container: never neither.
        assert (p.gpu is not None) or (p.container_limits is not None)


def test_gpu_counts_and_container_limits():
    assert load_profile("aws-p3.2xlarge").gpu_count == 1
    assert load_profile("aws-p3.16xlarge").gpu_count == 8
    assert load_profile("aws-p5.48xlarge").gpu.name_pattern == "H100"
    c7i = load_profile("aws-c7i-large")
    assert c7i.gpu_count == 0 and c7i.is_cpu_profile
    assert c7i.container_limits.cpus == 2.0
    assert c7i.container_limits.memory == "4g"


def test_cost_uses_the_profile_price_and_says_which():
    p3 = load_profile("aws-p3.2xlarge")
    assert cost_usd(1800, p3) == pytest.approx(3.06 / 2)
    fields = price_fields(p3)
    assert fields == {"usd_per_hour": 3.06, "profile": "aws-p3.2xlarge", "price_date": p3.price.date,
                      "price_region": "us-east-1", "price_source": p3.price.source}


# --- recorded GPU hosts --------------------------------------------------------------------


def test_matching_8_gpu_host():
    assert match(load_profile("aws-p3.16xlarge"), recorded("p3.16xlarge-8xV100.json")) == []


def test_fields_the_driver_would_not_report_do_not_break_a_match():
    assert match(load_profile("aws-p3.16xlarge"), recorded("p3.16xlarge-8xV100-unreadable-fields.json")) == []


def test_wrong_gpu_model_names_each_gpu():
    found = match(load_profile("aws-p3.16xlarge"), recorded("p4d.24xlarge-8xA100.json"))
    for i in range(8):
        assert f"gpu[{i}].name" in rules(found)
        assert f"gpu[{i}].memory" in rules(found)
        assert f"gpu[{i}].compute_capability" in rules(found)
    messages = [str(m) for m in found]
    assert "gpu[3].name: 'NVIDIA A100-SXM4-40GB' does not match 'V100'" in messages
    assert "gpu[0].compute_capability: expected 7.0, found 8.0" in messages
    assert "gpu.count" not in rules(found)  # there are eight of them; just the wrong eight
    # The same host is exactly a p4d.24xlarge.
    assert match(load_profile("aws-p4d.24xlarge"), recorded("p4d.24xlarge-8xA100.json")) == []


def test_mig_enabled_is_named_and_nothing_else():
    found = match(load_profile("aws-p4d.24xlarge"), recorded("p4d.24xlarge-8xA100-mig0.json"))
    assert [str(m) for m in found] == ["gpu[0].mig: MIG mode is enabled; profile requires it disabled"]
    assert (found[0].rule, found[0].expected, found[0].actual) == ("gpu[0].mig", False, True)


def test_mig_passes_when_the_profile_allows_it():
    data = yaml.safe_load(load_profile("aws-p4d.24xlarge").path.read_text())
    data["gpu"]["allow_mig"] = True
    assert match(profile_from_dict(data), recorded("p4d.24xlarge-8xA100-mig0.json")) == []


def test_too_little_gpu_memory():
    # 16 GB V100s where the profile wants the 32 GB board (p3dn.24xlarge).
    found = match(load_profile("aws-p3dn.24xlarge"), recorded("p3.16xlarge-8xV100.json"))
    memory = [str(m) for m in found if m.rule.endswith(".memory")]
    assert len(memory) == 8
    assert "gpu[2].memory: 15.8 GiB is not within 5% of 32 GiB" in memory
    assert not any(m.rule.endswith(".name") for m in found)  # both are V100s
    # And the host side: 64 vCPUs, no AVX-512, 478 GiB.
    assert {"cpu.logical_cores", "cpu.flags", "memory.total"} <= set(rules(found))


def test_missing_gpu_and_missing_driver():
    found = match(load_profile("aws-p3.16xlarge"), recorded("p3.16xlarge-7xV100.json"))
    assert [str(m) for m in found] == ["gpu.count: expected 8, found 7"]
    found = match(load_profile("aws-p3.16xlarge"), recorded("p3.16xlarge-no-driver.json"))
    assert [str(m) for m in found] == ["gpu.count: expected 8, found 0 (no NVIDIA driver: DriverNotLoaded: Driver Not Loaded)"]


def test_memory_tolerance_is_five_percent_both_ways():
    fp = recorded("p4d.24xlarge-8xA100.json")
    profile = load_profile("aws-p4d.24xlarge")
    gib = 1024**3
    for total, ok in ((int(40 * 0.951 * gib), True), (int(40 * 1.049 * gib), True),
                      (int(40 * 0.94 * gib), False), (int(40 * 1.06 * gib), False)):
        for g in fp["gpu"]["gpus"]:
            g["memory_total_bytes"] = total
        assert (match(profile, fp) == []) is ok, total / gib


def test_old_driver_is_named():
    fp = recorded("p4d.24xlarge-8xA100.json")
    fp["gpu"]["driver"] = "418.87.01"
    assert [str(m) for m in match(load_profile("aws-p4d.24xlarge"), fp)] == [
        "gpu.driver: 418.87.01 is older than the required 450.80"
    ]


def test_cpu_rules_each_named():
    fp = recorded("p4d.24xlarge-8xA100.json")
    found = match(load_profile("aws-p5.48xlarge"), fp)
    messages = [str(m) for m in found]
    assert "cpu.vendor: expected AuthenticAMD, found GenuineIntel" in messages
    assert "cpu.model_name: 'Intel(R) Xeon(R) Platinum 8275CL CPU @ 3.00GHz' does not match 'EPYC'" in messages
    assert "cpu.logical_cores: expected at least 192, found 96" in messages
    assert "memory.total: 1121.5 GiB is less than the required 1950 GiB" in messages
    found = match(load_profile("aws-c7i-large"), fp)
    assert "cpu.logical_cores: expected at most 2, found 96" in [str(m) for m in found]
    assert "cpu.flags: missing avx512_bf16, amx_tile, amx_bf16" in [str(m) for m in found]


# --- the real host ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def host():
    return capture_host()


def test_this_host_against_the_cpu_profiles(host):
    generic = match(load_profile("cpu-2core-x86"), host)
    flags = set(Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].strip(": \t").split())
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    expected_generic = []
    if os.cpu_count() < 2:
        expected_generic.append("cpu.logical_cores")
    if not {"avx2", "fma"} <= flags:
        expected_generic.append("cpu.flags")
    if memory_gib < 7.5:
        expected_generic.append("memory.total")
    assert rules(generic) == expected_generic

    c7i = match(load_profile("aws-c7i-large"), host)
    if os.cpu_count() == 2 and {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"} <= flags:
        assert c7i == []  # this 2-vCPU Sapphire Rapids guest is a c7i.large-class host
    else:
        assert c7i != []


def test_this_host_against_a_gpu_profile(host):
    found = match(load_profile("aws-p3.2xlarge"), host)
    if not host["gpu"]["gpus"]:
        assert found[0].rule == "gpu.count" and "found 0" in str(found[0])


def test_require_match_refuses_unless_allowed():
    profile = load_profile("aws-p4d.24xlarge")
    fp = recorded("p4d.24xlarge-8xA100-mig0.json")
    with pytest.raises(UserError) as err:
        require_match(profile, fp)
    assert "gpu[0].mig" in str(err.value) and "--allow-hardware-mismatch" in str(err.value)
    record = require_match(profile, fp, allow_mismatch=True)
    assert record == {"profile": "aws-p4d.24xlarge", "matched": False,
                      "mismatches": ["gpu[0].mig: MIG mode is enabled; profile requires it disabled"],
                      "allowed_mismatch": True, "nodes": 1}
    ok = require_match(profile, recorded("p4d.24xlarge-8xA100.json"))
    assert ok == hardware_record(profile, [], False) == {
        "profile": "aws-p4d.24xlarge", "matched": True, "mismatches": [], "allowed_mismatch": False,
        "nodes": 1}


def test_a_run_spanning_nodes_names_the_node_count_and_each_node_that_differs():
    profile = load_profile("aws-p4d.24xlarge")
    assert profile.nodes == 1
    good, mig = recorded("p4d.24xlarge-8xA100.json"), recorded("p4d.24xlarge-8xA100-mig0.json")
    host = mig["host"]["hostname"]
    found = match_nodes(profile, [good, mig])
    assert [str(m) for m in found] == [
        "nodes: expected 1, found 2",
        f"node 1 ({host}): gpu[0].mig: MIG mode is enabled; profile requires it disabled",
    ]
    assert rules(found) == ["nodes", "node1.gpu[0].mig"]
    # A profile of two such nodes: the count matches, a node that differs is still named.
    pair = profile_from_dict({**yaml.safe_load(profile.path.read_text()), "nodes": 2})
    assert pair.nodes == 2 and rules(match_nodes(pair, [good, good])) == []
    assert rules(match_nodes(pair, [mig, good])) == ["node0.gpu[0].mig"]
    assert match_nodes(profile, [good]) == match(profile, good) == []  # one node: as before
    record = require_match(pair, good, nodes=2)
    assert record["nodes"] == 2 and record["matched"]
    # Per node: a run of two nodes costs twice the profile's hourly price.
    assert cost_usd(3600, pair) == pytest.approx(2 * profile.price.usd_per_hour)
    # A run allowed onto more nodes than its profile's pays for every node it ran on.
    assert cost_usd(3600, profile, 2) == pytest.approx(2 * profile.price.usd_per_hour)


# --- validation ---------------------------------------------------------------------------


def _write(tmp_path: Path, data: dict, name: str | None = None) -> Path:
    file = tmp_path / f"{name or data.get('id', 'x')}.yaml"
    file.write_text(yaml.safe_dump(data))
    return file


def _valid() -> dict:
    return yaml.safe_load(load_profile("aws-c7i-large").path.read_text())


def test_validation_errors_name_the_field(tmp_path):
    data = _valid()
    del data["price"]["date"]
    with pytest.raises(UserError, match=r"field 'price' is invalid: 'date' is a required property"):
        load_profile_file(_write(tmp_path, data))

    data = _valid()
    data["container_limits"]["cpus"] = "two"
    with pytest.raises(UserError, match=r"field 'container_limits.cpus' is invalid"):
        load_profile_file(_write(tmp_path, data))

    data = _valid()
    data["cpu"]["min_cores"] = 2  # misspelt rule: refused, not ignored
    with pytest.raises(UserError, match=r"field 'cpu' is invalid: Additional properties"):
        load_profile_file(_write(tmp_path, data))

    data = _valid()
    del data["container_limits"]
    with pytest.raises(UserError, match="needs a 'gpu' section or, for a CPU profile, 'container_limits'"):
        load_profile_file(_write(tmp_path, data))

    with pytest.raises(UserError, match="field 'id' is 'aws-c7i-large' but the file is 'other.yaml'"):
        load_profile_file(_write(tmp_path, _valid(), name="other"))


def test_unquoted_yaml_date_is_accepted(tmp_path):
    file = tmp_path / "aws-c7i-large.yaml"
    file.write_text(load_profile("aws-c7i-large").path.read_text().replace('date: "2026-11-22"', "date: 2026-11-22"))
    assert load_profile_file(file).price.date == "2026-11-22"


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(UserError, match="no hardware profile 'nope'.*aws-p3.2xlarge"):
        load_profile("nope")


# --- CLI ---------------------------------------------------------------------------------


def test_cli_match_exit_codes_and_lines(capsys):
    assert main(["profile", "match", "aws-p4d.24xlarge", str(RECORDED / "p4d.24xlarge-8xA100.json")]) == 0
    assert "matches hardware profile aws-p4d.24xlarge" in capsys.readouterr().out
    assert main(["profile", "match", "aws-p4d.24xlarge", str(RECORDED / "p4d.24xlarge-8xA100-mig0.json")]) == 1
    out = capsys.readouterr().out
    assert "  - gpu[0].mig: MIG mode is enabled; profile requires it disabled\n" in out
    assert main(["profile", "list"]) == 0
    assert "aws-p5.48xlarge" in capsys.readouterr().out
    assert main(["profile", "show", "aws-p5.48xlarge"]) == 0
    assert "55.04" in capsys.readouterr().out
