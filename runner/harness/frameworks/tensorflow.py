"""TensorFlow 2 / Keras: the trained model is Keras' own ``.keras`` file (``model.save``).

It is read with ``safe_mode=True`` (no deserialised Python lambdas) and ``compile=False``.
The builder is not called: the file carries the architecture. Its module is imported
first, so any custom layer the entry registers (``keras.saving.register_keras_serializable``)
is known. The model computes in NHWC (TensorFlow's CPU layout); the harness' inputs are
NCHW, so every entry point here transposes inside the traced graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import HarnessError
from . import LoadedModel, export_failure, import_builder, require_file

INPUT_NAME = "input"
NCHW_TO_NHWC = (0, 2, 3, 1)


def configure_threads(threads: int) -> None:
    """Must run before TensorFlow starts its runtime (the first op)."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass  # the runtime already started; the actual values are recorded in info.json


class KerasModel(LoadedModel):
    def nchw_function(self, shape: tuple):
        """A ``tf.function`` taking NCHW float32 of ``shape`` (``None`` batch allowed)."""
        import tensorflow as tf

        model = self.native

        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32, name=INPUT_NAME)])
        def serve(x):
            return model(tf.transpose(x, NCHW_TO_NHWC), training=False)

        return serve

    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        if getattr(self, "_batched", None) is None:
            self._batched = self.nchw_function((None, *images.shape[1:]))
        return self._batched(np.ascontiguousarray(images, dtype=np.float32)).numpy()

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        import tensorflow as tf

        try:
            import tf2onnx
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


def load(entry_dir: Path, builder: str, weights: Path) -> KerasModel:
    import keras
    import tensorflow as tf

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
