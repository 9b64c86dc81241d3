from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console

from runner.cli import main
from runner.drift import check_drift, sbom_changes

PROBE = Path(__file__).parent / "entries" / "contract-probe"


def test_sbom_changes_name_every_package_that_moved():
    before = {"python": [{"name": "numpy", "version": "2.4.6"}, {"name": "six", "version": "1"}],
              "debian": [{"name": "libc6", "version": "2.36-9+deb12u13"}]}
    after = {"python": [{"name": "NumPy", "version": "2.4.7"}, {"name": "rich", "version": "15"}],
             "debian": [{"name": "libc6", "version": "2.36-9+deb12u13"}]}
    assert sbom_changes(before, after) == [
        "python package numpy 2.4.6 -> 2.4.7",
        "python package rich 15 added",
        "python package six 1 removed",
    ]
    assert sbom_changes(after, after) == []


@pytest.mark.docker
def test_drift_of_a_fresh_result_is_none_and_an_edit_is_reported(docker_client, tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    entry = tmp_path / "contract-probe"
    shutil.copytree(PROBE, entry)
    assert main(["reproduce", str(entry), "--smoke", "--no-infer"]) == 0
    (result,) = (tmp_path / "results" / "contract-probe").iterdir()
    quiet = Console(file=open("/dev/null", "w"))
    assert check_drift(result, entry, quiet).changes == []

    with open(entry / "Dockerfile", "a") as fh:
        fh.write("# a later edit\n")
    assert check_drift(result, entry, quiet).changes == [
        "the entry's dockerfile changed since the archived run"
    ]
    assert main(["drift", str(result), "--entry", str(entry), "--fail-on-drift"]) == 1
