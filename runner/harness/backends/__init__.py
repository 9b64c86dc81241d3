"""The backend table: every inference backend's name, the module and class that implement
it, whether it needs an NVIDIA GPU, and the packages it imports. The native backends
(torch, tensorflow, mxnet) run their own framework's model; the ONNX ones run the
harness' ONNX export of any framework's model.

This is the one list of backends: the manifest's schema, the host's GPU preflight, the
smoke runs' CPU choice, the question tasks' backends and the benchmarks derive theirs from
it. A native backend's ``framework`` is the one place a backend meets the framework
registry (``runner/frameworks/``), which derives each framework's native backends from it. Adding a backend is one
module in this package plus one row here. Modules are imported only when their backend is
asked for, so a missing optional package (tensorrt) fails only the backend that needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import HarnessError
from .base import Backend, ModelFiles


@dataclass(frozen=True)
class BackendSpec:
    module: str
    cls: str
    needs_gpu: bool
    imports: tuple[str, ...]
    # The framework whose own model it runs (declared in runner/frameworks/<name>/, which
    # refuses a row naming an undeclared one); None: any, via ONNX.
    framework: str | None = None
    # It times question answering (a question task's texts to answers, one at a time): an ONNX
    # export of a text model needs its tokeniser outside the graph and dynamic sequence
    # lengths, which the ONNX backends here do not handle yet.
    questions: bool = False


REGISTRY: dict[str, BackendSpec] = {
    "torch": BackendSpec("torch_eager", "TorchEager", False, ("torch",), "pytorch", questions=True),
    "torch-cuda": BackendSpec("torch_cuda", "TorchCuda", True, ("torch",), "pytorch"),
    "tensorflow": BackendSpec("tensorflow_backend", "TensorFlowBackend", False, ("tensorflow",), "tensorflow"),
    "mxnet": BackendSpec("mxnet_backend", "MXNetBackend", False, ("mxnet",), "mxnet"),
    "onnxruntime": BackendSpec("onnxruntime_backend", "OnnxRuntimeBackend", False, ("onnxruntime", "onnx")),
    "onnxruntime-cuda": BackendSpec("onnxruntime_backend", "OnnxRuntimeCuda", True, ("onnxruntime", "onnx")),
    "onnxruntime-tensorrt": BackendSpec("onnxruntime_backend", "OnnxRuntimeTensorRT", True, ("onnxruntime", "onnx", "tensorrt")),
    "tensorrt": BackendSpec("tensorrt_backend", "TensorRTBackend", True, ("tensorrt", "onnx")),
}
GPU_BACKENDS = frozenset(name for name, spec in REGISTRY.items() if spec.needs_gpu)
CPU_BACKENDS = tuple(name for name, spec in REGISTRY.items() if not spec.needs_gpu)
QUESTION_BACKENDS = tuple(name for name, spec in REGISTRY.items() if spec.questions)


def backends_for(framework: str) -> tuple[str, ...]:
    """The backends that can run a model of ``framework``: its native one and the ONNX ones."""
    return tuple(name for name, spec in REGISTRY.items() if spec.framework in (None, framework))


def check_framework(name: str, files: ModelFiles) -> None:
    """A native backend runs only its own framework's models: say so before any work."""
    own = REGISTRY[name].framework
    framework = files.model.framework
    if own is not None and framework != own:
        raise HarnessError(
            f"the {name} backend runs {own} models, but this entry's framework is {framework}; "
            f"choose from {', '.join(backends_for(framework))} in inference.backends"
        )


def backend_class(name: str) -> type[Backend]:
    try:
        spec = REGISTRY[name]
    except KeyError:
        raise HarnessError(f"unknown backend '{name}'; known: {', '.join(REGISTRY)}") from None
    return getattr(importlib.import_module(f"{__name__}.{spec.module}"), spec.cls)


__all__ = ["backends_for", "check_framework", "CPU_BACKENDS", "GPU_BACKENDS", "QUESTION_BACKENDS", "REGISTRY", "Backend", "BackendSpec", "ModelFiles", "backend_class"]
