"""``torch-cuda``: the entry's own PyTorch model on the GPU, batch 1.

Settings (all recorded in info.json): the manifest's precision (``fp16: true`` runs the
model in half precision, its inputs cast on the GPU; otherwise fp32 with TF32 off, so the
answers stay those of the fp32 model), channels-last memory for 4-D image inputs, cuDNN's
autotuner on (one static shape), and the item's copy to the device, the forward pass and
the answer's copy back to pinned host memory captured once as a CUDA graph and replayed for
each item (one launch and one wait per item). Where that capture fails, the forward pass
alone is captured (the copies launched around it); where that fails too (a model with host
syncs or data-dependent control flow), the backend runs eagerly; either records why.

Each item's time covers what DAWNBench's batch-1 latency covers: the host->device copy
of the item (from pinned host memory), the forward pass, and the answer (the top class,
or the ``topk`` classes) read back on the host; ``predict`` returns only once the stream
has delivered it.
"""

from __future__ import annotations

import copy

import numpy as np

from ..errors import HarnessError
from . import check_framework
from ..timing import Ranked
from .base import Backend, ModelFiles

GRAPH_WARMUP = 3  # eager passes on a side stream before capture (cuDNN picks its kernels)


def cuda_refusal(torch) -> str | None:
    """Why this process cannot run CUDA work (None when it can)."""
    if not torch.cuda.is_available():
        build = torch.version.cuda
        if build is None:
            return ("the torch-cuda backend needs a CUDA build of PyTorch; this image has a CPU-only "
                    f"torch {torch.__version__}: lock a CUDA wheel of torch in the entry")
        return ("the torch-cuda backend needs an NVIDIA GPU, and none is visible in the container; run on a "
                "GPU host with the NVIDIA Container Toolkit, or choose --backend torch")
    return None


class TorchCuda(Backend):
    name = "torch-cuda"
    needs_onnx = False

    @classmethod
    def check_available(cls) -> None:
        try:
            import torch  # lazy: optional (torch: only in images with PyTorch)
        except ImportError:
            raise HarnessError("the torch-cuda backend needs PyTorch in the image; add torch to the entry's lock") from None
        if problem := cuda_refusal(torch):
            raise HarnessError(problem)

    def prepare(self, files: ModelFiles) -> None:
        import torch  # lazy: optional (torch: only in images with PyTorch)

        check_framework(self.name, files)
        self.torch, self.files, self.topk = torch, files, files.topk
        self.device = torch.device("cuda", 0)
        torch.backends.cudnn.benchmark = True
        if not files.fp16:  # fp32 means fp32: no silent TF32
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.dtype = torch.float16 if files.fp16 else torch.float32
        self.channels_last = len(files.input_shape) == 4
        self.memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        # A copy: the shared model stays as loaded (on the CPU) for any backend that follows.
        model = copy.deepcopy(files.torch_model).eval()
        self.model = model.to(device=self.device, dtype=self.dtype, memory_format=self.memory_format)
        self.stream = torch.cuda.Stream(self.device)
        # Static buffers: the host item is copied into pinned memory, then into the device input.
        self.host_in = torch.empty(files.input_shape, dtype=torch.float32, pin_memory=True)
        self.device_in = torch.empty(files.input_shape, dtype=torch.float32, device=self.device)
        self.graph = None
        self.graph_problem: str | None = None
        self.mode = "eager"
        self.whole = False  # the graph holds the copies too
        # The stream replay launches on (the current one: predict runs in no stream context).
        self.replay_stream = torch.cuda.current_stream(self.device)
        problems = []
        for whole in (True, False):  # the item's copies in the graph too, else the forward alone
            try:
                self._capture(whole)
                self.mode, self.whole = "cuda-graph", whole
                break
            except Exception as exc:  # any failure to capture: the next form, then eager, with the reason
                self.graph = None
                problems.append(f"{type(exc).__name__}: {str(exc)[:300]}")
                torch.cuda.synchronize(self.device)
        if self.graph is None or not self.whole:
            self.graph_problem = "; ".join(problems)

    def _forward(self):
        """The ranked answer for whatever is in ``device_in``, computed on the device."""
        torch = self.torch
        x = self.device_in.to(dtype=self.dtype).contiguous(memory_format=self.memory_format)
        scores = self.model(x).float()
        if self.topk == 1:
            return scores.argmax(dim=1)
        return torch.topk(scores, self.topk, dim=1).indices

    def _capture(self, whole: bool) -> None:
        """The forward pass captured as a CUDA graph; ``whole``: with the item's copy from
        pinned host memory before it and the answer's copy into pinned host memory after it,
        so that an item is one launch and one wait."""
        torch = self.torch
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            for _ in range(GRAPH_WARMUP):
                probe = self._forward()
            self.stream.synchronize()
            self.host_out = torch.empty(probe.shape, dtype=probe.dtype, pin_memory=True)
            self.host_in_view, self.host_out_view = self.host_in.numpy(), self.host_out.numpy()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self.stream):
                if whole:
                    self.device_in.copy_(self.host_in, non_blocking=True)
                self.graph_out = self._forward()
                if whole:
                    self.host_out.copy_(self.graph_out, non_blocking=True)
        self.stream.synchronize()

    def predict(self, x: np.ndarray) -> Ranked:
        torch = self.torch
        graph = self.graph
        if self.whole and graph is not None:  # copy in, forward, copy out: one replay, then the wait
            self.host_in_view[...] = x
            graph.replay()
            self.replay_stream.synchronize()
            answer = self.host_out_view
            return int(answer[0]) if self.topk == 1 else answer[0].copy()
        self.host_in.numpy()[...] = x
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            self.device_in.copy_(self.host_in, non_blocking=True)
            if self.graph is not None:
                self.graph.replay()
                out = self.graph_out
            else:
                out = self._forward()
            answer = out.to("cpu")  # waits for the stream: the read-back is timed
        if self.topk == 1:
            return int(answer[0])
        return answer[0].numpy()

    def info(self) -> dict:
        torch = self.torch
        props = torch.cuda.get_device_properties(self.device)
        return {
            "version": torch.__version__,
            "settings": {
                "mode": self.mode,
                "graph": (None if self.graph is None else
                          "host->device copy, forward, device->host copy" if self.whole else "forward"),
                "graph_fallback_reason": self.graph_problem,
                "device": torch.cuda.get_device_name(self.device),
                "compute_capability": f"{props.major}.{props.minor}",
                "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "precision": "fp16" if self.files.fp16 else "fp32",
                "tf32": bool(torch.backends.cudnn.allow_tf32) if self.files.fp16 else False,
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "grad": "torch.inference_mode",
                "memory_format": "channels_last (NHWC)" if self.channels_last else "contiguous",
                "timed": "pinned host copy -> device, forward, answer read back on the host",
                "batch": 1,
            },
            "threads": {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()},
            "model_file": str(self.files.weights),
            "model_sha256": self.files.weights_sha256,
            **self.model_record(self.files, "NCHW input, channels_last (NHWC) memory" if self.channels_last else "NCHW"),
        }
