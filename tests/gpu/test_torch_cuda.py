"""The torch-cuda backend on a real GPU: CUDA-graph replay at batch 1, the manifest's
precision, channels-last, answers equal to the CPU's, faster than the CPU backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from runner.harness.backends import ModelFiles, backend_class
from runner.harness.frameworks import LoadedModel
from runner.harness.timing import timed_pass


def _files(model, tmp_path: Path, fp16: bool, topk: int = 1) -> ModelFiles:
    loaded = LoadedModel("pytorch", "test", model, tmp_path / "w.pt", "0" * 64, "NCHW")
    return ModelFiles(model=loaded, weights=loaded.weights, weights_sha256=loaded.weights_sha256, onnx=None,
                      onnx_info=None, input_shape=(1, 3, 32, 32), topk=topk, threads=1, fp16=fp16,
                      work_dir=tmp_path)


def _run(name, files, images, warmup=50):
    cls = backend_class(name)
    cls.check_available()
    backend = cls()
    backend.prepare(files)
    return backend, timed_pass(backend.predict, images, warmup=warmup, topk=files.topk, backend=name)


@pytest.mark.parametrize("fp16", [False, True])
def test_graph_replay_gives_the_cpus_answers_and_is_faster(torch_cuda, resnet9, cifar_like, tmp_path, fp16):
    images = cifar_like[:300]
    gpu, timed = _run("torch-cuda", _files(resnet9, tmp_path, fp16), images)
    info = gpu.info()
    assert info["settings"]["mode"] == "cuda-graph", info["settings"]["graph_fallback_reason"]
    # One replay per item: the item's copy in and the answer's copy out are in the graph too.
    assert info["settings"]["graph"] == "host->device copy, forward, device->host copy", info["settings"]
    assert info["settings"]["precision"] == ("fp16" if fp16 else "fp32")
    assert info["settings"]["memory_format"].startswith("channels_last")
    _, cpu = _run("torch", _files(resnet9, tmp_path, False), images, warmup=5)
    agree = float(np.mean(timed.predictions == cpu.predictions))
    assert agree >= (0.97 if fp16 else 0.995), agree  # random weights: near-ties may flip in fp16
    p50_gpu, p50_cpu = np.median(timed.latencies_ns), np.median(cpu.latencies_ns)
    print(f"torch-cuda {'fp16' if fp16 else 'fp32'} p50 {p50_gpu / 1e6:.3f} ms, torch (CPU) p50 {p50_cpu / 1e6:.3f} ms")
    assert p50_gpu < p50_cpu


def test_top5_answers_come_back_ranked(torch_cuda, resnet9, cifar_like, tmp_path):
    gpu, timed = _run("torch-cuda", _files(resnet9, tmp_path, False, topk=5), cifar_like[:50], warmup=5)
    assert timed.predictions.shape == (50, 5)
    with torch_cuda.no_grad():
        ref = resnet9(torch_cuda.from_numpy(cifar_like[:50])).topk(5, dim=1).indices.numpy()
    assert np.mean(timed.predictions[:, 0] == ref[:, 0]) >= 0.99


def test_a_model_that_cannot_be_captured_falls_back_to_eager_and_says_why(torch_cuda, cifar_like, tmp_path):
    class HostSync(torch_cuda.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch_cuda.nn.Conv2d(3, 10, 3)

        def forward(self, x):
            y = self.conv(x).mean(dim=(2, 3))
            if float(y.sum()) > 1e9:  # a host sync: not capturable
                y = y * 0
            return y

    gpu, timed = _run("torch-cuda", _files(HostSync().eval(), tmp_path, False), cifar_like[:20], warmup=2)
    info = gpu.info()
    assert info["settings"]["mode"] == "eager" and info["settings"]["graph_fallback_reason"]
    assert len(timed.predictions) == 20
