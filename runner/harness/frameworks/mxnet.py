"""MXNet 1.9 Gluon: the builder's ``HybridBlock`` with ``save_parameters`` weights.

A single ``.params`` file per checkpoint (the runner copies one file per request), loaded
into the block the builder returns, then hybridized (a cached static graph, as MXNet
serves models). ONNX export goes through MXNet's own exporter: the block is exported to
its symbol and parameters (``-symbol.json``, ``-0000.params``), then ``mx.onnx.export_model``.

For provenance the evaluator predicts with that exported graph, re-imported as a
``SymbolBlock`` (data, not the entry's code): every parameter it reads is compared with
the arrays of the ``.params`` file (``mx.nd.load``), and the attributes of its nodes (the
only other place a symbol can hold numbers) are counted as constants.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import HarnessError
from ..provenance import normalise_array, note_array, walk_held
from . import LoadedModel, export_failure, float_tensors, import_builder, require_file

if TYPE_CHECKING:
    from mxnet.gluon import HybridBlock

NODE_ATTRIBUTE_BYTES = 256


def configure_threads(threads: int) -> None:
    # MXNet sizes its OpenMP pool from the environment when it is first imported.
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")


class GluonModel(LoadedModel):
    native: HybridBlock

    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

        x = mx.nd.array(images, dtype=np.float32)
        ledger = getattr(self, "_ledger", None)
        if ledger is not None:
            self._ledger = None
            self._graph = _exported_graph(self.native, x, ledger)
        block = getattr(self, "_graph", None) or self.native
        return block(x).asnumpy()

    # -- provenance and sensitivity (the evaluator) ----------------------------------------
    def checkpoint_tensors(self) -> dict:
        import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

        return {name.split(":", 1)[-1]: value.asnumpy() for name, value in mx.nd.load(str(self.weights)).items()}

    @staticmethod
    def normalise(value, precision: str | None) -> np.ndarray:
        return normalise_array(np.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value), precision)

    def record_uses(self, ledger) -> None:
        for where, v in walk_held(self.native, lambda o: type(o).__name__ == "NDArray"):
            _note(ledger, v, where)
        self._ledger = ledger  # the graph is exported and noted at the first batch

    def stop_recording(self) -> None:
        self._graph = None

    def shuffle_weights(self, seed: int) -> int:
        import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

        rng = np.random.default_rng(seed)
        shuffled = 0
        for param in self.native.collect_params().values():
            value = param.data().asnumpy()
            if value.size > 1:  # integer tensors too: a checkpoint may carry data
                param.set_data(mx.nd.array(rng.permutation(value.reshape(-1)).reshape(value.shape), dtype=value.dtype))
                shuffled += 1
        return shuffled

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

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


def _note(ledger, value, where: str) -> None:
    note_array(ledger, np.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value), where)


def _exported_graph(net, x, ledger):
    """The block's traced graph, exported and imported back as a SymbolBlock, its
    parameters and node attributes noted in ``ledger``."""
    import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "model")
        net(x[:1])  # export needs a traced graph
        net.export(prefix, epoch=0)
        symbol = json.loads(Path(f"{prefix}-symbol.json").read_text())
        # Node attributes are a graph's only other numbers (kernel sizes, scalars): what a
        # node holds beyond NODE_ATTRIBUTE_BYTES counts as a constant of that many bytes.
        nodes = [node.get("attrs") or {} for node in symbol.get("nodes", [])]
        excess = sum(max(0, sum(len(str(k)) + len(str(v)) for k, v in attrs.items()) - NODE_ATTRIBUTE_BYTES)
                     for attrs in nodes)
        if excess:
            text = np.frombuffer(json.dumps(nodes, sort_keys=True).encode(), np.uint8)
            ledger.note(text, "the attributes of the exported graph's nodes", None, excess, (excess,), "text")
        graph = mx.gluon.SymbolBlock.imports(f"{prefix}-symbol.json", ["data"], f"{prefix}-0000.params", ctx=mx.cpu())
    for name, param in graph.collect_params().items():
        _note(ledger, param.data(), f"parameter {name} of the exported graph")
    return graph


def _weights_as_constants(path: Path) -> None:
    """mx2onnx lists every weight as a graph input too, which keeps ONNX Runtime from
    folding constants (it warns per weight); the weights are fixed here, so drop them."""
    import onnx  # lazy: optional (onnx: only in images that export to ONNX)

    model = onnx.load(str(path))
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    onnx.save(model, str(path))


def _onnx_opset() -> int | None:
    try:
        from onnx.defs import onnx_opset_version  # lazy: optional (onnx: only in images that export to ONNX)
    except ImportError:
        return None
    return onnx_opset_version()


def initial_tensors(entry_dir: Path, builder: str, input_shape: tuple[int, ...]) -> list[dict]:
    """The untrained block's float tensors, by their names in a ``save_parameters`` file: the
    block is initialised, its shapes inferred from one zero batch, saved once and read back
    the way a checkpoint is."""
    import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

    net = import_builder(entry_dir, builder)()
    if not isinstance(net, mx.gluon.HybridBlock):
        raise HarnessError(f"{builder} returned a {type(net).__name__}; MXNet entries build a gluon.HybridBlock")
    net.initialize(ctx=mx.cpu())
    net(mx.nd.zeros((1, *input_shape)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "untrained.params")
        net.save_parameters(path)
        return float_tensors({name.split(":", 1)[-1]: value.asnumpy() for name, value in mx.nd.load(path).items()})


def load(entry_dir: Path, builder: str, weights: Path) -> GluonModel:
    import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

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
