"""Base image recipes and builds (debootstrap + docker import) against the real engine."""

from __future__ import annotations

import hashlib
import shutil

import docker.errors
import pytest
from conftest import CPU_BASE

from runner.cli import main
from runner.errors import UserError
from runner.images import (
    LABEL_RECIPE_HASH,
    available,
    debootstrap,
    ensure_base,
    load_recipe,
)
from runner.images.recipe import MIRROR_ENV, recipe_hash


def test_repository_has_the_cpu_and_cuda_recipes():
    names = available()
    assert CPU_BASE in names and "cuda12-runtime" in names
    cpu = load_recipe(CPU_BASE)
    assert cpu.kind == "debootstrap" and cpu.suite == "bookworm" and "python3" in cpu.packages
    assert cpu.tag.endswith(cpu.content_hash[:16])
    cuda = load_recipe("cuda12-runtime")
    assert cuda.kind == "registry" and "@sha256:" in cuda.reference


def test_tag_follows_recipe_content(tmp_path):
    shutil.copytree(load_recipe(CPU_BASE).folder, tmp_path / CPU_BASE)
    copy = load_recipe(CPU_BASE, tmp_path)
    assert copy.tag == load_recipe(CPU_BASE).tag  # same bytes, same tag
    recipe_file = tmp_path / CPU_BASE / "recipe.yaml"
    recipe_file.write_text(recipe_file.read_text().replace("  - ca-certificates\n", ""))
    assert recipe_hash(tmp_path / CPU_BASE) != copy.content_hash
    assert load_recipe(CPU_BASE, tmp_path).tag != copy.tag


def test_mirror_override_does_not_change_the_tag(monkeypatch):
    before = load_recipe(CPU_BASE)
    monkeypatch.setenv(MIRROR_ENV, "http://mirror.example/debian")
    after = load_recipe(CPU_BASE)
    assert after.effective_mirror == "http://mirror.example/debian"
    assert after.tag == before.tag


def test_unknown_and_malformed_recipes_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no base image recipe named 'nope'") as err:
        load_recipe("nope")
    assert CPU_BASE in err.value.fix
    (tmp_path / "floating").mkdir()
    (tmp_path / "floating" / "recipe.yaml").write_text("kind: registry\nreference: nvidia/cuda:12.4.1-runtime-ubuntu22.04\n")
    with pytest.raises(UserError, match="not pinned by digest"):
        load_recipe("floating", tmp_path)
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "recipe.yaml").write_text("kind: debootstrap\nsuite: bookworm\n")
    with pytest.raises(UserError, match="lacks mirror, packages, source_date_epoch"):
        load_recipe("partial", tmp_path)


def test_debootstrap_needs_root_and_the_tool(monkeypatch, tmp_path):
    monkeypatch.setattr("os.geteuid", lambda: 1000)  # the suite runs as root; pretend not
    with pytest.raises(UserError, match="needs root"):
        debootstrap.require_root_and_debootstrap()
    monkeypatch.undo()
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without either tool
    assert shutil.which("debootstrap") is None and shutil.which("mmdebstrap") is None
    with pytest.raises(UserError, match="neither mmdebstrap nor debootstrap is installed") as err:
        debootstrap.require_root_and_debootstrap()
    assert "apt-get install -y mmdebstrap" in err.value.fix
    monkeypatch.setenv("RUNNER_BASE_TOOL", "debootstrap")
    with pytest.raises(UserError, match="^debootstrap is not installed") as err:
        debootstrap.require_root_and_debootstrap()
    assert "apt-get install -y debootstrap" in err.value.fix


def test_mmdebstrap_is_preferred_and_runner_base_tool_chooses(monkeypatch, tmp_path):
    """mmdebstrap first where both are on PATH; RUNNER_BASE_TOOL picks one, or is refused."""
    for name in ("mmdebstrap", "debootstrap"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert debootstrap.bootstrap_tool() == ("mmdebstrap", str(tmp_path / "mmdebstrap"))
    monkeypatch.setenv("RUNNER_BASE_TOOL", "debootstrap")
    assert debootstrap.bootstrap_tool() == ("debootstrap", str(tmp_path / "debootstrap"))
    monkeypatch.setenv("RUNNER_BASE_TOOL", "")
    (tmp_path / "mmdebstrap").unlink()
    assert debootstrap.bootstrap_tool() == ("debootstrap", str(tmp_path / "debootstrap"))
    monkeypatch.setenv("RUNNER_BASE_TOOL", "cdebootstrap")
    with pytest.raises(UserError, match="RUNNER_BASE_TOOL='cdebootstrap' is not a base image tool"):
        debootstrap.bootstrap_tool()


@pytest.mark.docker
def test_cpu_base_image_runs_python_311(docker_client, cpu_base_image):
    recipe = load_recipe(CPU_BASE)
    assert cpu_base_image.tag == recipe.tag
    image = docker_client.images.get(cpu_base_image.tag)
    assert image.id == cpu_base_image.id
    assert image.labels[LABEL_RECIPE_HASH] == recipe.content_hash
    out = docker_client.containers.run(
        cpu_base_image.tag, ["python3", "-c", "import sys, venv, ssl; print(sys.version_info[:2])"],
        network_mode="none", remove=True,
    )
    assert out.decode().strip() == "(3, 11)"


@pytest.mark.docker
def test_ensure_base_does_not_rebuild_an_unchanged_recipe(engine, cpu_base_image):
    again = ensure_base(CPU_BASE, engine)
    assert again.id == cpu_base_image.id and not again.built


@pytest.mark.docker
def test_registry_recipe_without_a_registry_names_the_reference(engine, docker_client):
    recipe = load_recipe("cuda12-runtime")
    try:
        docker_client.images.get(recipe.reference)
        pytest.skip("this host already has the CUDA image")
    except docker.errors.ImageNotFound:
        pass
    with pytest.raises(UserError) as err:
        ensure_base("cuda12-runtime", engine)
    assert recipe.reference in err.value.problem and "could not be pulled" in err.value.problem
    assert "docker load" in err.value.fix


@pytest.mark.docker
def test_two_builds_of_one_recipe_give_the_same_files(engine, docker_client, tmp_path):
    """Build a minimal recipe into an image, then debootstrap it again: the second tarball
    is byte-identical to the imported layer (whose diff id is the tarball's sha256)."""
    folder = tmp_path / "images" / "minbase-test"
    folder.mkdir(parents=True)
    cpu = load_recipe(CPU_BASE)
    (folder / "recipe.yaml").write_text(
        f"kind: debootstrap\nsuite: {cpu.suite}\nmirror: {cpu.mirror}\nvariant: minbase\n"
        f"packages: [ca-certificates]\nsource_date_epoch: {cpu.source_date_epoch}\n"
        f"description: test-only minimal image\n"
    )
    recipe = load_recipe("minbase-test", folder.parent)
    first = ensure_base("minbase-test", engine, images_root=folder.parent)
    try:
        assert first.built
        image = docker_client.images.get(first.id)
        layers = image.attrs["RootFS"]["Layers"]
        # What the build resolved is kept: the Debian Release and every package's version.
        from runner.images import LABEL_DEBIAN_RELEASE, base_build_record

        record = base_build_record(layers[0])
        assert record["layer"] == layers[0] and record["image_id"] == first.id
        assert record["packages"]["ca-certificates"] and record["packages"]["libc6"]
        assert record["tool"]["name"] == debootstrap.bootstrap_tool()[0] and record["tool"]["version"]
        assert record["debian_release"]["suite"] == cpu.suite or record["debian_release"]["codename"] == cpu.suite
        assert image.labels[LABEL_DEBIAN_RELEASE] == record["debian_release"]["date"]
        workdir = debootstrap.make_workdir(recipe)
        try:
            tarball = debootstrap.build_rootfs_tarball(recipe, workdir, tmp_path / "second.log")
            digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
        finally:
            debootstrap.remove_workdir(workdir)
        assert layers == [f"sha256:{digest}"]
    finally:
        docker_client.images.remove(first.id, force=True)


@pytest.mark.docker
def test_images_list_cli(docker_client, cpu_base_image, capsys):
    assert main(["images", "list"]) == 0
    out = capsys.readouterr().out
    assert CPU_BASE in out and "cuda12-runtime" in out and cpu_base_image.id[7:19] in out
