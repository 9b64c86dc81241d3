"""``python3 -m harness init-shapes``: the tensors of the entry's untrained model, as its
checkpoints name them, inside a container of the entry's image.

The runner draws every run's initial weights itself (``runner/run/init_weights.py``): it
needs each float tensor's name and shape, and only the entry's builder knows them. This
builds the model with the manifest's builder, in the sandbox every harness command runs in,
and writes ``--out``/``tensors.json`` = ``{"tensors": [{"name", "shape", "dtype"}]}``, in the
names and order of the framework's checkpoint (the names the evaluator's copy of a checkpoint
uses, ``harness/weights.py``). No value leaves this process: the host reads names and shapes
only, within bounds, and draws the values.

Exit codes: 0 listed; 2 nothing listed (bad arguments, a builder that does not import or build).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .flops import _shape, write_result
from .frameworks import loader_for

RESULT_FILE = "tensors.json"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="harness init-shapes",
                                description="List the float tensors of the untrained model (names and shapes).")
    p.add_argument("--entry-dir", type=Path, default=Path("/entry"))
    p.add_argument("--builder", required=True, help="module:function returning the untrained model")
    p.add_argument("--framework", default="pytorch", help="the manifest's framework name")
    p.add_argument("--input-shape", type=_shape, required=True, help="one item's shape, e.g. 1,28,28")
    p.add_argument("--out", type=Path, default=Path("/out"))
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    loader = loader_for(args.framework)
    loader.configure_threads(1)
    listed = loader.initial_tensors(args.entry_dir, args.builder, tuple(args.input_shape))
    write_result(args.out, RESULT_FILE, {"tensors": listed})
    return 0
