"""``torch``: the entry's own model in eager PyTorch on the CPU.

Tuned for batch-1 latency on a few cores (measured by ``runner bench latency``): one
intra-op thread, one inter-op thread, ``torch.inference_mode``, and channels-last
memory for 4-D image inputs (oneDNN's convolutions run about 1.6x faster on a small
CNN that way). No TorchScript or compilation: this is the eager baseline.
"""

from __future__ import annotations

import copy

import numpy as np

from ..errors import HarnessError
from . import check_framework
from ..timing import Ranked
from .base import Backend, ModelFiles


class TorchEager(Backend):
    name = "torch"
    needs_onnx = False

    @classmethod
    def check_available(cls) -> None:
        try:
            import torch  # noqa: F401  # lazy: optional (torch: only in images with PyTorch)
        except ImportError:
            raise HarnessError("the torch backend needs PyTorch in the image; add torch to the entry's lock") from None

    def prepare(self, files: ModelFiles) -> None:
        import torch  # lazy: optional (torch: only in images with PyTorch)

        check_framework(self.name, files)
        self.torch = torch
        torch.set_num_threads(files.threads)
        self.channels_last = len(files.input_shape) == 4
        self.memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        # A copy: the shared model stays as loaded for any backend that follows.
        self.model = copy.deepcopy(files.torch_model).to(memory_format=self.memory_format)
        self.topk = files.topk
        self.files = files

    def predict(self, x: np.ndarray) -> Ranked:
        torch = self.torch
        with torch.inference_mode():
            scores = self.model(torch.from_numpy(x).contiguous(memory_format=self.memory_format))
            if self.topk == 1:
                return int(scores.argmax())
            return scores.topk(self.topk, dim=1).indices[0].numpy()

    def info(self) -> dict:
        torch = self.torch
        return {
            "version": torch.__version__,
            "settings": {
                "mode": "eager",
                "device": "cpu",
                "grad": "torch.inference_mode",
                "memory_format": "channels_last (NHWC)" if self.channels_last else "contiguous",
                "mkldnn_enabled": bool(torch.backends.mkldnn.is_available()),
            },
            "threads": {
                "intra_op": torch.get_num_threads(),
                "inter_op": torch.get_num_interop_threads(),
            },
            "model_file": str(self.files.weights),
            "model_sha256": self.files.weights_sha256,
            **self.model_record(self.files, "NCHW input, channels_last (NHWC) memory" if self.channels_last else "NCHW"),
        }
