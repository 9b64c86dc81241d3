"""PyTorch: an ``nn.Module`` from the manifest's builder and a ``state_dict`` checkpoint.

Its loader is ``runner/harness/frameworks/pytorch.py`` (also its FLOP counter, with
``torch.utils.flop_counter``); its native backends are ``torch`` and ``torch-cuda``. The
only loader that moves its model to a GPU: the evaluator passes ``--device cuda`` when the
training container has GPUs.
"""

from runner.frameworks.base import Framework

PROBE = r'''
torch = load("torch")
out["torch"] = None if torch is None else {
    "version": torch.__version__,
    "cuda": torch.version.cuda,
    "cudnn": attempt(lambda: torch.backends.cudnn.version()),
    "cuda_available": attempt(torch.cuda.is_available),
    "mkldnn": attempt(torch.backends.mkldnn.is_available),
    "cpu_bf16": attempt(lambda: bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())),
    "cuda_bf16": attempt(lambda: torch.cuda.is_available() and torch.cuda.is_bf16_supported()),
    "cpu_capability": attempt(lambda: torch.backends.cpu.get_cpu_capability()),
    "threads": attempt(torch.get_num_threads),
}
'''

FRAMEWORK = Framework(
    name="pytorch",
    listed=0,
    label="PyTorch",
    module="torch",
    distributions=("torch",),
    probe=PROBE,
    fingerprint_rows=(
        ("torch", ("version",)),
        ("torch CUDA / cuDNN", ("cuda", "cudnn")),
        ("oneDNN (mkldnn) / CPU bf16", ("mkldnn", "cpu_bf16")),
    ),
    gpu_device="cuda",
    flop_counter="torch.utils.flop_counter",
    feature_reader="a forward pre-hook on the last layer",
)
