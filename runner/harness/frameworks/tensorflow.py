"""TensorFlow 2 / Keras: the trained model is Keras' own ``.keras`` file (``model.save``).

It is read with ``safe_mode=True`` (no deserialised Python lambdas) and ``compile=False``.
The builder is not called: the file carries the architecture. Its module is imported
first, so any custom layer the entry registers (``keras.saving.register_keras_serializable``)
is known. The model computes in NHWC (TensorFlow's CPU layout); the harness' inputs are
NCHW, so every entry point here transposes inside the traced graph.

Predictions come from one traced ``tf.function`` (a graph). Its provenance: the values
of every variable and captured tensor the graph reads, and every constant in it (its
function library included), each compared with the arrays of the file's
``model.weights.h5`` (read with h5py, no Keras code).
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import HarnessError
from ..provenance import normalise_array, note_array, walk_held
from . import LoadedModel, export_failure, float_tensors, import_builder, require_file

if TYPE_CHECKING:
    from tensorflow import keras

INPUT_NAME = "input"
NCHW_TO_NHWC = (0, 2, 3, 1)


def configure_threads(threads: int) -> None:
    """Must run before TensorFlow starts its runtime (the first op)."""
    import tensorflow as tf  # lazy: optional (tensorflow: only in images with TensorFlow)

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass  # the runtime already started; the actual values are recorded in info.json


class KerasModel(LoadedModel):
    native: keras.Model

    def nchw_function(self, shape: tuple):
        """A ``tf.function`` taking NCHW float32 of ``shape`` (``None`` batch allowed)."""
        import tensorflow as tf  # lazy: optional (tensorflow: only in images with TensorFlow)

        model = self.native

        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32, name=INPUT_NAME)])
        def serve(x):
            return model(tf.transpose(x, NCHW_TO_NHWC), training=False)

        return serve

    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        if getattr(self, "_batched", None) is None:
            self._batched = self.nchw_function((None, *images.shape[1:]))
        ledger = getattr(self, "_ledger", None)
        if ledger is not None:
            self._ledger = None
            _note_graph(self._batched.get_concrete_function(), ledger)
        return self._batched(np.ascontiguousarray(images, dtype=np.float32)).numpy()

    # -- provenance and sensitivity (the evaluator) ----------------------------------------
    def checkpoint_tensors(self) -> dict:
        return _weights_h5(self.weights)

    @staticmethod
    def normalise(value, precision: str | None) -> np.ndarray:
        return normalise_array(np.asarray(value.numpy() if hasattr(value, "numpy") else value), precision)

    def record_uses(self, ledger) -> None:
        for where, v in walk_held(self.native, lambda o: hasattr(o, "numpy") and hasattr(o, "dtype") and hasattr(o, "shape")):
            _note(ledger, v, where)
        self._ledger = ledger  # the graph is noted when it is traced, at the first batch

    def shuffle_weights(self, seed: int) -> int:
        rng = np.random.default_rng(seed)
        shuffled = 0
        for v in self.native.weights:
            value = np.asarray(v.numpy())
            if value.size > 1:  # integer tensors too: a checkpoint may carry data
                v.assign(rng.permutation(value.reshape(-1)).reshape(value.shape))
                shuffled += 1
        return shuffled

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        import tensorflow as tf  # lazy: optional (tensorflow: only in images with TensorFlow)

        try:
            import tf2onnx  # lazy: optional (tf2onnx: only in images with TensorFlow)
        except ImportError:
            raise HarnessError(
                "exporting a TensorFlow model to ONNX needs tf2onnx in the image; add tf2onnx to the entry's lock"
            ) from None
        serve = self.nchw_function(tuple(input_shape))
        try:
            tf2onnx.convert.from_function(
                serve, input_signature=serve.input_signature, opset=opset, output_path=str(path),
            )
        except Exception as exc:
            raise export_failure("TensorFlow", opset, exc) from None
        return {"exporter": "tf2onnx.convert.from_function", "tf2onnx_version": tf2onnx.__version__,
                "tensorflow_version": tf.__version__,
                "layout": "NCHW input, transposed to NHWC inside the graph"}


def _note(ledger, value, where: str) -> None:
    note_array(ledger, np.asarray(value.numpy() if hasattr(value, "numpy") else value), where)


def _note_graph(concrete, ledger) -> None:
    """Every variable and captured tensor the traced graph reads, and every constant in it."""
    import tensorflow as tf  # lazy: optional (tensorflow: only in images with TensorFlow)

    for v in concrete.variables:
        _note(ledger, v, f"variable {v.name}")
    for t in concrete.captured_inputs:
        if t.dtype != tf.resource:
            _note(ledger, t, "a tensor captured by the graph")
    graph = concrete.graph.as_graph_def()
    nodes = [(n, "graph") for n in graph.node]
    nodes += [(n, f"function {f.signature.name}") for f in graph.library.function for n in f.node_def]
    for node, where in nodes:
        if node.op == "Const":
            _note(ledger, tf.make_ndarray(node.attr["value"].tensor), f"constant {node.name} ({where})")


def _weights_h5(path: Path) -> dict:
    """The arrays of a ``.keras`` file's ``model.weights.h5``, by their path in it."""
    import h5py  # lazy: optional (h5py: only in images with Keras)

    found = {}
    with zipfile.ZipFile(path) as archive:
        data = io.BytesIO(archive.read("model.weights.h5"))
        with h5py.File(data, "r") as h5:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    found[name] = np.asarray(obj[()])
            h5.visititems(visit)
    return found


def initial_tensors(entry_dir: Path, builder: str, input_shape: tuple[int, ...]) -> list[dict]:
    """The untrained model's float tensors, by their path in a ``.keras`` file's
    ``model.weights.h5`` (the names the evaluator reads checkpoints by): the builder's model is
    saved once to a temporary file and read back the way a checkpoint is."""
    model = import_builder(entry_dir, builder)()
    if not hasattr(model, "save"):
        raise HarnessError(f"{builder} returned a {type(model).__name__}, not a Keras model")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "untrained.keras"
        model.save(path)
        return float_tensors(_weights_h5(path))


def load(entry_dir: Path, builder: str, weights: Path) -> KerasModel:
    import keras  # lazy: optional (keras: only in images with TensorFlow)
    import tensorflow as tf  # lazy: optional (tensorflow: only in images with TensorFlow)

    import_builder(entry_dir, builder)  # registers the entry's custom layers, if any
    digest = require_file(weights)
    if weights.suffix != ".keras":
        raise HarnessError(
            f"{weights} is not a Keras .keras file; TensorFlow entries save checkpoints and the "
            "final model with model.save('NAME.keras')"
        )
    try:
        model = keras.saving.load_model(weights, compile=False, safe_mode=True)
    except Exception as exc:
        raise HarnessError(f"cannot read the Keras model {weights}: {type(exc).__name__}: {exc}") from None
    return KerasModel("tensorflow", tf.__version__, model, weights, digest, "NHWC")
