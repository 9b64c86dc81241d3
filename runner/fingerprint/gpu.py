"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Two rules: a host without a driver is described, not refused (``driver: null`` and a
note saying why), and a field a GPU or driver cannot report is ``null``, never an error:
older boards lack MIG, GeForce boards hide the serial, VMs hide PCIe and power data.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

GIB = 1024**3


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _cuda_version(encoded: int | None) -> str | None:
    """NVML encodes CUDA 12.4 as 12040."""
    if encoded is None:
        return None
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


class _Reader:
    """Calls NVML, turning an unsupported or unreadable field into ``None``.

    NotSupported is the normal answer for a field a board lacks, so it is silent; any
    other NVML error (NoPermission, GpuIsLost, ...) is also ``None`` but is listed under
    ``unreadable`` so a reader knows the value was not merely absent.
    """

    def __init__(self, nvml: ModuleType):
        self.nvml = nvml
        self.unreadable: dict[str, str] = {}

    def __call__(self, field: str, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError as err:
            if not isinstance(err, self.nvml.NVMLError_NotSupported):
                self.unreadable[field] = type(err).__name__.removeprefix("NVMLError_")
            return None


def _pair(value: Any, index: int) -> Any:
    return None if value is None else value[index]


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def _nvlink(nvml: ModuleType, handle: Any) -> dict:
    """Active NVLink links. NotSupported on the first link means the board has none."""
    states = []
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            states.append(nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED)
        except nvml.NVMLError:
            break  # past the last link, or no NVLink at all
    if not states:
        return {"supported": False, "links": 0, "active_links": 0}
    return {"supported": True, "links": len(states), "active_links": sum(states)}


def _device(nvml: ModuleType, index: int) -> dict:
    read = _Reader(nvml)
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = read("memory", nvml.nvmlDeviceGetMemoryInfo, handle)
    power_range = read("power_limit_range", nvml.nvmlDeviceGetPowerManagementLimitConstraints, handle)
    capability = read("compute_capability", nvml.nvmlDeviceGetCudaComputeCapability, handle)
    mig = read("mig", nvml.nvmlDeviceGetMigMode, handle)
    ecc = read("ecc", nvml.nvmlDeviceGetEccMode, handle)
    pci = read("pci", nvml.nvmlDeviceGetPciInfo, handle)
    enabled = nvml.NVML_FEATURE_ENABLED

    def on(mode: int | None) -> bool | None:
        return None if mode is None else mode == enabled

    return {
        "index": index,
        "name": _text(read("name", nvml.nvmlDeviceGetName, handle)),
        "uuid": _text(read("uuid", nvml.nvmlDeviceGetUUID, handle)),
        "serial": _text(read("serial", nvml.nvmlDeviceGetSerial, handle)),
        "board_part_number": _text(read("board_part_number", nvml.nvmlDeviceGetBoardPartNumber, handle)),
        "vbios": _text(read("vbios", nvml.nvmlDeviceGetVbiosVersion, handle)),
        "pci_bus_id": _text(getattr(pci, "busId", None)),
        "memory_total_bytes": getattr(memory, "total", None),
        "power_limit_w": _watts(read("power_limit", nvml.nvmlDeviceGetPowerManagementLimit, handle)),
        "power_limit_default_w": _watts(
            read("power_limit_default", nvml.nvmlDeviceGetPowerManagementDefaultLimit, handle)
        ),
        "power_limit_min_w": _watts(_pair(power_range, 0)),
        "power_limit_max_w": _watts(_pair(power_range, 1)),
        "max_clocks_mhz": {
            "graphics": read("max_clock_graphics", nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_GRAPHICS),
            "sm": read("max_clock_sm", nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_SM),
            "memory": read("max_clock_memory", nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_MEM),
        },
        "pcie": {
            "max_generation": read("pcie_max_generation", nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            "max_width": read("pcie_max_width", nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
            "current_generation": read("pcie_current_generation", nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            "current_width": read("pcie_current_width", nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        },
        "nvlink": _nvlink(nvml, handle),
        "mig": {"enabled": on(_pair(mig, 0)), "pending": on(_pair(mig, 1))},
        "ecc": {"enabled": on(_pair(ecc, 0)), "pending": on(_pair(ecc, 1))},
        "compute_capability": None if capability is None else f"{capability[0]}.{capability[1]}",
        "unreadable": read.unreadable,
    }


def _no_driver(reason: str) -> dict:
    return {"driver": None, "cuda_driver": None, "nvml": None, "gpus": [], "note": f"no NVIDIA driver: {reason}"}


def capture_gpu(nvml: ModuleType | None = None) -> dict:
    """Every GPU NVML sees. ``nvml`` is the ``pynvml`` module (tests pass a stand-in)."""
    if nvml is None:
        try:
            import pynvml  # lazy: optional (pynvml: no package or no driver, no GPU)
        except ImportError:
            return _no_driver("the nvidia-ml-py package is not installed (pip install nvidia-ml-py)")
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        # LibraryNotFound (no libnvidia-ml.so), DriverNotLoaded, NoPermission, ...
        return _no_driver(f"{type(err).__name__.removeprefix('NVMLError_')}: {err}")
    try:
        read = _Reader(nvml)
        cuda = read("cuda_driver", nvml.nvmlSystemGetCudaDriverVersion_v2)
        if cuda is None:
            cuda = read("cuda_driver", nvml.nvmlSystemGetCudaDriverVersion)
        count = read("count", nvml.nvmlDeviceGetCount) or 0
        return {
            "driver": _text(read("driver", nvml.nvmlSystemGetDriverVersion)),
            "cuda_driver": _cuda_version(cuda),
            "nvml": _text(read("nvml", nvml.nvmlSystemGetNVMLVersion)),
            "gpus": [_device(nvml, i) for i in range(count)],
            "note": None if count else "NVIDIA driver loaded but no GPU visible",
            "unreadable": read.unreadable,
        }
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
