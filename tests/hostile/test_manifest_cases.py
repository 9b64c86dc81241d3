"""Hostile manifests: each is refused with one line naming the field, before any work
(no docker, no result folder), and nothing the manifest points at is printed."""

from __future__ import annotations

import os
import time

import pytest
from hostile_helpers import assert_one_line_error, edit_manifest, no_results, probe_entry, results, run_cli  # noqa: F401


def reproduce(capsys, entry):
    started = time.monotonic()
    code, out, err = run_cli(capsys, "reproduce", str(entry), "--smoke", "--no-infer")
    return code, out, err, time.monotonic() - started


ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_yaml_alias_bomb_is_refused_without_expanding(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "entry.yaml").write_text((entry / "entry.yaml").read_text() + ALIAS_BOMB)
    code, out, err, seconds = reproduce(capsys, entry)
    assert_one_line_error(code, out, err, "anchors and aliases are not allowed")
    assert len(err) < 1000 and no_results(results)


def test_a_single_anchor_is_refused_too(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    text = (entry / "entry.yaml").read_text().replace("model: none", "model: &m none")
    (entry / "entry.yaml").write_text(text)
    assert_one_line_error(*reproduce(capsys, entry)[:3], "anchors and aliases")


def test_oversized_manifest_is_refused_by_size(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    with open(entry / "entry.yaml", "a") as fh:
        fh.write("# " + "x" * (50 << 20) + "\n")  # 50 MB of comment
    code, out, err, seconds = reproduce(capsys, entry)
    assert_one_line_error(code, out, err, "over the 256 KiB limit")
    assert no_results(results)


@pytest.mark.parametrize("value, shown", [(".nan", "nan"), (".inf", "inf"), ("-.inf", "-inf"), ("1.0e+300", "1e+300")])
def test_non_finite_or_huge_timeout_is_refused_with_the_field(tmp_path, capsys, results, value, shown):
    entry = probe_entry(tmp_path, "sandbox")
    text = (entry / "entry.yaml").read_text().replace("timeout_minutes: 5", f"timeout_minutes: {value}")
    (entry / "entry.yaml").write_text(text)
    line = assert_one_line_error(*reproduce(capsys, entry)[:3], "train.timeout_minutes")
    assert shown in line
    assert no_results(results)


def test_nan_claim_is_refused_with_the_field(tmp_path, capsys, results):
    entry = edit_manifest(probe_entry(tmp_path, "sandbox"), claimed__tta_seconds=float("nan"))
    assert_one_line_error(*reproduce(capsys, entry)[:3], "claimed.tta_seconds", "not a finite number")


def test_timeout_beyond_a_week_is_refused(tmp_path, capsys, results):
    entry = edit_manifest(probe_entry(tmp_path, "sandbox"), train__timeout_minutes=20000)
    assert_one_line_error(*reproduce(capsys, entry)[:3], "train.timeout_minutes")


def test_negative_seed_in_manifest_is_refused(tmp_path, capsys, results):
    entry = edit_manifest(probe_entry(tmp_path, "sandbox"), seed=-1)
    assert_one_line_error(*reproduce(capsys, entry)[:3], "'seed'")


def test_entry_yaml_symlinked_to_a_host_file_never_prints_it(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "entry.yaml").unlink()
    os.symlink("/etc/passwd", entry / "entry.yaml")
    line = assert_one_line_error(*reproduce(capsys, entry)[:3], "is a symbolic link")
    assert "root:" not in line and "/bin/" not in line
    assert no_results(results)


def test_entry_yaml_symlinked_inside_the_entry_is_refused(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "entry.yaml").rename(entry / "real.yaml")
    os.symlink("real.yaml", entry / "entry.yaml")
    assert_one_line_error(*reproduce(capsys, entry)[:3], "entry.yaml is a symbolic link")


@pytest.mark.parametrize("field, value, needle", [
    ("lock", "../../etc/passwd", "leaves its folder"),
    ("lock", "/etc/passwd", "is absolute"),
    ("smoke__lock", "../outside.lock", "leaves its folder"),
    ("inference__weights", "../../x", "leaves its folder"),
    ("inference__weights", "/etc/shadow", "is absolute"),
])
def test_manifest_paths_outside_the_entry_are_refused(tmp_path, capsys, results, field, value, needle):
    entry = edit_manifest(probe_entry(tmp_path, "sandbox"), **{field: value})
    (tmp_path / "outside.lock").write_text((entry / "requirements.lock").read_text())
    line = assert_one_line_error(*reproduce(capsys, entry)[:3], needle)
    assert field.replace("__", ".") in line
    assert no_results(results)


def test_lock_that_is_a_symlink_out_of_the_entry_is_refused(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    outside = tmp_path / "host.lock"
    outside.write_text((entry / "requirements.lock").read_text())
    edit_manifest(entry, lock="other.lock")
    os.symlink(outside, entry / "other.lock")
    assert_one_line_error(*reproduce(capsys, entry)[:3], "other.lock")


def test_manifest_that_is_not_utf8_is_refused(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "entry.yaml").write_bytes(b"name: \xff\xfe\x00bad\n")
    assert_one_line_error(*reproduce(capsys, entry)[:3], "not UTF-8")


def test_manifest_nested_ten_thousand_deep_is_refused(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    with open(entry / "entry.yaml", "a") as fh:
        fh.write("description: " + "[" * 10_000 + "]" * 10_000 + "\n")
    assert_one_line_error(*reproduce(capsys, entry)[:3], "entry.yaml")


def test_schema_error_quoting_a_huge_value_stays_short(tmp_path, capsys, results):
    entry = edit_manifest(probe_entry(tmp_path, "sandbox"), model=["x" * 1000] * 200)
    line = assert_one_line_error(*reproduce(capsys, entry)[:3], "field 'model'")
    assert len(line) < 600


def test_entry_yaml_that_is_a_folder_is_refused(tmp_path, capsys, results):
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "entry.yaml").unlink()
    (entry / "entry.yaml").mkdir()
    assert_one_line_error(*reproduce(capsys, entry)[:3], "not a regular file")


@pytest.mark.parametrize("switches, needles", [
    ([{"name": "fast", "kind": "magical", "disable": {"env": "RUNNER_SWITCH_FAST"}}],
     ("switches.0.kind", "software, hardware, statistical")),
    ([{"name": "fast", "kind": "software", "disable": {"env": "RUNNER_SEED"}}],
     ("switches.0.disable.env", "outside the run contract's namespace", "RUNNER_SWITCH_<NAME>")),
    ([{"name": "fast", "kind": "software", "disable": {"env": "PATH"}}], ("outside the run contract's namespace",)),
    ([{"name": "fast", "kind": "software", "disable": {"env": "RUNNER_SWITCH_A"}},
      {"name": "fast", "kind": "hardware", "disable": {"env": "RUNNER_SWITCH_B"}}], ("names switch 'fast' twice",)),
])
def test_hostile_switches_are_refused_with_the_field(tmp_path, capsys, results, switches, needles):
    entry = edit_manifest(probe_entry(tmp_path, "sandbox"), switches=switches)
    assert_one_line_error(*reproduce(capsys, entry)[:3], *needles)
    assert no_results(results)
