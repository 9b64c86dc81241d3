"""Session fixtures for tests that need the real Docker engine.

``engine`` makes sure an engine runs (installing and starting it on a fresh Debian-like CI
machine, as .ci/run does): the ``runner.engine.Engine`` the runner's functions take, the one
``RUNNER_ENGINE`` names (.ci/run-podman, .ci/run-charliecloud). A test that needs only "an
engine and the CPU base image" asks for ``engine`` (and ``cpu_base_image``) and looks at
containers through ``engine.owned``; ``docker_client`` is the Docker API client of an engine
that has one (Docker, Podman), for tests that look at that API directly (listing images,
networks). ``cpu_base_image`` builds the CPU base
image once per session when its recipe's tag is not present yet, and ``local_slurm``
starts a real Slurm (two slurmd "nodes" on this machine) for the tests under tests/slurm/.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from runner import paths
from runner.run.calm import ALLOW_ENV

# A run waits for a host busy on its cores before the build and before training
# (runner.run.calm); on a shared CI machine that wait would make any test that runs an
# entry slow or flaky. The suite goes on as before the wait existed (the contention check
# after training still marks a contended run); tests/test_doomed_runs.py unsets this to test
# the wait itself. Set it to 0 to run the suite with the wait.
os.environ.setdefault(ALLOW_ENV, "1")

CPU_BASE = "python3.11-bookworm"
DEFAULT_ENTRY = paths.repo_root() / "entries" / "mnist-cnn-cpu"
# Captured before any test points RUNNER_HOME somewhere private.
SHARED_WHEELHOUSE = paths.wheelhouse_dir()


@pytest.fixture(scope="session")
def engine():
    from runner.engine import ensure_engine

    engine = ensure_engine(install=True)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def docker_client(engine):
    """The Docker API's client of the session's engine (Docker's, or Podman's API service).
    An engine with no such API (Charliecloud) fails the test that asks, naming why: it is a
    test of the Docker API, to run with RUNNER_ENGINE=docker or podman."""
    client = getattr(engine, "client", None)
    if client is None:
        pytest.fail(f"this test uses the Docker API, which the {engine.name} engine does not have "
                    "(run it with RUNNER_ENGINE=docker or podman)", pytrace=False)
    return client


@pytest.fixture(scope="session")
def local_slurm():
    """A real Slurm on this machine (tests/slurm/local_slurm.py: installs slurm-wlm and munge
    when missing, starts munged, slurmctld and two slurmd "nodes"; the default partition holds
    the first only), stopped at the session's end."""
    # By path: a test directory named like a package ("slurm") is not reliably importable
    # under pytest's prepend import mode once other test folders are on sys.path.
    import importlib.util

    spec = importlib.util.spec_from_file_location("runner_tests_local_slurm", Path(__file__).parent / "slurm" / "local_slurm.py")
    local_slurm = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = local_slurm  # dataclasses look their module up by name
    spec.loader.exec_module(local_slurm)
    start, stop = local_slurm.start, local_slurm.stop

    cluster = start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", str(cluster.conf))
        try:
            yield cluster
        finally:
            stop(cluster.work)


@pytest.fixture(scope="session")
def cpu_base_image(engine):
    from runner.images import ensure_base

    return ensure_base(CPU_BASE, engine)


def make_entry(folder: Path, *, dockerfile: str, lock: str, files: dict[str, str] | None = None,
               base_image: str = CPU_BASE) -> Path:
    """Write a small but valid entry folder (manifest copied from the default entry's shape)."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    manifest = yaml.safe_load((DEFAULT_ENTRY / "entry.yaml").read_text())
    manifest.update(name=folder.name, base_image=base_image, lock="requirements.lock",
                    description="test entry")
    (folder / "entry.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (folder / "Dockerfile").write_text(dockerfile)
    (folder / "requirements.lock").write_text(lock)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def private_home(tmp_path, monkeypatch):
    """A throw-away RUNNER_HOME (own wheelhouse, records), so tests may tamper with it."""
    home = tmp_path / "runner-home"
    home.mkdir()
    monkeypatch.setenv("RUNNER_HOME", str(home))
    return home


@pytest.fixture
def host_load_is_not_the_subject(monkeypatch):
    """Lift both contention thresholds (other runnable tasks and hypervisor steal).

    For tests about the sandbox, the evaluator or the bundle: a shared CI machine's load or
    its hypervisor's steal must not mark their run non-conforming. Contention marking itself
    is tested with the defaults in tests/test_contention.py and tests/hostile/.
    """
    monkeypatch.setenv("RUNNER_MAX_OTHER_RUNNABLE", "1000")
    monkeypatch.setenv("RUNNER_MAX_STEAL", "1")


def copy_wheel_into(home: Path, stored: Path) -> Path:
    """Seed a private wheelhouse with a wheel from the shared one (no download needed)."""
    target = home / "wheelhouse" / stored.relative_to(SHARED_WHEELHOUSE)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(stored, target)
    return target


# --- a skipped test is a missing capability, not a pass --------------------------------
# Only a missing (or present) GPU may skip a test: everything else the suite needs is
# installed by the README's test command, so any other skip means that command is broken.
GPU_SKIP = re.compile(r"\b(GPU|NVIDIA|CUDA)\b")
_forbidden_skips: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
        if not GPU_SKIP.search(reason):
            _forbidden_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _forbidden_skips and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _forbidden_skips:
        terminalreporter.section("skips that are not allowed (only a missing GPU may skip)")
        for line in _forbidden_skips:
            terminalreporter.write_line(line)
