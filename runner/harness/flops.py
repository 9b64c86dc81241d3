"""``python3 -m harness flops``: count the FLOPs (and bytes touched) of one training step
and one batch-1 inference of the entry's model, inside a container of the entry's image.

The runner's roofline study runs this in the sandbox (no network, non-root, read-only root,
no capabilities) so that no entry code runs on the host. It builds the untrained model with
the manifest's builder and counts with PyTorch's ``torch.utils.flop_counter.FlopCounterMode``:
matrix products and convolutions (a multiply-add is 2 FLOPs); elementwise work (activations,
norms, the optimiser) is not counted, as in the usual MLPerf/DAWNBench FLOP figures. Bytes are
every tensor each ATen op reads and writes, as if nothing stayed in cache: an upper bound on
memory traffic, so the arithmetic intensity it gives is a lower bound.

Writes ``--out``/``flops.json``. The host treats every number in it as the entry's claim:
it parses them with bounds and says in the study that the entry's own image counted them.

Exit codes: 0 counted; 2 nothing counted (bad arguments, a framework other than PyTorch,
a builder that does not import or build).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from .errors import HarnessError
from .frameworks import import_builder

RESULT_FILE = "flops.json"


def _shape(text: str) -> list[int]:
    try:
        dims = [int(d) for d in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape such as 1,28,28") from None
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape such as 1,28,28")
    return dims


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="harness flops",
                                description="Count one training step's and one batch-1 inference's FLOPs.")
    p.add_argument("--entry-dir", type=Path, default=Path("/entry"))
    p.add_argument("--builder", required=True, help="module:function returning the untrained model")
    p.add_argument("--framework", default="pytorch", help="the manifest's framework name (PyTorch only)")
    p.add_argument("--input-shape", type=_shape, required=True, help="one item's shape, e.g. 1,28,28")
    p.add_argument("--num-classes", type=int, required=True)
    p.add_argument("--batch", type=int, required=True, help="the training step's global batch size")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("/flops"))
    return p.parse_args(argv)


def _bytes_counter():
    import torch  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._python_dispatch import TorchDispatchMode  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._pytree import tree_flatten  # lazy: optional (torch: only in images with PyTorch)

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


def count(entry_dir: Path, builder: str, input_shape: list[int], num_classes: int, batch: int) -> dict:
    import torch  # lazy: optional (torch: only in images with PyTorch)
    import torch.nn.functional as F  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils.flop_counter import FlopCounterMode  # lazy: optional (torch: only in images with PyTorch)

    BytesTouched = _bytes_counter()
    build = import_builder(entry_dir, builder)
    try:
        model = build()
    except Exception as exc:
        raise HarnessError(f"the builder {builder} failed: {type(exc).__name__}: {exc}") from None
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
    return {"batch_size": batch, "parameters": int(params), "train_step": train, "inference_item": infer,
            "torch": torch.__version__}


def run(args: argparse.Namespace) -> int:
    if args.framework != "pytorch":
        raise HarnessError(f"FLOPs are counted with torch.utils.flop_counter, for PyTorch models; "
                           f"this entry's framework is '{args.framework}'")
    if args.batch < 1 or args.num_classes < 1 or args.threads < 1:
        raise HarnessError("--batch, --num-classes and --threads must be >= 1")
    import torch  # lazy: optional (torch: only in images with PyTorch)

    torch.set_num_threads(args.threads)
    counted = count(args.entry_dir, args.builder, args.input_shape, args.num_classes, args.batch)
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(counted, sort_keys=True) + "\n")
    os.replace(tmp, args.out / RESULT_FILE)
    return 0


def main(argv: list[str]) -> int:
    return run(parse_args(argv))
