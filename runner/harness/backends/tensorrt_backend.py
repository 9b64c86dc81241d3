"""``tensorrt``: an engine built by TensorRT from the harness' ONNX export (fp16 optional),
run through an execution context with device buffers held as torch CUDA tensors.

Written against the TensorRT 10 Python API (named I/O tensors, ``execute_async_v3``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..digest import sha256_file
from ..errors import HarnessError
from ..timing import Ranked
from .base import Backend, ModelFiles

WORKSPACE_BYTES = 1 << 30


class TensorRTBackend(Backend):
    name = "tensorrt"
    needs_onnx = True

    @classmethod
    def check_available(cls) -> None:
        try:
            import tensorrt  # noqa: F401  # lazy: optional (tensorrt: only in images with TensorRT)
        except ImportError:
            raise HarnessError(
                "the tensorrt backend needs the tensorrt Python package in the image; add "
                "tensorrt to the entry's lock and run on a host with an NVIDIA GPU"
            ) from None
        try:
            import torch  # lazy: optional (torch: only in images with PyTorch)
        except ImportError:
            raise HarnessError("the tensorrt backend needs torch (CUDA build) for its device buffers") from None
        if not torch.cuda.is_available():
            raise HarnessError(
                "the tensorrt backend needs a CUDA GPU, and none is visible in the container; "
                "run on a GPU host with the NVIDIA container runtime, or choose --backend onnxruntime"
            )

    def _build_engine(self, trt, files: ModelFiles, onnx: Path) -> bytes:
        logger = self.logger
        builder = trt.Builder(logger)
        network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(onnx.read_bytes()):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise HarnessError(f"TensorRT cannot parse the ONNX export: {errors}", 1)
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
        if files.fp16:
            if not builder.platform_has_fast_fp16:
                raise HarnessError("fp16 was asked for but this GPU has no fast fp16", 1)
            config.set_flag(trt.BuilderFlag.FP16)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise HarnessError("TensorRT could not build an engine from the ONNX export", 1)
        return bytes(serialized)

    def prepare(self, files: ModelFiles) -> None:
        import tensorrt as trt  # lazy: optional (tensorrt: only in images with TensorRT)
        import torch  # lazy: optional (torch: only in images with PyTorch)

        self.onnx, self.onnx_info = files.onnx_export(self.name)
        self.trt, self.torch, self.files, self.topk = trt, torch, files, files.topk
        self.logger = trt.Logger(trt.Logger.WARNING)
        start = time.perf_counter()
        plan = self._build_engine(trt, files, self.onnx)
        self.build_seconds = time.perf_counter() - start
        self.engine_path = files.work_dir / "model.engine"
        self.engine_path.write_bytes(plan)
        self.engine = trt.Runtime(self.logger).deserialize_cuda_engine(plan)
        self.context = self.engine.create_execution_context()
        self.stream = torch.cuda.Stream()

        self.buffers: dict[str, object] = {}
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            shape = tuple(self.engine.get_tensor_shape(name))
            dtype = torch.from_numpy(np.empty(0, dtype=trt.nptype(self.engine.get_tensor_dtype(name)))).dtype
            tensor = torch.empty(shape, dtype=dtype, device="cuda")
            self.buffers[name] = tensor
            self.context.set_tensor_address(name, tensor.data_ptr())
            if self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                self.input = tensor
            else:
                self.output = tensor

    def predict(self, x: np.ndarray) -> Ranked:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self.input.copy_(torch.from_numpy(x), non_blocking=False)
            self.context.execute_async_v3(self.stream.cuda_stream)
            scores = self.output[0].float()
            if self.topk == 1:
                return int(scores.argmax())  # .item() waits for the stream: the copy back is timed
            return scores.topk(self.topk).indices.cpu().numpy()

    def info(self) -> dict:
        trt, torch = self.trt, self.torch
        return {
            "version": trt.__version__,
            "settings": {
                "engine": "TensorRT (ONNX parser, serialized engine)",
                "fp16": self.files.fp16,
                "workspace_bytes": WORKSPACE_BYTES,
                "engine_file": self.engine_path.name,
                "engine_sha256": sha256_file(self.engine_path),
                "build_seconds": round(self.build_seconds, 3),
                "device": torch.cuda.get_device_name(0),
                "cuda": torch.version.cuda,
            },
            "threads": {"host": 1},
            "model_file": self.onnx.name,
            "model_sha256": self.onnx_info["sha256"],
            "onnx": self.onnx_info,
            **self.model_record(self.files, "NCHW (the ONNX export's input)"),
        }
