"""ONNX export, done by the harness itself so the exported graph is known and hashed."""

from __future__ import annotations

import time
from pathlib import Path

from .digest import sha256_file
from .errors import HarnessError

INPUT_NAME = "input"
OUTPUT_NAME = "scores"


def _file_opset(path: Path) -> int | None:
    """The default-domain opset written in the file, when the ``onnx`` package is present."""
    try:
        import onnx
    except ImportError:
        return None
    model = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def export_onnx(model, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
    """Export ``model`` for one item of ``input_shape`` (``1 x C x H x W``, fixed batch 1).

    The TorchScript-based exporter (``dynamo=False``) needs no extra package and gives a
    static graph that every backend accepts.
    """
    import torch

    dummy = torch.zeros(input_shape, dtype=torch.float32)
    start = time.perf_counter()
    try:
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(
                model, (dummy,), str(path), opset_version=opset, dynamo=False,
                input_names=[INPUT_NAME], output_names=[OUTPUT_NAME], do_constant_folding=True,
            )
    except Exception as exc:
        raise HarnessError(f"ONNX export at opset {opset} failed: {exc}", exit_code=1) from None
    return {
        "file": path.name,
        "sha256": sha256_file(path),
        "opset": opset,
        "opset_in_file": _file_opset(path),
        "exporter": "torch.onnx.export (TorchScript, dynamo=False)",
        "torch_version": torch.__version__,
        "input": {"name": INPUT_NAME, "shape": list(input_shape), "dtype": "float32"},
        "output": OUTPUT_NAME,
        "seconds": round(time.perf_counter() - start, 3),
    }
