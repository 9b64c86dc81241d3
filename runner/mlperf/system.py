"""MLPerf system description fields (training and inference), filled from a fingerprint.

Fields the fingerprint cannot know (submitter, storage, cooling, networking) are empty
strings in ``system_description``; ``submission_description`` fills them from the user's
``runner config`` settings and names every one still missing. Nothing is guessed: a host
with no GPU gets ``N/A`` accelerator fields because the fingerprint shows there are none.
MLPerf's descriptions are strings throughout.
"""

from __future__ import annotations

from runner.frameworks import FRAMEWORKS

TRAINING_FIELDS = [
    "submitter", "division", "status", "system_name", "number_of_nodes",
    "host_processors_per_node", "host_processor_model_name", "host_processor_core_count",
    "host_processor_vcpu_count", "host_processor_frequency", "host_processor_caches",
    "host_processor_interconnect", "host_memory_capacity", "host_storage_type",
    "host_storage_capacity", "host_networking", "host_networking_topology",
    "host_memory_configuration", "accelerators_per_node", "accelerator_model_name",
    "accelerator_host_interconnect", "accelerator_frequency", "accelerator_on-chip_memories",
    "accelerator_memory_configuration", "accelerator_memory_capacity",
    "accelerator_interconnect", "accelerator_interconnect_topology", "cooling", "hw_notes",
    "framework", "other_software_stack", "operating_system", "sw_notes",
]
# The inference checker has used both spellings of the network card count across versions.
INFERENCE_EXTRA_FIELDS = ["system_type", "host_network_card_count", "host_networking_card_count", "system_type_detail"]
INFERENCE_FIELDS = TRAINING_FIELDS + INFERENCE_EXTRA_FIELDS


def _str(value: object) -> str:
    return "" if value is None else str(value)


def _gib(n: int | None) -> str:
    return "" if not n else f"{n / 1024**3:.1f} GiB"


def _size(n: int) -> str:
    return f"{n // 1024**2} MiB" if n >= 1024**2 else f"{n // 1024} KiB"


def _caches(cpu: dict) -> str:
    parts = []
    for cache in cpu.get("caches") or []:
        if not cache.get("size_bytes"):
            continue
        kind = {"Data": "d", "Instruction": "i"}.get(cache.get("type"), "")
        parts.append(f"L{cache['level']}{kind} {_size(cache['size_bytes'])}")
    return ", ".join(parts)


def _framework(image: dict | None) -> tuple[str, list[str]]:
    """('PyTorch 2.3.0', ['CUDA 12.1', ...]) from an image probe, if one was recorded."""
    if not image:
        return "", []
    others = [f"Python {image['python']}"] if image.get("python") else []
    present = [framework for framework in FRAMEWORKS.values() if image.get(framework.module)]
    frameworks = [f"{framework.label} {image[framework.module]['version']}" for framework in present]
    for framework in FRAMEWORKS.values():  # only the probes that ask for CUDA (torch, tensorflow) find it
        info = image.get(framework.module) or {}
        if info.get("cuda"):
            others.append(f"CUDA {info['cuda']}")
        if info.get("cudnn"):
            others.append(f"cuDNN {info['cudnn']}")
    if image.get("onnxruntime"):
        others.append(f"ONNX Runtime {image['onnxruntime']['version']}")
    if image.get("tensorrt"):
        others.append(f"TensorRT {image['tensorrt']['version']}")
    return ", ".join(frameworks), others


def _software(fingerprint: dict) -> dict[str, str]:
    """The framework and the rest of the software stack: the image's, the driver, the engine."""
    framework, others = _framework(fingerprint.get("image"))
    gpu = fingerprint.get("gpu") or {}
    if gpu.get("driver"):
        others.append(f"NVIDIA driver {gpu['driver']} (CUDA driver {gpu.get('cuda_driver')})")
    docker = fingerprint.get("docker") or {}
    if docker.get("version"):
        others.append(f"Docker {docker['version']}")
    osinfo = fingerprint.get("os") or {}
    kernel = f"kernel {osinfo['kernel']}" if osinfo.get("kernel") else None
    return {
        "framework": framework,
        "other_software_stack": ", ".join(others),
        "operating_system": " ".join(filter(None, [osinfo.get("distro"), kernel])),
        "sw_notes": f"captured by runner at {fingerprint.get('captured_at', '')}",
    }


def _host(fingerprint: dict, gpus: list[dict]) -> dict[str, str]:
    """The system's name and its host: processors, memory; storage and networking are the user's."""
    cpu = fingerprint.get("cpu") or {}
    memory = fingerprint.get("memory") or {}
    host = fingerprint.get("host") or {}
    accel_name = (gpus[0].get("name") or "") if gpus else ""
    system_name = f"{host.get('hostname', '')} ({len(gpus)}x {accel_name})" if gpus else _str(host.get("hostname"))
    return {
        "system_name": system_name,
        "number_of_nodes": "1",
        "host_processors_per_node": _str(cpu.get("sockets")),
        "host_processor_model_name": _str(cpu.get("model_name")),
        "host_processor_core_count": _str(cpu.get("cores_per_socket")),
        "host_processor_vcpu_count": _str(cpu.get("logical_cores")),
        "host_processor_frequency": f"{cpu['mhz']:.0f} MHz" if cpu.get("mhz") else "",
        "host_processor_caches": _caches(cpu),
        "host_processor_interconnect": "",
        "host_memory_capacity": _gib(memory.get("total_bytes")),
        "host_storage_type": "",
        "host_storage_capacity": "",
        "host_networking": "",
        "host_networking_topology": "",
        "host_memory_configuration": "",
    }


def _accelerators(gpus: list[dict]) -> dict[str, str]:
    """The accelerator fields, from the first GPU (a host's GPUs are alike)."""
    first = gpus[0] if gpus else {}
    pcie = first.get("pcie") or {}
    nvlink = first.get("nvlink") or {}
    return {
        "accelerators_per_node": str(len(gpus)),
        "accelerator_model_name": first.get("name") or "",
        "accelerator_host_interconnect": (
            f"PCIe Gen{pcie['max_generation']} x{pcie['max_width']}"
            if pcie.get("max_generation") and pcie.get("max_width") else ""
        ),
        "accelerator_frequency": (
            f"{first['max_clocks_mhz']['sm']} MHz" if (first.get("max_clocks_mhz") or {}).get("sm") else ""
        ),
        "accelerator_on-chip_memories": "",
        "accelerator_memory_configuration": "",
        "accelerator_memory_capacity": _gib(first.get("memory_total_bytes")),
        "accelerator_interconnect": (
            f"NVLink ({nvlink['active_links']} active links per GPU)" if nvlink.get("active_links") else ""
        ),
        "accelerator_interconnect_topology": "",
    }


def _hw_notes(cpu: dict, gpus: list[dict]) -> str:
    """What a reader of the figures must know about the hardware: a virtual machine, MIG."""
    notes = []
    if cpu.get("hypervisor"):
        notes.append(f"virtual machine ({cpu['hypervisor']})")
    if any((g.get("mig") or {}).get("enabled") for g in gpus):
        notes.append("MIG enabled")
    return "; ".join(notes)


def _inference_only(cpu: dict) -> dict[str, str]:
    """The inference checker's extra fields."""
    return {
        "system_type": "",  # datacenter or edge is the submitter's choice, not the host's
        "host_network_card_count": "",
        "host_networking_card_count": "",
        "system_type_detail": f"virtual machine ({cpu['hypervisor']})" if cpu.get("hypervisor") else "",
    }


def system_description(fingerprint: dict, benchmark: str = "inference") -> dict[str, str]:
    """The MLPerf fields for ``benchmark`` ('training' or 'inference') in MLPerf's order."""
    if benchmark not in ("training", "inference"):
        raise ValueError("benchmark must be 'training' or 'inference'")
    cpu = fingerprint.get("cpu") or {}
    gpus = (fingerprint.get("gpu") or {}).get("gpus") or []
    fields = {
        "submitter": "", "division": "", "status": "", "cooling": "",  # the user's (submission_description)
        **_host(fingerprint, gpus),
        **_accelerators(gpus),
        "hw_notes": _hw_notes(cpu, gpus),
        **_software(fingerprint),
    }
    if benchmark == "inference":
        fields.update(_inference_only(cpu))
    order = TRAINING_FIELDS if benchmark == "training" else INFERENCE_FIELDS
    return {name: fields[name] for name in order}


# The inference submission checker's fields that must be non-empty (its
# SYSTEM_DESC_MEANINGFUL_RESPONSE_REQUIRED_FIELDS); training only needs every field present.
INFERENCE_NON_EMPTY = [
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_memory_configuration", "host_storage_capacity", "host_storage_type",
    "host_networking", "host_networking_card_count", "host_networking_topology", "accelerators_per_node",
    "accelerator_model_name", "accelerator_memory_capacity", "accelerator_host_interconnect",
    "accelerator_memory_configuration", "accelerator_interconnect", "cooling", "framework",
    "operating_system", "other_software_stack",
]
# Description field -> the ``runner config`` key (mlperf.<key>) that supplies it.
FIELD_SETTING = {
    "submitter": "org", "division": "division", "status": "status", "system_name": "platform",
    "system_type": "system_type", "host_storage_type": "host_storage_type",
    "host_storage_capacity": "host_storage_capacity", "host_networking": "host_networking",
    "host_networking_topology": "host_networking_topology",
    "host_network_card_count": "host_network_card_count",
    "host_networking_card_count": "host_network_card_count",
    "host_memory_configuration": "host_memory_configuration",
    "host_processor_interconnect": "host_processor_interconnect", "cooling": "cooling",
    "framework": "framework", "accelerator_memory_configuration": "accelerator_memory_configuration",
    "accelerator_interconnect_topology": "accelerator_interconnect_topology",
    "accelerator_on-chip_memories": "accelerator_on-chip_memories",
}
_ACCELERATOR_FIELDS = [
    "accelerator_model_name", "accelerator_host_interconnect", "accelerator_frequency",
    "accelerator_on-chip_memories", "accelerator_memory_configuration", "accelerator_memory_capacity",
    "accelerator_interconnect", "accelerator_interconnect_topology",
]
# The training log's submission_status -> each checker's status vocabulary.
_STATUS = {
    "training": {"onprem": "Available on-premise", "cloud": "Available cloud",
                 "research": "Research, Development, or Internal (RDI)", "preview": "Preview"},
    "inference": {"onprem": "available", "cloud": "available", "research": "rdi", "preview": "preview"},
}


def submission_description(fingerprint: dict, settings: dict[str, str], benchmark: str = "training",
                           framework_fallback: str = "") -> tuple[dict[str, str], list[str]]:
    """The description with the user's settings merged in, and the settings still missing.

    Returns ``(fields, missing)`` where ``missing`` lists the ``mlperf.<key>`` settings whose
    fields the ``benchmark``'s checker needs and that are still empty. ``framework_fallback``
    (e.g. the entry's recorded framework) is used when the fingerprint has no image probe.
    """
    fields = system_description(fingerprint, benchmark)
    gpu = fingerprint.get("gpu")
    if isinstance(gpu, dict) and not gpu.get("gpus"):
        # The probe ran and found no GPU: the accelerator fields are known to be "none".
        for name in _ACCELERATOR_FIELDS:
            fields[name] = "N/A"
    if not fields["framework"] and framework_fallback:
        fields["framework"] = framework_fallback
    for name, key in FIELD_SETTING.items():
        value = (settings.get(key) or "").strip()
        if name not in fields or not value:
            continue
        if name == "status":
            value = _STATUS[benchmark].get(value, value)
        fields[name] = value
    for name in ("hw_notes", "sw_notes"):
        extra = (settings.get(name) or "").strip()
        if extra:
            fields[name] = "; ".join(filter(None, [fields[name], extra]))
    needed = INFERENCE_NON_EMPTY if benchmark == "inference" else ["submitter", "division", "status", "system_name"]
    missing = []
    for name in needed:
        if not fields.get(name) and FIELD_SETTING.get(name) and f"mlperf.{FIELD_SETTING[name]}" not in missing:
            missing.append(f"mlperf.{FIELD_SETTING[name]}")
        elif not fields.get(name) and not FIELD_SETTING.get(name):
            missing.append(name)  # a host fact the fingerprint lacks (e.g. no CPU model recorded)
    return fields, missing
