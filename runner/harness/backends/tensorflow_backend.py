"""``tensorflow``: the entry's Keras model in TensorFlow on the CPU, called at batch 1.

The model is traced once into a concrete ``tf.function`` for a ``1 x C x H x W`` float32
input (the graph a SavedModel's serving signature holds), with the NCHW -> NHWC transpose
inside the graph: TensorFlow's CPU kernels (oneDNN) run channels-last. Each call is one
graph execution; no Keras ``predict`` (its per-call data-adapter overhead is not inference).
"""

from __future__ import annotations

import numpy as np

from ..errors import HarnessError
from . import check_framework
from ..frameworks.tensorflow import KerasModel
from ..timing import Ranked
from .base import Backend, ModelFiles


class TensorFlowBackend(Backend):
    name = "tensorflow"
    needs_onnx = False

    @classmethod
    def check_available(cls) -> None:
        try:
            import tensorflow  # noqa: F401  # lazy: optional (tensorflow: only in images with TensorFlow)
        except ImportError:
            raise HarnessError(
                "the tensorflow backend needs TensorFlow in the image; add tensorflow-cpu to the entry's lock"
            ) from None

    def prepare(self, files: ModelFiles) -> None:
        import tensorflow as tf  # lazy: optional (tensorflow: only in images with TensorFlow)

        check_framework(self.name, files)
        self.tf = tf
        self.files = files
        self.topk = files.topk
        model = files.model
        if not isinstance(model, KerasModel):
            raise HarnessError(f"the tensorflow backend runs Keras models; this entry's model is a {type(model).__name__}")
        self.serve = model.nchw_function(tuple(files.input_shape)).get_concrete_function()

    def predict(self, x: np.ndarray) -> Ranked:
        scores = self.serve(self.tf.constant(x)).numpy()[0]
        if self.topk == 1:
            return int(scores.argmax())
        return np.argsort(-scores, kind="stable")[: self.topk]

    def info(self) -> dict:
        tf = self.tf
        return {
            "version": tf.__version__,
            "settings": {
                "mode": "tf.function (concrete function, fixed batch-1 signature)",
                "device": "cpu",
                "onednn": _onednn_enabled(tf),
            },
            "threads": {
                "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            },
            "model_file": str(self.files.weights),
            "model_sha256": self.files.weights_sha256,
            **self.model_record(self.files, "NCHW input, transposed to NHWC inside the graph"),
        }


def _onednn_enabled(tf) -> bool | None:
    try:
        return bool(tf.sysconfig.get_build_info().get("is_mkl_build")) or None
    except Exception:
        return None
