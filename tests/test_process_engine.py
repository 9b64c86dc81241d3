"""The daemonless engines' pieces that need no container: the cgroup limits a spec becomes,
the GPU devices and driver libraries a container is given (against a fake driver: a fake
``/proc/devices`` and a fake ``ldconfig -p``), the mount points the staging refuses, and
how a Dockerfile reaches ch-image. The containers themselves: tests/test_charliecloud.py."""

from __future__ import annotations

import pytest

from runner.engine import cgroups, host_gpu
from runner.engine.charliecloud import CharliecloudEngine, _substitute_from, content_digest, storage_name
from runner.engine.gpus import gpu_containers_possible
from runner.engine.interface import ContainerSpec, EngineError, Mount
from runner.engine.kinds import ENGINES
from runner.engine.process import Staged, _minimal_dev, gpu_ids, mount_points

LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
	libnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
	libnvidia-ml.so.1 (libc6) => /usr/lib/i386-linux-gnu/libnvidia-ml.so.1
	libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
	libcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12
	libc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
"""
PROC_DEVICES = """\
Character devices:
  1 mem
195 nvidia-frontend
234 nvidia-uvm
237 nvidia-caps
Block devices:
  8 sd
"""


def test_memory_limits_read_dockers_notation():
    assert cgroups.memory_bytes("512m") == 512 * 1024**2
    assert cgroups.memory_bytes("8g") == 8 * 1024**3
    assert cgroups.memory_bytes(4096) == 4096
    with pytest.raises(EngineError, match="not a size"):
        cgroups.memory_bytes("lots")


def test_a_cgroup_name_cannot_leave_the_runners_groups():
    for bad in ("../escape", "a/b", ".hidden", ""):
        with pytest.raises(EngineError):
            cgroups.Cgroups(bad)


def test_the_driver_libraries_are_the_64_bit_driver_ones_only():
    found = host_gpu.driver_libraries(LDCONFIG)
    assert [p.name for p in found] == ["libcuda.so.1", "libnvidia-ml.so.1"]
    assert all("x86_64" in str(p) for p in found)  # not the 32-bit copy, not the CUDA runtime, not libc


def test_a_container_may_open_only_the_gpus_its_spec_names(tmp_path):
    devices = tmp_path / "devices"
    devices.write_text(PROC_DEVICES)
    rules = host_gpu.device_rules(["1"], devices)
    assert "c 195:1 rwm" in rules and "c 195:0 rwm" not in rules
    assert {"c 195:255 rwm", "c 234:* rwm", "c 237:* rwm"} <= set(rules)
    assert not any(rule.startswith("b ") for rule in rules)  # never a block device


def test_the_spec_becomes_the_cgroup_limits(monkeypatch):
    monkeypatch.setattr(cgroups, "version", lambda: 1)
    engine = CharliecloudEngine(ENGINES["charliecloud"])
    spec = ContainerSpec(image="x", command=["true"], mounts=[], cpus=2, memory="1g", cpu_shares=2, gpu_ids=["0"])
    limits = engine._limits(spec)
    assert limits.cpuset == "0-1" and limits.cpu_quota is None
    assert limits.memory == 1024**3 and limits.pids == 4096 and limits.cpu_weight == 2
    assert "c 195:0 rwm" in limits.devices and "c 1:3 rwm" in limits.devices
    fraction = engine._limits(ContainerSpec(image="x", command=["true"], mounts=[], cpus=0.5))
    assert fraction.cpuset is None and fraction.cpu_quota == 0.5
    assert gpu_ids(ContainerSpec(image="x", command=[], mounts=[], gpus=2)) == ["0", "1"]


def test_a_gpu_container_gets_the_driver_its_devices_and_its_ids(monkeypatch, tmp_path):
    """The GPU path of the Charliecloud engine against a fake driver: the driver's libraries
    bound read-only at /usr/local/nvidia/lib64 and on the loader's path, CUDA_VISIBLE_DEVICES
    from the spec, and nothing of the kind for a container without GPUs."""
    real = host_gpu.driver_libraries
    monkeypatch.setattr(host_gpu, "driver_libraries", lambda: real(LDCONFIG))
    engine = CharliecloudEngine(ENGINES["charliecloud"])
    image = tmp_path / "image"
    (image / "usr").mkdir(parents=True)
    monkeypatch.setattr(engine, "image_dir", lambda ref: image)
    monkeypatch.setattr(engine, "_find", lambda ref: {"tag": ref, "cwd": "/", "env": {}})
    staged = Staged(tmp_path / "stage", (), (1000, 1000))
    spec = ContainerSpec(image="runner/entry/x:1", command=["python3", "train.py"], mounts=[], gpu_ids=["1"],
                         env={"RUNNER_SEED": "7"})
    lines = "\n".join(engine.stage_commands(spec, staged))
    assert "mount --bind -o ro /usr/lib/x86_64-linux-gnu/libcuda.so.1" in lines
    assert "CUDA_VISIBLE_DEVICES=1\n" in lines and "RUNNER_SEED=7\n" in lines
    assert f"{staged.folder}/root{host_gpu.CONTAINER_LIBRARY_DIR}" in lines  # its mount point, in the overlay
    argv = engine.command(spec, staged)
    assert f"--set-env=LD_LIBRARY_PATH={host_gpu.CONTAINER_LIBRARY_DIR}" in argv
    assert f"{staged.folder}/nvidia:{host_gpu.CONTAINER_LIBRARY_DIR}" in argv
    assert argv[-3:] == ["--", "python3", "train.py"]
    plain = ContainerSpec(image="runner/entry/x:1", command=["true"], mounts=[])
    assert "nvidia" not in "\n".join(engine.stage_commands(plain, staged)) + " ".join(engine.command(plain, staged))
    assert gpu_containers_possible({"docker": {"engine": "charliecloud", "nvidia_runtime": True}})
    assert not gpu_containers_possible({"docker": {"engine": "charliecloud", "nvidia_runtime": False}})


def test_the_environment_refuses_what_the_env_file_could_not_hold(monkeypatch, tmp_path):
    engine = CharliecloudEngine(ENGINES["charliecloud"])
    for env in ({"A": "line\nB=injected"}, {"BAD-NAME": "1"}, {"A": "x\nRUNNER_ENV_END\nrm -rf /"}):
        with pytest.raises(EngineError, match="cannot be passed"):
            engine._environment(ContainerSpec(image="x", command=[], mounts=[], env=env))


def test_a_mount_through_a_link_of_the_image_is_refused(tmp_path):
    """An image could make /output a link to a host path: the staging (root, outside the
    container) would then create or bind over the host's folder."""
    root = tmp_path / "image"
    root.mkdir()
    (root / "output").symlink_to("/etc")
    (root / "data").mkdir()
    spec = ContainerSpec(image="x", command=[], mounts=[Mount(tmp_path, "/output", read_only=False)])
    with pytest.raises(EngineError, match="symbolic link"):
        mount_points(root, spec)
    spec = ContainerSpec(image="x", command=[], mounts=[Mount(tmp_path, "/data/train")])
    assert mount_points(root, spec) == ["/data/train", "/scratch"]
    with pytest.raises(EngineError, match="absolute path"):
        mount_points(root, ContainerSpec(image="x", command=[], mounts=[Mount(tmp_path, "/data/../etc")]))


def test_from_lines_get_the_runners_build_arguments_and_nothing_else_changes():
    args = {"BASE_IMAGE": "runner/base:abc"}
    assert _substitute_from("FROM ${BASE_IMAGE} AS deps", args) == "FROM runner/base:abc AS deps"
    assert _substitute_from("from $BASE_IMAGE", args) == "from runner/base:abc"
    assert _substitute_from("RUN echo ${BASE_IMAGE}", args) == "RUN echo ${BASE_IMAGE}"
    assert storage_name("runner/entry/mnist:abc") == "runner%entry%mnist+abc"
    assert storage_name("runner/base") == "runner%base+latest"


def test_an_image_id_is_its_content(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "a").write_text("same")
        (root / "ch").mkdir()
    (one / "ch" / "metadata.json").write_text("{}")  # ch-image's own: not content
    (two / ".git").write_text("gitdir: elsewhere")
    assert content_digest(one, {"A": "1"}) == content_digest(two, {"A": "1"})
    assert content_digest(one, {"A": "1"}) != content_digest(one, {"A": "2"})
    (two / "etc" / "a").write_text("other")
    assert content_digest(one, {"A": "1"}) != content_digest(two, {"A": "1"})


def test_the_containers_dev_names_only_the_ordinary_devices_and_its_own_gpus(tmp_path):
    """On cgroup v2 (no devices controller) the minimal /dev is the only barrier between an
    entry and the host's other GPUs and devices."""
    lines = "\n".join(_minimal_dev(tmp_path / "dev", ContainerSpec(image="x", command=[], mounts=[], gpu_ids=["1"])))
    assert "mount --bind /dev/nvidia1 " in lines and "/dev/nvidia0" not in lines
    assert "/dev/nvidiactl" in lines and "/dev/vda" not in lines and "/dev/fuse" not in lines
    assert lines.rstrip().endswith(f"mount --move {tmp_path / 'dev'} /dev")
    plain = "\n".join(_minimal_dev(tmp_path / "dev", ContainerSpec(image="x", command=[], mounts=[])))
    assert "nvidia" not in plain and "size=1g" in plain  # the run contract's /dev/shm size
