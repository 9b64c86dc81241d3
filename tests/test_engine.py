"""The engine helper against the real Docker engine, and its errors when there is none; the
registry that names each engine's implementation."""

from __future__ import annotations

import pytest

from runner.cli import main, parser
from runner.engine import Engine, ensure_engine, get_engine, require_free_space
from runner.engine.client import ping
from runner.engine.docker_api import DockerApiEngine
from runner.engine.interface import Unsupported
from runner.engine.kinds import ENGINES, implementation
from runner.errors import UserError

NO_ENGINE = "unix:///nonexistent/runner-test/docker.sock"


@pytest.mark.docker
def test_the_engine_answers_and_reports_its_version(docker_client):
    engine = get_engine()
    assert isinstance(engine, Engine) and engine.ping()
    version = engine.version()
    assert version.version == docker_client.version()["Version"]
    assert version.api.count(".") == 1


@pytest.mark.docker
def test_ensure_engine_is_a_no_op_when_the_engine_runs(docker_client):
    engine = ensure_engine(install=False)
    assert engine.ping()


def test_each_engine_names_its_implementation():
    """Docker and Podman speak the Docker Engine API: one class serves both (kinds.ENGINES);
    Charliecloud, with no daemon, has its own, and so has the host engine, with no image."""
    from runner.engine.charliecloud import CharliecloudEngine
    from runner.engine.host import HostEngine
    assert {name: implementation(kind) for name, kind in ENGINES.items()} == {
        "docker": DockerApiEngine, "podman": DockerApiEngine, "charliecloud": CharliecloudEngine,
        "host": HostEngine}


def test_an_operation_an_engine_cannot_do_is_refused_in_one_line_naming_it():
    class Minimal(DockerApiEngine):  # an engine that implements only the required operations
        network = Engine.network
        export_image = Engine.export_image

    engine = Minimal(ENGINES["podman"], client=None)
    with pytest.raises(Unsupported) as err:
        engine.network("cluster")
    assert err.value.problem.startswith("the podman engine cannot join a cluster network")
    assert "runner setup --engine docker" in err.value.fix and "\n" not in str(err.value)
    with pytest.raises(UserError, match="the podman engine cannot export an image"):
        engine.export_image("some/image:tag")


def test_no_engine_is_one_line_with_the_fix(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    assert not ping(timeout=1)
    with pytest.raises(UserError) as err:
        get_engine()
    assert "no Docker engine is reachable" in err.value.problem
    assert "runner setup" in err.value.fix
    assert "\n" not in str(err.value)


def test_ensure_engine_without_install_refuses_cleanly(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    with pytest.raises(UserError, match="no Docker engine"):
        ensure_engine(install=False)


def test_cli_prints_the_missing_engine_as_one_line(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    assert main(["images", "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("runner: error: no Docker engine is reachable")
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_full_disk_is_refused_before_work(tmp_path):
    require_free_space(tmp_path, 1, "a tiny job")  # plenty of room for one byte
    with pytest.raises(UserError) as err:
        require_free_space(tmp_path, 10**18, "building an entry image")
    assert "GiB free" in err.value.problem and "needs at least" in err.value.problem
    assert "docker system prune" in err.value.fix


def test_starting_the_engine_needs_root(monkeypatch):
    # The only way to be "not root" inside this root-run test suite.
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    from runner.engine.daemon import apt_install, start_dockerd

    with pytest.raises(UserError, match="needs root"):
        start_dockerd()
    with pytest.raises(UserError, match="needs root"):
        apt_install(["docker.io"], __import__("pathlib").Path("/dev/null"))


@pytest.mark.docker
def test_doctor_lists_what_the_host_has(docker_client, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for check in ("container engine", "base image tool", "free disk", "GPUs",
                  "NVIDIA container runtime", "Python"):
        assert check in out
    assert docker_client.version()["Version"] in out


def test_setup_offers_exactly_the_registered_engines():
    """``runner setup --engine``'s choices are written out (its arguments import nothing, for
    start-up), so they are held to the registry here: adding an engine's row adds its choice."""
    setup = next(action for action in parser(every=True)._subparsers._group_actions[0].choices["setup"]._actions
                 if "--engine" in action.option_strings)
    assert list(setup.choices) == list(ENGINES)
