"""``mxnet``: the entry's hybridized Gluon block in MXNet on the CPU, called at batch 1.

The loader hybridizes the block with ``static_alloc`` and ``static_shape`` (a cached graph
with fixed buffers, MXNet's fastest way to serve a Gluon model); the first call at batch 1
builds that graph, which the harness' warm-up absorbs. ``asnumpy`` waits for MXNet's
asynchronous engine, so each timed call includes the whole computation.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import HarnessError
from . import check_framework
from ..timing import Ranked
from .base import Backend, ModelFiles


class MXNetBackend(Backend):
    name = "mxnet"
    needs_onnx = False

    @classmethod
    def check_available(cls) -> None:
        try:
            import mxnet  # noqa: F401  # lazy: optional (mxnet: only in images with MXNet)
        except ImportError:
            raise HarnessError("the mxnet backend needs MXNet in the image; add mxnet to the entry's lock") from None

    def prepare(self, files: ModelFiles) -> None:
        import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

        check_framework(self.name, files)
        self.mx = mx
        self.files = files
        self.topk = files.topk
        block = files.model.native
        if not isinstance(block, mx.gluon.HybridBlock):
            raise HarnessError(f"the mxnet backend runs Gluon blocks; this entry's model is a {type(block).__name__}")
        self.block = block

    def predict(self, x: np.ndarray) -> Ranked:
        scores = self.block(self.mx.nd.array(x)).asnumpy()[0]
        if self.topk == 1:
            return int(scores.argmax())
        return np.argsort(-scores, kind="stable")[: self.topk]

    def info(self) -> dict:
        mx = self.mx
        features = mx.runtime.Features()
        return {
            "version": mx.__version__,
            "settings": {
                "mode": "hybridized Gluon block (static_alloc, static_shape)",
                "device": "cpu",
                "mkldnn": bool(features.is_enabled("MKLDNN")),
                "engine": os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
            },
            "threads": {
                "omp": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
                "cpu_workers": int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")),
            },
            "model_file": str(self.files.weights),
            "model_sha256": self.files.weights_sha256,
            **self.model_record(self.files, "NCHW"),
        }
