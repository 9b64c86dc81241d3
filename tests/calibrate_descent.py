"""Print how far honest runs travel from the runner's start: the evidence behind ``Task.descent``.

    python tests/calibrate_descent.py RESULT_FOLDER...

For each signed result of an entry run from the runner's initial weights, each checkpoint the
entry wrote (``output/checkpoints/*``, in the order it asked for them) and its final model:
the cosine similarity of every drawn tensor with its initial value (drawn again from the
run's ``init/init.json``), the size-weighted overall figure and the least of the tensors judged
alone at the task's limit. A developer's tool for the task's ``calibration.md``: it loads
checkpoints of honest runs with the framework on the host (PyTorch ``weights_only``, Keras'
``.keras`` through h5py, MXNet's ``.params`` when MXNet is installed).
"""

from __future__ import annotations

import io
import json
import re
import sys
import zipfile
from pathlib import Path

import numpy as np

from runner.initial_weights import DRAWN, redraw
from runner.score.descent import measure, output_layer
from runner.tasks import get_task


def tensors(path: Path) -> dict[str, np.ndarray]:
    if path.suffix == ".keras":
        import h5py

        found = {}
        with zipfile.ZipFile(path) as archive, h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r") as h5:
            h5.visititems(lambda n, o: found.__setitem__(n, np.asarray(o[()])) if isinstance(o, h5py.Dataset) else None)
        return found
    if path.suffix == ".params":
        import mxnet as mx

        return {k.split(":", 1)[-1]: v.asnumpy() for k, v in mx.nd.load(str(path)).items()}
    import torch

    return {k: v.float().numpy() for k, v in torch.load(path, map_location="cpu", weights_only=True).items()
            if v.is_floating_point()}


def epoch_of(path: Path) -> int:
    found = re.findall(r"\d+", path.stem)
    return int(found[-1]) if found else 0


def main(folders: list[str]) -> int:
    for folder in map(Path, folders):
        result = json.loads((folder / "result.json").read_text())
        init = json.loads((folder / "init" / "init.json").read_text())
        listed, values = redraw(init)
        drawn = [t.name for t in listed if t.role in DRAWN]
        limit = get_task(result["task"]["id"]).descent.similarity
        crossing = result["training"].get("crossing")
        print(f"{folder.name}  seed {result['seed']}  crossing at evaluation {crossing}  limit {limit}")
        models = sorted((folder / "output" / "checkpoints").glob("*"), key=epoch_of)
        final = folder / "output" / result["entry"].get("weights", "model/weights.pt")
        models += [p for p in (folder / "output" / "model").glob("*") if p.is_file()] if not final.is_file() else [final]
        for path in models:
            m = measure(list(tensors(path).items()), values, drawn, limit, overall_only=output_layer(listed))
            judged = [r["cosine"] for r in m["tensors"] if r["judged"] and r["cosine"] is not None]
            per = " ".join(f"{r['cosine']:.2f}" for r in m["tensors"])
            dist = " ".join(f"{r['distance']:.2f}" for r in m["tensors"])
            print(f"  {path.relative_to(folder)}: overall {m['overall']:.3f}  least judged "
                  f"{min(judged) if judged else float('nan'):.3f}  per tensor {per}  distance {dist}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
