"""The framework layer: the lock installed by the runner once per base and lock lines, in a
container with the wheels mounted read-only and committed; entries with the same lock lines
build on the same image; an entry that installs the lock itself is built as before."""

from __future__ import annotations

import contextlib
import io
import tarfile

import docker.errors
import pytest
from conftest import DEFAULT_ENTRY, SHARED_WHEELHOUSE, copy_wheel_into, make_entry

from runner.engine.docker_api import create_options
from runner.engine.interface import BuildFailed, LayerSpec
from runner.engine.labels import LABEL_PID, LABEL_RUN, MANAGED_LABEL
from runner.entry_build import build_entry, parse_lock, version_of, wheelhouse
from runner.entry_build.framework import framework_key, framework_tag, installs_itself
from runner.errors import UserError
from runner.manifest import load_entry

PINS = {p.key: p for p in parse_lock(DEFAULT_ENTRY / "requirements.lock")}
SMALL = [PINS["typing-extensions"], PINS["packaging"]]  # two pure-Python wheels the default entry pins


def _lock(pins, header="# test lock\n") -> str:
    return header + "".join(f"{p.name}=={p.version} \\\n    --hash=sha256:{p.hashes[0]}\n" for p in pins)


FRAMEWORK_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN useradd --uid 1000 --user-group --create-home --home-dir /home/entry entry
COPY entry/ /entry/
ENV PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 1000:1000
"""


def _entry(folder, lock, files=None):
    return load_entry(make_entry(folder, dockerfile=FRAMEWORK_DOCKERFILE, lock=lock, files=files))


def _files(client, image) -> dict[str, bytes]:
    """Every regular file of ``image`` (its merged file system) and its first bytes."""
    container = client.containers.create(image, command=["true"])
    try:
        stream = io.BytesIO(b"".join(container.export()))
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=stream) as tar:
        return {m.name: b"" for m in tar if m.isreg()}


@pytest.fixture
def stocked_home(private_home, tmp_path):
    """A private runner home whose wheelhouse holds the small pins (no download)."""
    lock = tmp_path / "stock.lock"
    lock.write_text(_lock(SMALL))
    for wheel in wheelhouse.resolve(parse_lock(lock), SHARED_WHEELHOUSE).values():
        copy_wheel_into(private_home, wheel)
    return private_home


def test_a_dockerfile_that_copies_wheels_installs_the_lock_itself(tmp_path):
    mine = tmp_path / "Dockerfile"
    mine.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE} AS deps\nCOPY wheels/ /wheels/\nFROM ${BASE_IMAGE}\n")
    assert installs_itself(mine)
    mine.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE} AS deps\nCOPY ./wheels /w\n")
    assert installs_itself(mine)
    mine.write_text(FRAMEWORK_DOCKERFILE)
    assert not installs_itself(mine)
    # Every entry shipped with the runner builds on the framework layer.
    for dockerfile in sorted((DEFAULT_ENTRY.parent).glob("*/Dockerfile")):
        assert not installs_itself(dockerfile), dockerfile


def test_the_framework_key_is_the_lock_lines_not_their_order_or_comments():
    one = framework_key("sha256:base", SMALL)
    assert framework_key("sha256:base", list(reversed(SMALL))) == one
    assert framework_key("sha256:other-base", SMALL) != one
    assert framework_key("sha256:base", SMALL[:1]) != one


@pytest.mark.docker
def test_two_entries_with_the_same_lock_lines_share_one_framework_image(stocked_home, tmp_path, engine,
                                                                       docker_client, cpu_base_image):
    first = _entry(tmp_path / "framework-one", _lock(SMALL), {"one.py": "print(1)\n"})
    # The same pins, another order and other comments: the same lock lines.
    second = _entry(tmp_path / "framework-two", _lock(list(reversed(SMALL)), "# another header\n"),
                    {"two.py": "print(2)\n"})
    tag = framework_tag(framework_key(cpu_base_image.id, SMALL))
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(tag, force=True)
    built = []
    try:
        built.append(build_entry(first, engine))
        framework = docker_client.images.get(tag)
        built.append(build_entry(second, engine))
        assert docker_client.images.get(tag).id == framework.id  # not installed again
        for image in built:
            labels = docker_client.images.get(image.tag).labels
            assert labels["org.runner.entry.framework-image-id"] == framework.id
            assert version_of(image.sbom, "typing-extensions") == PINS["typing-extensions"].version
            assert version_of(image.sbom, "packaging") == PINS["packaging"].version
            # The entry's image stands on the framework's layers, then its own.
            layers = docker_client.images.get(image.tag).attrs["RootFS"]["Layers"]
            assert layers[:len(framework.attrs["RootFS"]["Layers"])] == framework.attrs["RootFS"]["Layers"]
        # The framework is the base and one layer: the venv, and no wheel file anywhere.
        assert len(framework.attrs["RootFS"]["Layers"]) == len(cpu_base_image_layers(docker_client, cpu_base_image)) + 1
        files = _files(docker_client, tag)
        assert not [name for name in files if name.endswith(".whl") and "python-wheels" not in name]
        assert any(name.startswith("opt/venv/lib/python3.11/site-packages/packaging/") for name in files)
        assert not [name for name in files if name.startswith(("tmp/", "root/.cache"))]
        # Its labels name it and no owner: a container of it is not the runner's.
        labels = framework.labels
        assert labels["org.runner.framework.base-image-id"] == cpu_base_image.id
        assert labels.get(MANAGED_LABEL, "") == "" and labels.get(LABEL_PID, "") == ""
        assert labels.get(LABEL_RUN, "") == ""
        out = docker_client.containers.run(built[1].tag, ["sh", "-c", "id -u; python3 -c 'import packaging; "
                                           "print(packaging.__version__)'"], network_mode="none", remove=True,
                                           **create_options())
        assert out.decode().split() == ["1000", PINS["packaging"].version]
    finally:
        for image in built:
            with contextlib.suppress(docker.errors.APIError):
                docker_client.images.remove(image.tag, force=True)
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(tag, force=True)


def cpu_base_image_layers(client, base) -> list[str]:
    return client.images.get(base.id).attrs["RootFS"]["Layers"]


@pytest.mark.docker
def test_a_tampered_wheel_never_reaches_the_framework_install(stocked_home, tmp_path, engine, docker_client,
                                                              cpu_base_image):
    stored = wheelhouse.wheel_path(SMALL[0].hashes[0], stocked_home / "wheelhouse")
    stored.chmod(0o644)
    with open(stored, "ab") as f:
        f.write(b"tampered")
    entry = _entry(tmp_path / "framework-tampered", _lock(SMALL))
    before = {i.id for i in docker_client.images.list()}
    with pytest.raises(UserError, match="changed after download"):
        build_entry(entry, engine)
    assert {i.id for i in docker_client.images.list()} == before


@pytest.mark.docker
def test_a_layer_command_that_writes_outside_its_folder_fails(tmp_path, engine, cpu_base_image, docker_client):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "payload").write_text("x\n")
    spec = LayerSpec(command=("/bin/sh", "-c", "mkdir -p /opt/venv && cp /tmp/in/payload /opt/venv/ "
                                                "&& touch /etc/planted"), inputs_at="/tmp/in", output="/opt/venv")
    tag = "runner/framework:test-outside"
    with pytest.raises(BuildFailed, match="/etc/planted"):
        for _ in engine.install_layer(cpu_base_image.tag, inputs, spec, tag, labels={}):
            pass
    assert engine.find_image(tag) is None
    # No network either: the command runs with none.
    spec = LayerSpec(command=("/bin/sh", "-c", "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\""),
                     inputs_at="/tmp/in", output="/opt/venv")
    with pytest.raises(BuildFailed, match="exited with 1"):
        for _ in engine.install_layer(cpu_base_image.tag, inputs, spec, tag, labels={}):
            pass
    assert not docker_client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=layer-build"})
