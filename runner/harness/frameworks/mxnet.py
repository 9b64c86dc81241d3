"""MXNet 1.9 Gluon: the builder's ``HybridBlock`` with ``save_parameters`` weights.

A single ``.params`` file per checkpoint (the runner copies one file per request), loaded
into the block the builder returns, then hybridized (a cached static graph, as MXNet
serves models). ONNX export goes through MXNet's own exporter: the block is exported to
its symbol and parameters (``-symbol.json``, ``-0000.params``), then ``mx.onnx.export_model``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import HarnessError
from . import LoadedModel, export_failure, import_builder, require_file

def configure_threads(threads: int) -> None:
    # MXNet sizes its OpenMP pool from the environment when it is first imported.
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")


class GluonModel(LoadedModel):
    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        import mxnet as mx

        return self.native(mx.nd.array(images, dtype=np.float32)).asnumpy()

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        import mxnet as mx

        # MXNet 1.9's exporter takes no opset: it writes the installed onnx package's newest
        # and converts each operator with its newest converter at or below it. The opset in
        # the file is recorded (opset_in_file); the manifest's opset does not apply.
        with tempfile.TemporaryDirectory() as tmp:
            prefix = os.path.join(tmp, "model")
            self.native(mx.nd.zeros(input_shape))  # export needs a traced graph
            self.native.export(prefix, epoch=0)
            try:
                mx.onnx.export_model(
                    f"{prefix}-symbol.json", f"{prefix}-0000.params", in_shapes=[input_shape],
                    in_types=[np.float32], onnx_file_path=str(path),
                )
            except Exception as exc:
                raise export_failure("MXNet", _onnx_opset(), exc) from None
        _weights_as_constants(path)
        return {"exporter": "mxnet.onnx.export_model (opset: the onnx package's newest)",
                "mxnet_version": mx.__version__, "post_processing": "initializers removed from graph inputs"}


def _weights_as_constants(path: Path) -> None:
    """mx2onnx lists every weight as a graph input too, which keeps ONNX Runtime from
    folding constants (it warns per weight); the weights are fixed here, so drop them."""
    import onnx

    model = onnx.load(str(path))
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    onnx.save(model, str(path))


def _onnx_opset() -> int | None:
    try:
        from onnx.defs import onnx_opset_version
    except ImportError:
        return None
    return onnx_opset_version()


def load(entry_dir: Path, builder: str, weights: Path) -> GluonModel:
    import mxnet as mx

    build = import_builder(entry_dir, builder)
    digest = require_file(weights)
    net = build()
    if not isinstance(net, mx.gluon.HybridBlock):
        raise HarnessError(f"{builder} returned a {type(net).__name__}; MXNet entries build a gluon.HybridBlock")
    try:
        net.load_parameters(str(weights), ctx=mx.cpu())
    except Exception as exc:
        raise HarnessError(f"the weights {weights} do not fit the block {builder} builds: {exc}") from None
    net.hybridize(static_alloc=True, static_shape=True)
    return GluonModel("mxnet", mx.__version__, net, weights, digest, "NCHW")
