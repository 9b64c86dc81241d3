"""Count the FLOPs (and bytes touched) of one training step and one batch-1 inference of
an entry's model, with PyTorch's ``torch.utils.flop_counter.FlopCounterMode``.

Run as ``python -m runner.study.flops`` in a child process: it imports the entry's
``inference.builder`` on the host, so the entry's module stays out of the runner's own
process (and its ``sys.modules``). FlopCounterMode counts matrix products and convolutions
(a multiply-add is 2 FLOPs); elementwise work (activations, norms, the optimiser) is not
counted, as in the usual MLPerf/DAWNBench FLOP figures. Bytes are every tensor each ATen op
reads and writes, as if nothing stayed in cache: an upper bound on memory traffic, so the
arithmetic intensity it gives is a lower bound.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from runner.errors import UserError


def _counters():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class BytesTouched(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            flat, _ = tree_flatten((args, kwargs, out))
            self.bytes += sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))
            return out

    return BytesTouched


def count(entry_dir: str, builder: str, input_shape: list[int], num_classes: int, batch: int) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    BytesTouched = _counters()
    sys.path.insert(0, entry_dir)
    module_name, _, function_name = builder.partition(":")
    model = getattr(importlib.import_module(module_name), function_name)()
    torch.manual_seed(0)

    def measured(step):
        with FlopCounterMode(display=False) as flops, BytesTouched() as touched:
            step()
        return {"flops": int(flops.get_total_flops()), "bytes": int(touched.bytes)}

    def train_step():
        x = torch.rand(batch, *input_shape) * 255  # the stored scale: normalisation is the model's
        y = torch.randint(0, num_classes, (batch,))
        F.cross_entropy(model(x), y).backward()

    def infer_one():
        with torch.no_grad():
            model(torch.rand(1, *input_shape) * 255)

    model.train()
    train = measured(train_step)
    model.eval()
    infer = measured(infer_one)
    params = sum(p.numel() for p in model.parameters())
    return {"batch_size": batch, "parameters": params, "train_step": train, "inference_item": infer,
            "torch": torch.__version__}


def count_in_child(entry_dir: Path, builder: str, input_shape, num_classes: int, batch: int) -> dict:
    args = json.dumps([str(entry_dir), builder, list(input_shape), num_classes, batch])
    proc = subprocess.run([sys.executable, "-m", "runner.study.flops", args],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"counting the FLOPs of {builder} in {entry_dir} failed: {last}",
                        "check that the builder imports with the host's torch (pip install torch)")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(count(*json.loads(sys.argv[1]))))
