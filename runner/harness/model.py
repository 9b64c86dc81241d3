"""Rebuild the entry's trained model with the loader of its framework.

The manifest names the framework; the host passes it as ``--framework``. Each loader
(``frameworks/<name>.py``) reads that framework's own saved model and returns a
``LoadedModel``: one interface for the evaluator (batched predictions), the native
backends (the framework's own model) and the ONNX export. Framework packages are
imported only inside the loader that needs them, so the harness runs in an image that
has only one of them.
"""

from __future__ import annotations

from pathlib import Path

from .frameworks import LoadedModel, loader_for


def load_model(entry_dir: Path, builder: str, weights: Path, framework: str = "pytorch") -> LoadedModel:
    return loader_for(framework).load(entry_dir, builder, weights)


__all__ = ["LoadedModel", "load_model"]
