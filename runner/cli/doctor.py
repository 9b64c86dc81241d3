"""``runner doctor``: what this host has for building and running entries."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import paths
from runner.energy import NotMeasured, RaplEnergy
from runner.engine import EngineError, connect_engine, free_bytes
from runner.engine.gpus import HOOK_TOOLS, gpu_containers_possible
from runner.engine.kinds import current, implementation
from runner.errors import UserError
from runner.images.debootstrap import bootstrap_tool, tool_version
from runner.terminal import Column, compact_table

PING_TIMEOUT_S = 5


def _engine() -> tuple[str, str, dict, Path | None]:
    """(state, detail, the engine's facts as a fingerprint records them, its data root)."""
    kind = current()
    engine, why = None, None
    try:
        implementation(kind).check_host(kind)
        engine = connect_engine(PING_TIMEOUT_S)
        answers = engine.ping()
    except UserError as err:  # a malformed DOCKER_HOST: the user's to correct
        return "missing", f"{err.problem}: {err.fix}", {}, None
    except EngineError as err:
        answers, why = False, err
    if not answers or engine is None:  # (an engine that answered was made: the check narrows it)
        if engine is not None:
            engine.close()
        problem, fix = implementation(kind).unreachable(kind, why or EngineError("it did not answer a ping"))
        return "missing", f"{problem}: {fix}", {}, None
    try:
        version, facts, root, refusal = engine.version(), engine.facts(), engine.data_root(), engine.refusal()
    finally:
        engine.close()
    detail = (f"{kind.name}: {version.version} (API {version.api}), "
              f"root {root}, cgroup v{facts.get('cgroup_version') or '?'}")
    if facts.get("isolated") is False:  # the host engine: no image
        detail += f"; sandbox {facts.get('sandbox')}; its runs never count (the entry's image is not used)"
    if refusal:  # it answers, but cannot run an entry with the runner's guarantees
        return "missing", f"{detail}; runs are refused: {refusal}", facts, root
    return "ok", detail, facts, root


def _bootstrap_tool() -> tuple[str, str]:
    try:
        tool = bootstrap_tool()
    except UserError as err:
        return "missing", str(err)
    if tool is None:
        return "missing", "mmdebstrap or debootstrap, needed to build base images: `sudo runner setup`"
    name, path = tool
    return "ok", f"{name} {tool_version(name) or 'installed'} ({path})"


def _gpus() -> tuple[str, str]:
    try:
        import pynvml  # lazy: optional (pynvml: no package or no driver, no GPU)
    except ImportError:
        return "none", "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # no NVML or no driver: no GPU here
        return "none", f"NVML unavailable ({type(exc).__name__})"
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        driver = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    return ("ok" if count else "none"), f"{count} x {', '.join(map(str, names)) or '-'} (driver {driver})"


def _nvidia_runtime(facts: dict) -> tuple[str, str]:
    runtimes = list(facts.get("runtimes") or [])
    if "nvidia" in runtimes:
        return "ok", "nvidia runtime registered with the engine"
    binary = shutil.which("nvidia-container-runtime") or shutil.which("nvidia-ctk")
    return "absent", f"engine runtimes: {', '.join(runtimes) or '-'}" + (f"; {binary} found" if binary else "")


def _container_toolkit(facts: dict) -> tuple[str, str]:
    engine = facts.get("engine") or "docker"
    if engine not in ("docker", "podman"):  # an engine that binds the driver itself
        return (("ok", f"{engine} binds the host driver's libraries itself") if gpu_containers_possible({"docker": facts})
                else ("absent", "no NVIDIA driver libraries in the loader's cache (ldconfig -p)"))
    if gpu_containers_possible({"docker": {**facts, "nvidia_runtime": "nvidia" in (facts.get("runtimes") or [])}}):
        return "ok", "Docker's --gpus works (nvidia runtime registered, or its prestart hook installed)"
    return "absent", (f"neither the nvidia runtime nor {', '.join(HOOK_TOOLS)}: install nvidia-container-toolkit, "
                      "`nvidia-ctk runtime configure --runtime=docker`, restart Docker")


def gpu_host_checks(nvml=None) -> list[tuple[str, str, str]]:
    """What a run with GPUs needs from NVML beyond the GPUs themselves (docs/gpu.md), one row
    each: utilisation (the freeze's idle wait, class 2c), per-process samples and the process
    list (the idle wait and the sharing check), throttle reasons and MIG mode (sharing),
    the energy counter or power (energy)."""
    if nvml is None:
        try:
            import pynvml  # lazy: optional (pynvml: no package or no driver, no GPU)
        except ImportError:
            return [("GPU checks", "none", "nvidia-ml-py is not installed")]
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return [("GPU checks", "none", f"NVML unavailable ({type(exc).__name__}): no GPU run possible here")]
    rows = []
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        probes = [
            ("GPU utilisation (freeze idle wait)", "nvmlDeviceGetUtilizationRates", ()),
            ("GPU processes (sharing)", "nvmlDeviceGetComputeRunningProcesses", ()),
            ("GPU process utilisation (freeze idle wait)", "nvmlDeviceGetProcessUtilization", (0,)),
            ("GPU throttle reasons (sharing)", "nvmlDeviceGetCurrentClocksEventReasons", ()),
            ("GPU MIG mode (sharing)", "nvmlDeviceGetMigMode", ()),
            ("GPU energy counter (energy)", "nvmlDeviceGetTotalEnergyConsumption", ()),
            ("GPU power (energy fallback)", "nvmlDeviceGetPowerUsage", ()),
        ]
        for label, name, extra in probes:
            fn = getattr(nvml, name, None) or (getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
                                                if "Clocks" in name else None)
            failures = []
            for i, h in enumerate(handles):
                try:
                    if fn is None:  # an NVML without the call: absent, as a failed call is
                        raise TypeError(f"this NVML has no {name}")
                    fn(h, *extra)
                except nvml.NVMLError_NotFound:
                    pass  # no process samples yet: the call works
                except (nvml.NVMLError, TypeError) as exc:
                    failures.append(f"GPU {i}: {type(exc).__name__}")
            if not handles:
                rows.append((label, "none", "no GPU"))
            else:
                rows.append((label, "absent" if failures else "ok",
                             "; ".join(failures) if failures else f"readable on {len(handles)} GPU(s)"))
    finally:
        nvml.nvmlShutdown()
    return rows


def _rapl() -> tuple[str, str]:
    try:
        return "ok", RaplEnergy().method
    except NotMeasured as exc:
        return "absent", f"CPU energy not measured: {exc}"


def run(args) -> int:
    engine_state, engine_detail, facts, docker_root = _engine()
    home = paths.home()
    rows = [
        ("container engine", engine_state, engine_detail),
        ("base image tool", *_bootstrap_tool()),
        ("free disk (runner home)", "ok", f"{free_bytes(home) / 1024**3:.1f} GiB at {home}"),
    ]
    if docker_root and os.path.exists(docker_root):
        rows.append(("free disk (engine's images)", "ok", f"{free_bytes(docker_root) / 1024**3:.1f} GiB at {docker_root}"))
    rows += [
        ("GPUs", *_gpus()),
        ("NVIDIA container runtime", *_nvidia_runtime(facts)),
        ("NVIDIA Container Toolkit (--gpus)", *_container_toolkit(facts)),
        *gpu_host_checks(),
        ("CPU energy (RAPL)", *_rapl()),
        ("Python", "ok", f"{platform.python_version()} ({sys.executable})"),
        ("root", "yes" if os.geteuid() == 0 else "no", "root is needed to install or start the engine and to debootstrap"),
        ("host", "ok", f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs"),
    ]
    colours = {"ok": "green", "yes": "green", "missing": "red", "none": "yellow", "absent": "yellow", "no": "yellow"}
    Console().print(compact_table("runner doctor", [Column("check", wrap=True), Column("state"),
                                                    Column("detail", wrap=True)],
                                  [[check, f"[{colours.get(state, 'white')}]{state}[/]", escape(detail)]
                                   for check, state, detail in rows], hide_empty=False))
    return 0
