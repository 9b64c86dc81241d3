"""``python3 -m harness flops``: count the FLOPs (and bytes touched) of one training step
and one batch-1 inference of the entry's model, inside a container of the entry's image.

The runner's roofline study runs this in the sandbox (no network, non-root, read-only root,
no capabilities) so that no entry code runs on the host. It builds the untrained model with
the manifest's builder and counts with the framework's own counter, its loader's
``count_flops`` (PyTorch's: ``torch.utils.flop_counter.FlopCounterMode``):
matrix products and convolutions (a multiply-add is 2 FLOPs); elementwise work (activations,
norms, the optimiser) is not counted, as in the usual MLPerf/DAWNBench FLOP figures. Bytes are
every tensor each ATen op reads and writes, as if nothing stayed in cache: an upper bound on
memory traffic, so the arithmetic intensity it gives is a lower bound.

Writes ``--out``/``flops.json``. The host treats every number in it as the entry's claim:
it parses them with bounds and says in the study that the entry's own image counted them.

Exit codes: 0 counted; 2 nothing counted (bad arguments, a framework without a counter,
a builder that does not import or build).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from .errors import HarnessError
from .frameworks import loader_for, loaders

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
    p.add_argument("--framework", default="pytorch", help="the manifest's framework name (its loader counts)")
    p.add_argument("--input-shape", type=_shape, required=True, help="one item's shape, e.g. 1,28,28")
    p.add_argument("--num-classes", type=int, required=True)
    p.add_argument("--batch", type=int, required=True, help="the training step's global batch size")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("/flops"))
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    loader = loader_for(args.framework)
    if not hasattr(loader, "count_flops"):
        counting = [name for name in loaders() if hasattr(loader_for(name), "count_flops")]
        raise HarnessError(f"FLOPs are counted by a framework's own counter, for {', '.join(counting)} models; "
                           f"this entry's framework is '{args.framework}'")
    if args.batch < 1 or args.num_classes < 1 or args.threads < 1:
        raise HarnessError("--batch, --num-classes and --threads must be >= 1")
    loader.configure_threads(args.threads)
    counted = loader.count_flops(args.entry_dir, args.builder, args.input_shape, args.num_classes, args.batch)
    write_result(args.out, RESULT_FILE, counted)
    return 0


def write_result(folder: Path, name: str, data: dict) -> None:
    """``folder/name`` as JSON, whole or not at all (renamed into place once written)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (name + ".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True) + "\n")
    os.replace(tmp, folder / name)


def main(argv: list[str]) -> int:
    return run(parse_args(argv))
