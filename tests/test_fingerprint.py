"""Fingerprinting: the real CPU/memory/OS of this host, the real no-driver NVML path,
per-field NotSupported handling (NVML itself faked: no GPU can exist here), the Docker
engine section and the software probe inside a real image."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pynvml
import pytest

from runner.cli import main
from runner.errors import UserError
from runner.fingerprint import (
    capture_host,
    capture_image,
    load_fingerprint,
)
from runner.fingerprint.cpu import capture_cpu
from runner.fingerprint.docker_engine import capture_docker
from runner.fingerprint.gpu import capture_gpu
from runner.fingerprint.image_software import PROBE, parse_probe_output
from runner.fingerprint.memory import capture_memory
from runner.mlperf.system import INFERENCE_FIELDS, TRAINING_FIELDS, system_description
from runner.fingerprint.operating_system import capture_os

RECORDED = Path(__file__).parent / "data" / "fingerprints"


def _proc_cpuinfo_first() -> dict[str, str]:
    # Read independently of runner.fingerprint.cpu so the test can disagree with it.
    fields: dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


# --- CPU, memory, OS: the real host --------------------------------------------------


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux /proc")
def test_real_cpu_fingerprint_agrees_with_the_kernel():
    cpu = capture_cpu()
    info = _proc_cpuinfo_first()
    assert cpu["logical_cores"] == os.cpu_count()
    assert cpu["usable_cores"] == len(os.sched_getaffinity(0))
    assert cpu["model_name"] == info["model name"]
    assert cpu["vendor"] == info["vendor_id"]
    assert cpu["family"] == int(info["cpu family"]) and cpu["model"] == int(info["model"])
    assert set(cpu["flags"]) == set(info["flags"].split())
    for flag, present in cpu["key_flags"].items():
        assert present == (flag in info["flags"].split()), flag
    # Topology multiplies out to the logical count the OS reports.
    assert cpu["sockets"] * cpu["cores_per_socket"] * cpu["threads_per_core"] == os.cpu_count()
    # Cache sizes as sysfs spells them (e.g. "48K").
    index0 = Path("/sys/devices/system/cpu/cpu0/cache/index0")
    if index0.exists():
        size = index0.joinpath("size").read_text().strip()
        assert size.endswith("K")
        assert cpu["caches"][0]["size_bytes"] == int(size[:-1]) * 1024
        assert cpu["caches"][0]["level"] == int(index0.joinpath("level").read_text())


def test_real_memory_and_os():
    memory = capture_memory()
    assert memory["total_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < memory["available_bytes"] <= memory["total_bytes"]
    system = capture_os()
    assert system["kernel"] == os.uname().release
    assert system["system"] == "Linux"


# --- GPU: NVML --------------------------------------------------------------------


def _nvml_loads() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_nvml_loads(), reason="this host has an NVIDIA driver")
def test_no_driver_is_described_not_raised():
    gpu = capture_gpu()  # the real pynvml: nvmlInit fails (no libnvidia-ml.so here)
    assert gpu["driver"] is None and gpu["gpus"] == []
    assert gpu["note"].startswith("no NVIDIA driver: ")
    assert "LibraryNotFound" in gpu["note"] or "DriverNotLoaded" in gpu["note"]
    host = capture_host()  # and the rest of the fingerprint still comes out
    assert host["gpu"]["driver"] is None and host["cpu"]["logical_cores"] == os.cpu_count()
    json.dumps(host)  # JSON-able as recorded in results


def _fake_nvml(init_error: int | None = None) -> types.ModuleType:
    """A stand-in for pynvml with two GPUs, using pynvml's real error classes and constants.

    GPU 0 (a V100-like board) has no MIG (NotSupported), 6 NVLink links and a serial it
    refuses to give (NoPermission). GPU 1 (PCIe A100-like) hides power limits and PCIe
    data (NotSupported, as in some VMs), has no NVLink, and MIG enabled.
    """
    nvml = types.ModuleType("fake_pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_")):
            setattr(nvml, name, getattr(pynvml, name))
    not_supported = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    calls = {"shutdown": 0}

    def fails(code):
        def raiser(*_):
            raise pynvml.NVMLError(code)
        return raiser

    def per_gpu(v0, v1):
        def get(handle, *_):
            value = (v0, v1)[handle]
            if isinstance(value, Exception):
                raise value
            return value
        return get

    def nvlink_state(handle, link):
        if handle == 0 and link < 6:
            return pynvml.NVML_FEATURE_ENABLED
        raise not_supported

    def max_clock(handle, kind):
        if handle != 0:
            raise not_supported
        return {pynvml.NVML_CLOCK_GRAPHICS: 1530, pynvml.NVML_CLOCK_SM: 1530, pynvml.NVML_CLOCK_MEM: 877}[kind]

    def shutdown():
        calls["shutdown"] += 1

    nvml.calls = calls
    nvml.nvmlInit = fails(init_error) if init_error is not None else (lambda: None)
    nvml.nvmlShutdown = shutdown
    nvml.nvmlSystemGetDriverVersion = lambda: "535.183.01"
    nvml.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12020
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 12020
    nvml.nvmlSystemGetNVMLVersion = lambda: "12.535.183.01"
    nvml.nvmlDeviceGetCount = lambda: 2
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i
    nvml.nvmlDeviceGetName = per_gpu(b"Tesla V100-SXM2-16GB", "NVIDIA A100 80GB PCIe")
    nvml.nvmlDeviceGetUUID = per_gpu("GPU-aaaa", "GPU-bbbb")
    nvml.nvmlDeviceGetSerial = per_gpu(pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION), "1324")
    nvml.nvmlDeviceGetBoardPartNumber = per_gpu(not_supported, not_supported)
    nvml.nvmlDeviceGetVbiosVersion = per_gpu("88.00.4F.00.09", "92.00.25.00.08")
    nvml.nvmlDeviceGetPciInfo = per_gpu(types.SimpleNamespace(busId=b"00000000:00:1E.0"), not_supported)
    nvml.nvmlDeviceGetMemoryInfo = per_gpu(types.SimpleNamespace(total=16945512448), types.SimpleNamespace(total=85899345920))
    nvml.nvmlDeviceGetPowerManagementLimit = per_gpu(300000, not_supported)
    nvml.nvmlDeviceGetPowerManagementDefaultLimit = per_gpu(300000, not_supported)
    nvml.nvmlDeviceGetPowerManagementLimitConstraints = per_gpu([150000, 300000], not_supported)
    nvml.nvmlDeviceGetMaxClockInfo = max_clock
    nvml.nvmlDeviceGetMaxPcieLinkGeneration = per_gpu(3, not_supported)
    nvml.nvmlDeviceGetMaxPcieLinkWidth = per_gpu(16, not_supported)
    nvml.nvmlDeviceGetCurrPcieLinkGeneration = per_gpu(3, not_supported)
    nvml.nvmlDeviceGetCurrPcieLinkWidth = per_gpu(16, not_supported)
    nvml.nvmlDeviceGetNvLinkState = nvlink_state
    nvml.nvmlDeviceGetMigMode = per_gpu(not_supported, [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE])
    nvml.nvmlDeviceGetEccMode = per_gpu([1, 1], [0, 1])
    nvml.nvmlDeviceGetCudaComputeCapability = per_gpu((7, 0), (8, 0))
    return nvml


def test_unsupported_fields_are_null_not_errors():
    nvml = _fake_nvml()
    gpu = capture_gpu(nvml)
    assert (gpu["driver"], gpu["cuda_driver"]) == ("535.183.01", "12.2")
    v100, a100 = gpu["gpus"]
    assert v100["name"] == "Tesla V100-SXM2-16GB"  # bytes decoded
    assert v100["serial"] is None and v100["unreadable"] == {"serial": "NoPermission"}
    assert v100["board_part_number"] is None  # NotSupported: null, and not listed as unreadable
    assert v100["power_limit_w"] == 300 and v100["power_limit_min_w"] == 150
    assert v100["max_clocks_mhz"] == {"graphics": 1530, "sm": 1530, "memory": 877}
    assert v100["pcie"]["max_generation"] == 3 and v100["pci_bus_id"] == "00000000:00:1E.0"
    assert v100["nvlink"] == {"supported": True, "links": 6, "active_links": 6}
    assert v100["mig"] == {"enabled": None, "pending": None}
    assert v100["ecc"] == {"enabled": True, "pending": True}
    assert v100["compute_capability"] == "7.0"

    assert a100["power_limit_w"] is None and a100["power_limit_max_w"] is None
    assert a100["max_clocks_mhz"] == {"graphics": None, "sm": None, "memory": None}
    assert a100["pcie"] == dict.fromkeys(["max_generation", "max_width", "current_generation", "current_width"])
    assert a100["nvlink"]["supported"] is False
    assert a100["mig"]["enabled"] is True and a100["ecc"]["enabled"] is False
    assert a100["memory_total_bytes"] == 80 * 1024**3 and a100["unreadable"] == {}
    assert nvml.calls["shutdown"] == 1
    json.dumps(gpu)


def test_driver_not_loaded_is_a_note():
    nvml = _fake_nvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    gpu = capture_gpu(nvml)
    assert gpu["driver"] is None and gpu["gpus"] == []
    assert gpu["note"].startswith("no NVIDIA driver: DriverNotLoaded")


# --- MLPerf system description ---------------------------------------------------------

# The field names as MLPerf publishes them (training; inference adds three).
MLPERF_TRAINING = (
    "submitter division status system_name number_of_nodes host_processors_per_node "
    "host_processor_model_name host_processor_core_count host_processor_vcpu_count "
    "host_processor_frequency host_processor_caches host_processor_interconnect "
    "host_memory_capacity host_storage_type host_storage_capacity host_networking "
    "host_networking_topology host_memory_configuration accelerators_per_node "
    "accelerator_model_name accelerator_host_interconnect accelerator_frequency "
    "accelerator_on-chip_memories accelerator_memory_configuration accelerator_memory_capacity "
    "accelerator_interconnect accelerator_interconnect_topology cooling hw_notes framework "
    "other_software_stack operating_system sw_notes"
).split()


def test_mlperf_fields_filled_from_a_recorded_8_gpu_host():
    fp = load_fingerprint(RECORDED / "p3.16xlarge-8xV100.json")
    fp["image"] = {"python": "3.10.12", "torch": {"version": "2.3.1", "cuda": "12.1", "cudnn": 8902},
                   "tensorflow": None, "mxnet": None, "onnxruntime": {"version": "1.18.0"}, "tensorrt": None}
    training = system_description(fp, "training")
    assert list(training) == MLPERF_TRAINING == TRAINING_FIELDS
    inference = system_description(fp, "inference")
    assert list(inference) == INFERENCE_FIELDS
    assert set(inference) - set(training) == {"system_type", "host_network_card_count",
                                              "host_networking_card_count", "system_type_detail"}
    assert all(isinstance(v, str) for v in inference.values())
    assert training["accelerators_per_node"] == "8"
    assert training["accelerator_model_name"] == "Tesla V100-SXM2-16GB"
    assert training["accelerator_memory_capacity"] == "15.8 GiB"
    assert training["accelerator_host_interconnect"] == "PCIe Gen3 x16"
    assert training["host_processor_vcpu_count"] == "64" and training["host_processors_per_node"] == "2"
    assert training["framework"] == "PyTorch 2.3.1"
    assert "CUDA 12.1" in training["other_software_stack"] and "driver 535.183.01" in training["other_software_stack"]
    assert training["operating_system"].startswith("Ubuntu 22.04.5 LTS")


# --- Docker engine -------------------------------------------------------------------


def test_unreachable_engine_is_recorded_not_raised(tmp_path, monkeypatch):
    import docker

    from runner.engine.docker_api import DockerApiEngine
    from runner.engine.kinds import ENGINES

    socket = f"unix://{tmp_path}/no-such.sock"
    # An engine reached while it answered, which has since gone away...
    gone = DockerApiEngine(ENGINES["docker"], docker.DockerClient(base_url=socket, version="1.41", timeout=2))
    # ...and no engine at all, with DOCKER_HOST pointing nowhere.
    monkeypatch.setenv("DOCKER_HOST", socket)
    for section in (capture_docker(gone), capture_docker(None)):
        assert section["version"] is None and section["nvidia_runtime"] is None
        assert section["note"].startswith("Docker engine unreachable")


@pytest.mark.docker
def test_engine_version_and_runtimes(engine):
    section = capture_docker(engine)
    assert section["version"] == engine.client.version()["Version"]
    runtimes = engine.client.info().get("Runtimes") or {}
    assert section["runtimes"] == sorted(runtimes)
    assert section["nvidia_runtime"] is ("nvidia" in runtimes)


# --- software inside an image ----------------------------------------------------------


def test_probe_reports_the_frameworks_this_python_has():
    """The probe script itself, run by this interpreter (which has torch and onnxruntime)."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True)
    found = parse_probe_output(done.stdout)
    assert found["python"] == ".".join(map(str, sys.version_info[:3]))
    assert found["torch"]["version"] == torch.__version__
    assert found["torch"]["cuda"] == torch.version.cuda
    assert found["torch"]["mkldnn"] == torch.backends.mkldnn.is_available()
    assert found["onnxruntime"]["version"] == ort.__version__
    assert "CPUExecutionProvider" in found["onnxruntime"]["providers"]


SYSTEM_PYTHON = "/usr/bin/python3.11"
PROBE_IMAGE = "runner-test/fingerprint-probe:py311"
SKIP_DIRS = {"test", "idlelib", "tkinter", "ensurepip", "lib2to3", "pydoc_data", "turtledemo", "__pycache__",
             "dist-packages", "site-packages"}


def _minimal_python_image(client) -> str:
    """A FROM-scratch image holding Debian's python3.11, its libraries and stdlib, nothing else.

    No registry is reachable here, so the image is assembled from the host's own files.
    """
    import docker.errors

    try:
        return client.images.get(PROBE_IMAGE).id
    except docker.errors.ImageNotFound:
        pass  # first run on this engine: build it below
    ldd = subprocess.run(["ldd", SYSTEM_PYTHON], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"(/\S+\.so[.\d]*)", ldd)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dockerfile = b"FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/bin\n"
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(SYSTEM_PYTHON, "rootfs/usr/bin/python3")
        for lib in libs:
            tar.add(os.path.realpath(lib), "rootfs" + lib)
        stdlib = "/usr/lib/python3.11"
        tar.add(stdlib, "rootfs" + stdlib, filter=lambda t: None if Path(t.name).name in SKIP_DIRS else t)
    buf.seek(0)
    image, _ = client.images.build(fileobj=buf, custom_context=True, tag=PROBE_IMAGE, rm=True,
                                   labels={"runner.test": "fingerprint-probe"})
    return image.id


@pytest.mark.docker
@pytest.mark.skipif(not (Path(SYSTEM_PYTHON).exists() and shutil.which("ldd")), reason="needs Debian's python3.11")
def test_capture_image_runs_the_probe_in_a_real_container(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))  # no answer kept from an earlier probe
    image_id = _minimal_python_image(engine.client)
    found = capture_image(engine, PROBE_IMAGE)
    expected = subprocess.run([SYSTEM_PYTHON, "-c", "import platform; print(platform.python_version())"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert found["python"] == expected
    assert found["id"] == image_id and found["ref"] == PROBE_IMAGE
    # A bare stdlib image: every framework absent, reported as null.
    assert all(found[k] is None for k in ("torch", "tensorflow", "mxnet", "onnxruntime", "tensorrt", "numpy"))
    # Only this image's probes: a runner killed elsewhere in the suite may leave its own
    # (labelled as owned, so its next run's orphan sweep removes them).
    leftovers = engine.client.containers.list(all=True, filters={"label": "runner.role=fingerprint-probe",
                                                          "ancestor": image_id})
    assert leftovers == []
    # The answer is kept per image id: the next capture reads it instead of probing again.
    (kept,) = (tmp_path / "image-software").iterdir()
    assert kept.name == image_id.removeprefix("sha256:") + ".json"
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "python": "kept"}))
    assert capture_image(engine, image_id)["python"] == "kept"


@pytest.mark.docker
def test_image_without_python_is_a_user_error(engine):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY hello.txt /\n"), ("hello.txt", b"hi\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    image, _ = engine.client.images.build(fileobj=buf, custom_context=True, rm=True,
                                          labels={"runner.test": "no-python"})
    try:
        with pytest.raises(UserError, match="python3"):
            capture_image(engine, image.id)
        with pytest.raises(UserError, match="no image"):
            capture_image(engine, "runner-test/does-not-exist:0")
    finally:
        engine.client.images.remove(image.id, force=True)


# --- CLI ---------------------------------------------------------------------------


def test_cli_writes_json_that_loads_back_and_mlperf_fields(tmp_path):
    # -o/--out names a folder, as every --out does; the file in it is named by the format.
    out = tmp_path / "out"
    assert main(["fingerprint", "--format", "json", "-o", str(out)]) == 0
    fp = load_fingerprint(out / "fingerprint.json")
    assert fp["cpu"]["logical_cores"] == os.cpu_count()
    assert main(["fingerprint", "--format", "mlperf", "--mlperf-benchmark", "training", "--out", str(out)]) == 0
    desc = json.loads((out / "system_description.json").read_text())
    assert list(desc) == MLPERF_TRAINING
    assert desc["host_processor_vcpu_count"] == str(os.cpu_count())
    assert main(["fingerprint", "-o", str(out)]) == 0
    assert fp["cpu"]["model_name"] in (out / "fingerprint.txt").read_text()
    # Old scripts' --output FILE (the flag's name before -o/--out) still writes that file.
    old = tmp_path / "fp.json"
    assert main(["fingerprint", "--format", "json", "--output", str(old)]) == 0
    assert load_fingerprint(old)["cpu"]["logical_cores"] == os.cpu_count()
    assert main(["fingerprint", "-o", str(old)]) == 2  # a file is no folder: one line, nothing overwritten
    assert load_fingerprint(old)


def test_load_fingerprint_rejects_what_is_not_one(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(UserError, match="schema version"):
        load_fingerprint(bad)
    with pytest.raises(UserError, match="no fingerprint file"):
        load_fingerprint(tmp_path / "missing.json")
