"""ONNX export, done by the harness itself so the exported graph is known and hashed.

The framework's loader does the conversion (torch.onnx, tf2onnx, mx2onnx); this module
records what came out: the file's sha256, the opset written in it and the input/output
names the backends feed and read.
"""

from __future__ import annotations

import time
from pathlib import Path

from .digest import sha256_file
from .errors import HarnessError


def _unknown_operators(model) -> list[str]:
    """Default-domain nodes ONNX does not define: tf2onnx, for one, only logs an operator it
    cannot convert and leaves the TensorFlow op in the graph."""
    import onnx  # lazy: optional (onnx: only in images that export to ONNX)

    return sorted({n.op_type for n in model.graph.node
                   if n.domain in ("", "ai.onnx") and not onnx.defs.has(n.op_type)})


def _read_graph(path: Path, framework: str, opset: int) -> tuple[int | None, str | None, str | None]:
    """(default-domain opset, input name, output name), when the ``onnx`` package is present."""
    try:
        import onnx  # lazy: optional (onnx: only in images that export to ONNX)
    except ImportError:
        return None, None, None
    model = onnx.load(str(path), load_external_data=False)
    unknown = _unknown_operators(model)
    if unknown:
        raise HarnessError(
            f"{framework} ONNX export at opset {opset} failed: operator {', '.join(unknown)} is not supported "
            "(the exporter left it unconverted)", exit_code=1,
        )
    graph_opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    outputs = [o.name for o in model.graph.output]
    return graph_opset, (inputs or [None])[0], (outputs or [None])[0]


def export_onnx(loaded, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
    """Export ``loaded`` (a ``LoadedModel``) for one item of ``input_shape`` (``1 x C x H x W``)."""
    start = time.perf_counter()
    details = loaded.export_onnx(tuple(input_shape), path, opset)
    if not path.is_file():
        raise HarnessError(f"the {loaded.framework} ONNX export wrote no file at {path}", exit_code=1)
    opset_in_file, input_name, output_name = _read_graph(path, loaded.framework, opset)
    return {
        "file": path.name,
        "sha256": sha256_file(path),
        "opset": opset,
        "opset_in_file": opset_in_file,
        "framework": loaded.framework,
        "framework_version": loaded.version,
        "input": {"name": input_name or details.get("input_name"), "shape": list(input_shape), "dtype": "float32"},
        "output": output_name or details.get("output_name"),
        "seconds": round(time.perf_counter() - start, 3),
        **{k: v for k, v in details.items() if k not in ("input_name", "output_name")},
    }
