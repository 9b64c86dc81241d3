"""``onnxruntime``, ``onnxruntime-cuda``, ``onnxruntime-tensorrt``: the harness' ONNX export
in ONNX Runtime, on the CPU, CUDA or TensorRT execution provider.

ONNX Runtime silently falls back to the CPU when a requested provider cannot start, so
the session's actual providers are checked after it is built: a "CUDA" latency measured
on the CPU would be a false claim.
"""

from __future__ import annotations

import numpy as np

from ..errors import HarnessError
from ..timing import Ranked
from .base import Backend, ModelFiles


def _rank(scores: np.ndarray, k: int) -> Ranked:
    if k == 1:
        return int(scores.argmax())
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


class OnnxRuntimeBackend(Backend):
    needs_onnx = True
    name = "onnxruntime"
    provider = "CPUExecutionProvider"

    @classmethod
    def check_available(cls) -> None:
        try:
            import onnxruntime as ort  # lazy: optional (onnxruntime: only in images with ONNX Runtime)
        except ImportError:
            raise HarnessError(
                f"the {cls.name} backend needs ONNX Runtime in the image; add onnxruntime "
                f"(onnxruntime-gpu for CUDA/TensorRT) to the entry's lock"
            ) from None
        if cls.provider not in ort.get_available_providers():
            raise HarnessError(
                f"the {cls.name} backend needs ONNX Runtime's {cls.provider}, but this build "
                f"offers only {', '.join(ort.get_available_providers())}; use onnxruntime-gpu "
                f"on a host with an NVIDIA GPU, or choose --backend onnxruntime"
            )

    def provider_options(self, files: ModelFiles) -> dict:
        return {}

    def session_options(self, files: ModelFiles):
        import onnxruntime as ort  # lazy: optional (onnxruntime: only in images with ONNX Runtime)

        opts = ort.SessionOptions()
        # Batch-1 latency: one request at a time, nothing to gain from inter-op parallelism.
        opts.intra_op_num_threads = files.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return opts

    def prepare(self, files: ModelFiles) -> None:
        import onnxruntime as ort  # lazy: optional (onnxruntime: only in images with ONNX Runtime)

        self.onnx, self.onnx_info = files.onnx_export(self.name)
        self.ort = ort
        self.files = files
        self.topk = files.topk
        self.options = self.session_options(files)
        providers = [(self.provider, self.provider_options(files))]
        if self.provider != "CPUExecutionProvider":
            providers.append(("CPUExecutionProvider", {}))  # for ops the accelerator lacks
        self.session = ort.InferenceSession(str(self.onnx), sess_options=self.options, providers=providers)
        active = self.session.get_providers()
        if not active or active[0] != self.provider:
            raise HarnessError(
                f"ONNX Runtime did not start {self.provider} (active: {', '.join(active)}); "
                f"refusing to report a CPU latency as {self.name}", 1,
            )
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [self.session.get_outputs()[0].name]

    def predict(self, x: np.ndarray) -> Ranked:
        scores = self.session.run(self.output_names, {self.input_name: x})[0]
        return _rank(scores[0], self.topk)

    def info(self) -> dict:
        ort = self.ort
        opts = self.options
        return {
            "version": ort.__version__,
            "settings": {
                "providers": self.session.get_providers(),
                "provider_options": {
                    k: v for k, v in self.session.get_provider_options().items()
                    if k in self.session.get_providers()
                },
                "graph_optimization_level": str(opts.graph_optimization_level).split(".")[-1],
                "execution_mode": str(opts.execution_mode).split(".")[-1],
            },
            "threads": {
                "intra_op": opts.intra_op_num_threads,
                "inter_op": opts.inter_op_num_threads,
            },
            "model_file": self.onnx.name,
            "model_sha256": self.onnx_info["sha256"],
            "onnx": self.onnx_info,
            **self.model_record(self.files, "NCHW (the ONNX export's input)"),
        }


class OnnxRuntimeCuda(OnnxRuntimeBackend):
    name = "onnxruntime-cuda"
    provider = "CUDAExecutionProvider"


class OnnxRuntimeTensorRT(OnnxRuntimeBackend):
    name = "onnxruntime-tensorrt"
    provider = "TensorrtExecutionProvider"

    def provider_options(self, files: ModelFiles) -> dict:
        return {
            "trt_fp16_enable": files.fp16,
            "trt_engine_cache_enable": True,
            "trt_engine_cache_path": str(files.work_dir),
        }
