"""The host engine end to end (issue 48): ``runner reproduce ENTRY --engine host`` runs the
entry with this host's Python environment, in bubblewrap and the runner's cgroups, and gives a
signed result that verifies and never counts, saying why in every view; a result that hides
its engine does not verify; with no bubblewrap the engine refuses unless ``--unsandboxed``,
and then the result says that too. The sandbox itself: tests/test_host_engine_sandbox.py.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from runner import paths
from runner.cli import main
from runner.engine.kinds import ENGINES, implementation
from runner.errors import UserError
from runner.verify.verdict import EXIT_DOES_NOT_COUNT, EXIT_NOT_VERIFIED

ENTRY = paths.repo_root() / "entries" / "mnist-cnn-cpu"
WHY = "engine host: the entry's image was not used (packages of this host: Python "


@pytest.fixture(scope="module")
def host_engine():
    """The host engine, bubblewrap installed when missing (Debian's package)."""
    if os.geteuid() != 0:
        pytest.skip("the host engine's containers run in cgroups the runner creates: these tests need root")
    kind = ENGINES["host"]
    engine = implementation(kind).setup(kind, install=True)
    assert engine.refusal() is None, engine.refusal()
    return engine


@pytest.fixture
def on_host(host_engine, tmp_path, monkeypatch):
    """This test's commands use the host engine, and write results under ``tmp_path``."""
    monkeypatch.setenv("RUNNER_ENGINE", "host")  # restored afterwards (--engine sets it for the process)
    monkeypatch.setenv("RUNNER_HOST_UNSANDBOXED", "")
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def only_run(results: Path) -> Path:
    runs = [p for p in (results / ENTRY.name).iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def host_run(host_engine, tmp_path_factory):
    """One full reproduce of the CPU entry under the host engine, inference included."""
    results = tmp_path_factory.mktemp("host-results")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_ENGINE", "host")
        mp.setenv("RUNNER_HOST_UNSANDBOXED", "")
        mp.setenv("RUNNER_RESULTS", str(results))
        code = main(["reproduce", str(ENTRY), "--engine", "host", "--seed", str(random.randrange(1, 10**6))])
    assert code == 0
    return only_run(results)


def test_a_host_run_is_signed_verifies_and_does_not_count_saying_why(host_run, capsys):
    result = json.loads((host_run / "result.json").read_text())
    assert result["status"] == "complete" and result["training"]["reached"]
    assert result["isolation"]["isolated"] is False and result["isolation"]["why_not"].startswith(WHY)
    engine = json.loads((host_run / "fingerprint.json").read_text())["docker"]
    assert engine["engine"] == "host" and engine["sandbox"].startswith("bubblewrap")
    assert (host_run / "bundle" / "statement.dsse.json").is_file()  # signed
    capsys.readouterr()
    assert main(["verify", str(host_run)]) == EXIT_DOES_NOT_COUNT
    out = " ".join(capsys.readouterr().out.split())
    assert "verified: all" in out and "its engine could not isolate it: engine host" in out, out
    results = str(host_run.parent.parent)
    for view in (["ls", "--results", results, ENTRY.name], ["show", "--results", results, str(host_run)]):
        capsys.readouterr()
        main(view)
        said = " ".join(capsys.readouterr().out.split())
        assert "engine host" in said, (view, said)


def test_a_host_run_lists_the_hosts_packages_and_infers_with_them(host_run):
    import torch

    sbom = json.loads((host_run / "sbom.json").read_text())
    versions = {p["name"].lower(): p["version"] for p in sbom["python"]}
    assert versions["torch"] == torch.__version__  # the host's torch, whatever the lock pins
    result = json.loads((host_run / "result.json").read_text())
    assert set(result["inference"]) and all(r["passed_gate"] for r in result["inference"].values())


def test_a_result_that_hides_its_host_engine_does_not_verify(host_run, tmp_path, capsys):
    from runner.bundle import make_bundle
    from runner.keys import load_signer

    forged = tmp_path / host_run.name
    shutil.copytree(host_run, forged)
    data = json.loads((forged / "result.json").read_text())
    del data["isolation"]  # as if the run had the entry's image, locked down
    (forged / "result.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    make_bundle(forged, load_signer())  # the publisher signs the forgery
    capsys.readouterr()
    assert main(["verify", str(forged)]) == EXIT_NOT_VERIFIED
    out = " ".join(capsys.readouterr().out.split())
    assert "hardware-profile" in out and "does not record that the run was not isolated" in out, out


def test_without_bubblewrap_the_host_engine_refuses_unless_unsandboxed(on_host, monkeypatch, capsys):
    monkeypatch.setenv("RUNNER_BWRAP", "/nonexistent/bwrap")
    seed = str(random.randrange(1, 10**6))
    assert main(["reproduce", str(ENTRY), "--engine", "host", "--no-infer", "--seed", seed]) == UserError.exit_code
    err = capsys.readouterr().err.strip()
    assert err.startswith("runner: error:") and "\n" not in err, err
    assert "bubblewrap" in err and "--unsandboxed" in err, err
    assert not (on_host / ENTRY.name).exists()  # refused before any run began

    assert main(["reproduce", str(ENTRY), "--engine", "host", "--unsandboxed", "--no-infer", "--seed", seed]) == 0
    run = only_run(on_host)
    why = json.loads((run / "result.json").read_text())["isolation"]["why_not"]
    assert why.startswith("engine host: unsandboxed: no bubblewrap"), why
    engine = json.loads((run / "fingerprint.json").read_text())["docker"]
    assert engine["sandbox"].startswith("none")


def test_unsandboxed_belongs_to_the_host_engine_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RUNNER_ENGINE", "docker")
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path))
    assert main(["reproduce", str(ENTRY), "--unsandboxed"]) == UserError.exit_code
    err = capsys.readouterr().err.strip()
    assert "--unsandboxed is for the host engine only" in err and "\n" not in err


def test_the_build_reports_every_difference_from_the_lock(host_engine, tmp_path, monkeypatch):
    """Nothing is installed: each pin missing on this host or at another version is said and
    kept, and the run's reason not to count names how many."""
    from runner.entry_build import build_entry
    from runner.manifest.entry import load_entry

    entry_dir = tmp_path / ENTRY.name
    shutil.copytree(ENTRY, entry_dir)
    lock = entry_dir / "requirements.lock"
    text = lock.read_text()
    numpy_line = next(line for line in text.splitlines() if line.startswith("numpy=="))
    version = numpy_line.split("==", 1)[1].split()[0]
    lock.write_text(text.replace(f"numpy=={version}", "numpy==0.0.1", 1)
                    + "not-on-this-host==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    monkeypatch.setenv("RUNNER_ENGINE", "host")
    built = build_entry(load_entry(entry_dir), host_engine, no_cache=True)
    said = "".join(built.log)
    import numpy

    assert f"numpy==0.0.1: this host has {numpy.__version__}" in said, said
    assert "not-on-this-host==1.0: not installed on this host" in said, said
    why = host_engine.isolation(built.image_id)
    assert why.startswith(WHY) and "locked packages differ" in why
