"""The evaluator on the run's GPU: the same predictions as on the CPU (within tolerance),
and its provenance record still sees the checkpoint's tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.harness.evaluate import predict


def _loaded(torch, model, tmp_path: Path):
    from runner.harness.frameworks.pytorch import load

    weights = tmp_path / "w.pt"
    torch.save(model.state_dict(), weights)
    entry = Path(__file__).resolve().parents[2] / "entries" / "resnet9-v100"
    return load(entry, "model:build_model", weights)


def test_gpu_predictions_equal_the_cpus(torch_cuda, resnet9, cifar_like, tmp_path):
    cpu = _loaded(torch_cuda, resnet9, tmp_path)
    gpu = _loaded(torch_cuda, resnet9, tmp_path)
    gpu.to_device("cuda")
    scores_cpu = cpu.predict_batch(cifar_like[:256])
    scores_gpu = gpu.predict_batch(cifar_like[:256])
    assert np.allclose(scores_cpu, scores_gpu, rtol=1e-3, atol=1e-3), np.abs(scores_cpu - scores_gpu).max()
    agree = np.mean(predict(cpu, cifar_like, 1) == predict(gpu, cifar_like, 1))
    assert agree >= 0.995, agree


def test_provenance_is_recorded_on_the_gpu(torch_cuda, resnet9, cifar_like, tmp_path):
    from runner.harness.provenance import Ledger

    gpu = _loaded(torch_cuda, resnet9, tmp_path)
    gpu.to_device("cuda")
    ledger = Ledger(gpu.checkpoint_tensors(), gpu.normalise)
    gpu.record_uses(ledger)
    predict(gpu, cifar_like[:64], 1)
    gpu.stop_recording()
    record = ledger.record()
    assert record  # the evaluator's provenance.json for this model
