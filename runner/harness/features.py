"""``python3 -m harness features``: the penultimate features of the entry's trained model and
of a randomly initialised copy, inside a container of the entry's image.

``runner study generalization`` runs this in the sandbox (no network, non-root, read-only
root, no capabilities) for its transfer measure: the host trains a linear head on the
features of another task's images and compares it with the same head on the random copy's
features, which shows what training learned. The trained model is the manifest's builder
with the final weights loaded by the evaluator's own loader (``frameworks/pytorch.py``:
``weights_only``, strict); the random copy is the builder called again after seeding
torch's, numpy's and Python's generators with the runner's ``--random-seed``. The features
are the input of the model's last layer (the last module holding parameters that a forward
pass calls, found by a first pass over two items), captured by a forward pre-hook and
flattened to one row per item; both models are read at the same module.

Writes ``--out``/``<trained|random>-<set>.npy`` (float32, items x features) for every
``--inputs NAME=FOLDER`` (``FOLDER/images.npy``, N x C x H x W uint8), then ``features.json``
(the layer's name, the width, torch's version). The host reads every array with bounds: they
are the entry's figures (its builder runs here).

Exit codes: 0 written; 2 nothing written (a framework other than PyTorch, a builder that does
not build, weights that do not load, no layer with parameters).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .errors import HarnessError
from .flops import write_result
from .frameworks import import_builder, loader_for

RESULT_FILE = "features.json"
BATCH = 500
MODELS = ("trained", "random")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="harness features",
                                description="Penultimate features of the trained model and of a random copy.")
    p.add_argument("--entry-dir", type=Path, default=Path("/entry"))
    p.add_argument("--builder", required=True, help="module:function returning the untrained model")
    p.add_argument("--framework", default="pytorch", help="the manifest's framework name (PyTorch only)")
    p.add_argument("--weights", type=Path, required=True, help="the final model's state_dict")
    p.add_argument("--inputs", nargs="+", required=True, help="NAME=FOLDER holding images.npy")
    p.add_argument("--random-seed", type=int, required=True, help="seeds the random copy's initialisation")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("/features"))
    return p.parse_args(argv)


def last_layer(model, sample) -> str:
    """The name of the last module holding parameters of its own that ``model``'s forward
    pass calls (on ``sample``)."""
    import torch  # lazy: optional (torch: only in images with PyTorch)

    called: list[str] = []
    hooks = [module.register_forward_pre_hook(lambda m, args, name=name: called.append(name))
             for name, module in model.named_modules() if any(True for _ in module.parameters(recurse=False))]
    try:
        with torch.no_grad():
            model(sample)
    finally:
        for hook in hooks:
            hook.remove()
    if not called:
        raise HarnessError("the model's forward pass calls no module with parameters: no last layer to read")
    return called[-1]


def features(model, layer: str, images: np.ndarray) -> np.ndarray:
    """Each item's input to ``layer``, flattened (float32, items x features)."""
    import torch  # lazy: optional (torch: only in images with PyTorch)

    seen: list = []
    module = dict(model.named_modules())[layer]

    def capture(_module, args):
        if not args or not isinstance(args[0], torch.Tensor):
            raise HarnessError(f"the last layer {layer} is not called with a tensor")
        seen[:] = [args[0].detach()]

    hook = module.register_forward_pre_hook(capture)
    rows = []
    try:
        with torch.no_grad():
            for i in range(0, len(images), BATCH):
                seen.clear()
                model(torch.from_numpy(np.ascontiguousarray(images[i:i + BATCH], dtype=np.float32)))
                if not seen:
                    raise HarnessError(f"the forward pass did not call the last layer {layer}")
                rows.append(seen[0].float().reshape(seen[0].shape[0], -1).cpu().numpy())
    finally:
        hook.remove()
    return np.concatenate(rows).astype(np.float32)


def random_copy(entry_dir: Path, builder: str, seed: int):
    """The builder's untrained model, initialised from ``seed``."""
    import random  # lazy: optional (with torch, for the random copy)

    import torch  # lazy: optional (torch: only in images with PyTorch)

    build = import_builder(entry_dir, builder)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    try:
        model = build()
    except Exception as exc:
        raise HarnessError(f"the builder {builder} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise HarnessError(f"{builder} returned a {type(model).__name__}, not a torch.nn.Module")
    return model.eval()


def _inputs(specs: list[str]) -> dict[str, np.ndarray]:
    sets = {}
    for spec in specs:
        name, _, folder = spec.partition("=")
        path = Path(folder) / "images.npy"
        if not name or not path.is_file():
            raise HarnessError(f"no inputs at {path} (--inputs NAME=FOLDER)")
        images = np.load(path, mmap_mode="r")
        if images.ndim != 4 or not len(images):
            raise HarnessError(f"{path} has shape {images.shape}; expected N x C x H x W")
        sets[name] = images
    return sets


def run(args: argparse.Namespace) -> int:
    if not getattr(loader_for(args.framework), "FEATURE_READER", None):
        raise HarnessError(f"features are read with a PyTorch forward hook; the harness has no feature reader "
                           f"for this entry's framework '{args.framework}'")
    if args.threads < 1:
        raise HarnessError("--threads must be >= 1")
    import torch  # lazy: optional (torch: only in images with PyTorch)

    from .model import load_model  # lazy: start-up (only when it is used)

    torch.set_num_threads(args.threads)
    sets = _inputs(args.inputs)
    native = load_model(args.entry_dir, args.builder, args.weights, args.framework).native
    if not isinstance(native, torch.nn.Module):  # a pytorch entry's loader made something else
        raise HarnessError(f"features are read from a PyTorch module; this entry's model is a {type(native).__name__}")
    trained = native.eval()
    models = {"trained": trained, "random": random_copy(args.entry_dir, args.builder, args.random_seed)}
    first = next(iter(sets.values()))
    sample = torch.from_numpy(np.ascontiguousarray(first[:2], dtype=np.float32))
    layer = last_layer(trained, sample)
    args.out.mkdir(parents=True, exist_ok=True)
    widths = set()
    for kind in MODELS:
        for name, images in sets.items():
            array = features(models[kind], layer, images)
            widths.add(array.shape[1])
            np.save(args.out / f"{kind}-{name}.npy", array)
    if len(widths) != 1:
        raise HarnessError(f"the trained model and its random copy give features of widths {sorted(widths)}")
    write_result(args.out, RESULT_FILE, {"layer": layer, "dim": widths.pop(), "torch": torch.__version__,
                                         "sets": sorted(sets)})
    return 0


def main(argv: list[str]) -> int:
    return run(parse_args(argv))
