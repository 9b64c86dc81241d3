"""Entry image builds: lock checks, wheelhouse, hermetic build, labels, SBOM, cache."""

from __future__ import annotations

import contextlib

import docker.errors
import pytest
from conftest import DEFAULT_ENTRY, SHARED_WHEELHOUSE, copy_wheel_into, make_entry

from runner.entry_build import build_entry, entry_image, parse_lock, version_of, wheelhouse
from runner.entry_build.lockfile import normalise_name
from runner.cli import main
from runner.errors import BuildError, UserError
from runner.manifest import load_entry

# A small pure-Python wheel, pinned exactly as the default entry pins it (no extra download).
SMALL_PIN = next(p for p in parse_lock(DEFAULT_ENTRY / "requirements.lock")
                 if p.key == "typing-extensions")
SMALL_LOCK = f"# test lock\n{SMALL_PIN.name}=={SMALL_PIN.version} \\\n    --hash=sha256:{SMALL_PIN.hashes[0]}\n"

SMALL_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY wheels/ /wheels/
COPY entry/requirements.lock /tmp/requirements.lock
RUN python3 -m venv /opt/venv \\
 && /opt/venv/bin/python3 -m pip install --no-index --find-links /wheels --require-hashes \\
        --no-cache-dir --disable-pip-version-check -r /tmp/requirements.lock \\
 && rm -rf /wheels
COPY entry/ /entry/
ENV PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 1000:1000
"""

NETWORK_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN python3 -c "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/', timeout=10)"
"""


def _write_lock(tmp_path, text):
    path = tmp_path / "requirements.lock"
    path.write_text(text)
    return path


# --- the lock -------------------------------------------------------------------------

def test_a_failed_build_is_one_line_that_keeps_the_whole_log():
    """The line explains the failing step alone; the log ``runner build -v`` prints is all of
    it, the builder's error last (a BuildError is a UserError: the CLI's one line)."""
    log = ["Step 1/2 : RUN pip install --require-hashes x\n", "ok\n", "Step 2/2 : RUN false\n", "marker-9\n"]
    err = entry_image._build_failure("probe", "Step 2/2 : RUN false", "returned a non-zero code: 1", log)
    assert isinstance(err, BuildError) and isinstance(err, UserError)
    assert err.build_log == [*log, "returned a non-zero code: 1"]
    assert "building probe failed at Step 2/2 : RUN false" in err.problem and "pip" not in err.problem


def test_lock_of_the_default_entry_pins_torch_cpu_and_its_deps():
    pins = {p.key: p for p in parse_lock(DEFAULT_ENTRY / "requirements.lock")}
    assert pins["torch"].version == "2.13.0+cpu"
    for needed in ("numpy", "onnx", "onnxruntime", "filelock", "sympy", "networkx", "jinja2",
                   "markupsafe", "fsspec", "typing-extensions", "setuptools", "mpmath"):
        assert needed in pins, needed
    assert all(len(h) == 64 for p in pins.values() for h in p.hashes)


def test_unpinned_lock_line_is_refused_with_its_number(tmp_path):
    lock = _write_lock(tmp_path, SMALL_LOCK + f"numpy>=2 --hash=sha256:{'0' * 64}\n")
    with pytest.raises(UserError, match=r"line 4: 'numpy' is not pinned"):
        parse_lock(lock)


def test_unhashed_lock_line_is_refused_with_its_number(tmp_path):
    lock = _write_lock(tmp_path, "# header\n\nnumpy==2.4.6\n")
    with pytest.raises(UserError, match=r"line 3: 'numpy==2.4.6' has no --hash=sha256:"):
        parse_lock(lock)


def test_index_options_are_refused_in_a_lock(tmp_path):
    lock = _write_lock(tmp_path, "--extra-index-url https://example.org/simple\n" + SMALL_LOCK)
    with pytest.raises(UserError, match=r"line 1: option '--extra-index-url' is not allowed"):
        parse_lock(lock)


def test_continuation_lines_and_several_hashes(tmp_path):
    lock = _write_lock(tmp_path, f"a==1 \\\n  --hash=sha256:{'a' * 64} \\\n  --hash=sha256:{'b' * 64}\nB_c==2 --hash=sha256:{'c' * 64}\n")
    pins = parse_lock(lock)
    assert [(p.key, p.version, len(p.hashes), p.line) for p in pins] == [("a", "1", 2, 1), ("b-c", "2", 1, 4)]
    assert normalise_name("Typing_Extensions") == "typing-extensions"


# --- the wheelhouse -------------------------------------------------------------------

def test_wheelhouse_is_content_addressed_and_verified(tmp_path):
    pins = parse_lock(_write_lock(tmp_path, SMALL_LOCK))
    found = wheelhouse.resolve(pins)  # downloads into the shared wheelhouse once
    path = found["typing-extensions"]
    assert path.parent.name == SMALL_PIN.hashes[0]
    assert path.parent.parent.name == "sha256" and path.name.endswith(".whl")
    assert wheelhouse.sha256_file(path) == SMALL_PIN.hashes[0]


@pytest.mark.docker
def test_tampered_wheel_is_refused_before_building(private_home, tmp_path, engine, docker_client,
                                                   cpu_base_image):
    shared = wheelhouse.resolve(parse_lock(_write_lock(tmp_path, SMALL_LOCK)), SHARED_WHEELHOUSE)
    copied = copy_wheel_into(private_home, shared["typing-extensions"])
    copied.chmod(0o644)
    with open(copied, "ab") as f:
        f.write(b"tampered")
    entry = load_entry(make_entry(tmp_path / "tampered-entry", dockerfile=SMALL_DOCKERFILE,
                                  lock=SMALL_LOCK))
    images_before = {i.id for i in docker_client.images.list()}
    with pytest.raises(UserError, match="changed after download") as err:
        build_entry(entry, engine)
    assert f"rm -r {copied.parent}" in err.value.fix
    assert {i.id for i in docker_client.images.list()} == images_before


@pytest.mark.docker
def test_pip_inside_the_build_also_refuses_a_wheel_that_does_not_match(
        private_home, tmp_path, engine, cpu_base_image, monkeypatch):
    """Second line of defence: even if a changed wheel reached the context, the build fails."""
    shared = wheelhouse.resolve(parse_lock(_write_lock(tmp_path, SMALL_LOCK)), SHARED_WHEELHOUSE)
    copy_wheel_into(private_home, shared["typing-extensions"])  # the good wheel, no download
    entry = load_entry(make_entry(tmp_path / "pip-refuses", dockerfile=SMALL_DOCKERFILE,
                                  lock=SMALL_LOCK))
    real_link_into = wheelhouse.link_into

    def link_then_tamper(wheels, folder):
        real_link_into(wheels, folder)
        for wheel in folder.iterdir():
            wheel.unlink()  # break the hard link, then write a changed copy
            wheel.write_bytes(shared["typing-extensions"].read_bytes() + b"tampered")

    monkeypatch.setattr("runner.entry_build.context.link_into", link_then_tamper)
    with pytest.raises(UserError, match="pip refused a wheel"):
        build_entry(entry, engine)


# --- building -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_entry(tmp_path_factory):
    folder = tmp_path_factory.mktemp("entries") / "small-entry"
    return load_entry(make_entry(folder, dockerfile=SMALL_DOCKERFILE, lock=SMALL_LOCK,
                                 files={"hello.py": "print('hello')\n"}))


@pytest.fixture(scope="module")
def small_build(small_entry, engine, docker_client, cpu_base_image):
    built = build_entry(small_entry, engine, no_cache=True)
    yield built
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(built.tag, force=True)


@pytest.mark.docker
def test_small_entry_builds_with_labels_and_sbom(small_entry, small_build, docker_client,
                                                 cpu_base_image):
    assert not small_build.cached
    assert small_build.base.id == cpu_base_image.id
    image = docker_client.images.get(small_build.tag)
    assert image.id == small_build.image_id
    digests = small_entry.digests()
    assert image.labels["org.runner.entry"] == "small-entry"
    assert image.labels["org.runner.entry.manifest-sha256"] == digests["manifest"]
    assert image.labels["org.runner.entry.dockerfile-sha256"] == digests["dockerfile"]
    assert image.labels["org.runner.entry.lock-sha256"] == digests["lock"]
    assert image.labels["org.runner.entry.base-image-id"] == cpu_base_image.id
    assert version_of(small_build.sbom, "typing-extensions") == SMALL_PIN.version
    assert version_of(small_build.sbom, "python3.11", "debian")
    assert version_of(small_build.sbom, "dpkg", "debian")
    out = docker_client.containers.run(small_build.tag, ["sh", "-c", "id -u; cat /entry/hello.py"],
                                       network_mode="none", remove=True).decode()
    assert out.split() == ["1000", "print('hello')"]


@pytest.mark.docker
def test_rebuild_of_an_unchanged_entry_is_a_cache_hit(small_entry, small_build, engine):
    again = build_entry(small_entry, engine)
    assert again.cached
    assert again.image_id == small_build.image_id and again.tag == small_build.tag
    assert again.sbom == small_build.sbom


@pytest.mark.docker
def test_changed_entry_code_gets_a_new_image(small_entry, small_build, engine, docker_client):
    (small_entry.path / "hello.py").write_text("print('changed')\n")
    try:
        changed = build_entry(small_entry, engine)
        assert not changed.cached and changed.tag != small_build.tag
        out = docker_client.containers.run(changed.tag, ["cat", "/entry/hello.py"],
                                           network_mode="none", remove=True)
        assert out.decode() == "print('changed')\n"
        docker_client.images.remove(changed.tag, force=True)
    finally:
        (small_entry.path / "hello.py").write_text("print('hello')\n")


@pytest.mark.docker
def test_dockerfile_that_reaches_the_network_fails_clearly(tmp_path, engine, cpu_base_image):
    entry = load_entry(make_entry(tmp_path / "net-entry", dockerfile=NETWORK_DOCKERFILE,
                                  lock=SMALL_LOCK))
    with pytest.raises(UserError) as err:
        build_entry(entry, engine)
    assert "tried to reach the network" in err.value.problem
    assert "urlopen" in err.value.problem  # names the step
    assert "hash-pinned lock" in err.value.fix


@pytest.mark.docker
def test_full_disk_is_refused_before_building(small_entry, engine, cpu_base_image,
                                              monkeypatch):
    monkeypatch.setattr(entry_image, "MIN_FREE_GIB", 10**9)
    with pytest.raises(UserError, match="GiB free"):
        build_entry(small_entry, engine, no_cache=True)


def test_missing_entry_folder_is_one_line(capsys, tmp_path):
    assert main(["build", str(tmp_path / "no-such-entry")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("runner: error: no entry folder at") and len(err.splitlines()) == 1


# --- the default entry ----------------------------------------------------------------

@pytest.fixture(scope="module")
def default_build(engine, cpu_base_image):
    return build_entry(load_entry(DEFAULT_ENTRY), engine)


@pytest.mark.docker
def test_default_entry_image_imports_its_frameworks(default_build, docker_client):
    out = docker_client.containers.run(
        default_build.tag,
        ["python3", "-c", ("import torch, numpy, onnxruntime, onnx; print(torch.__version__); "
                           "import os; print(os.getuid())")],
        network_mode="none", remove=True,
    ).decode().split()
    pinned = {p.key: p.version for p in parse_lock(DEFAULT_ENTRY / "requirements.lock")}
    assert out == [pinned["torch"], "1000"]


@pytest.mark.docker
def test_default_entry_sbom_lists_torch_with_its_version(default_build):
    pinned = {p.key: p.version for p in parse_lock(DEFAULT_ENTRY / "requirements.lock")}
    assert version_of(default_build.sbom, "torch") == "2.13.0+cpu" == pinned["torch"]
    for name in ("numpy", "onnxruntime", "onnx"):
        assert version_of(default_build.sbom, name) == pinned[name]
    assert version_of(default_build.sbom, "python3.11", "debian")
