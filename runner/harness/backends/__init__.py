"""The backend registry: a backend's name -> the module and class that implement it.

Adding a backend is one module in this package plus one line here. Modules are imported
only when their backend is asked for, so a missing optional package (tensorrt) fails
only the backend that needs it.
"""

from __future__ import annotations

import importlib

from ..errors import HarnessError
from .base import Backend, ModelFiles

REGISTRY: dict[str, tuple[str, str]] = {
    "torch": ("torch_eager", "TorchEager"),
    "onnxruntime": ("onnxruntime_backend", "OnnxRuntimeBackend"),
    "onnxruntime-cuda": ("onnxruntime_backend", "OnnxRuntimeCuda"),
    "onnxruntime-tensorrt": ("onnxruntime_backend", "OnnxRuntimeTensorRT"),
    "tensorrt": ("tensorrt_backend", "TensorRTBackend"),
}


def backend_class(name: str) -> type[Backend]:
    try:
        module, cls = REGISTRY[name]
    except KeyError:
        raise HarnessError(f"unknown backend '{name}'; known: {', '.join(REGISTRY)}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


__all__ = ["REGISTRY", "Backend", "ModelFiles", "backend_class"]
