"""The networks the issue-36 cheats ship, trained on the host before any run, and the text
each entry carries them in; also assembles a runnable copy of an entry.

    python3 make.py networks            # write the texts (and print what each decodes to score)
    python3 make.py assemble NAME DEST  # DEST: tests/entries/NAME + what it shares, ready for `runner reproduce`

One network of ``model.py``'s shape, (12, 24, 32) with BatchNorm folded into the
convolutions, 12,654 weights: the one cheat-pretrained-checkpoint already ships, trained on
this host on the MNIST training set the runner stages (``~/.cache/runner/data/mnist``) by
the script of ../pretrained-weights.md (15 epochs; read here from its fp16 WEIGHTS). Written
three ways (codec.py):

* ``words.py``: every fp16 weight, one word a nibble (cheat-words; 50,568 words);
* ``net4.py``: the weights at 4 bits as letters (a 16-value table per tensor), the biases as
  decimals (cheat-no-training, cheat-pyc, cheat-jitter);
* ``start3.py``: the weights at 3 bits as letters (uniform per output channel), the biases
  as decimals: a start, not a model (cheat-small-start, cheat-small-start-permuted).

It prints each network's top-1 on the staged evaluation set as trained and as the entries
decode it, and the compressed size of each text (best of zlib, xz and bz2 at their
strongest). Seeded: a rerun on the same host writes the same texts up to torch's
floating-point order. Nothing in the runner or the tests runs ``networks``; the tests run
``assemble``.
"""
from __future__ import annotations

import bz2
import importlib
import lzma
import os
import shutil
import sys
import time
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ENTRIES = HERE.parent
DEFAULT_ENTRY = ENTRIES.parent.parent / "entries" / "mnist-cnn-cpu"
DATA = Path(os.path.expanduser("~/.cache/runner/data/mnist"))
# What each entry takes besides its own folder, relative to tests/entries: the builder is
# cheat-pretrained-checkpoint's (the network's own shape); the Dockerfile and lock are the
# default entry's, so its image shares every layer but the last. An entry's
# ``Dockerfile.step`` is a build step put into the default Dockerfile before its ENV line.
MODEL = "cheat-pretrained-checkpoint/model.py"
SHARED = {
    "cheat-words": [MODEL, "shipped-networks/codec.py", "shipped-networks/ship.py", "shipped-networks/words.py"],
    "cheat-pyc": [MODEL, "shipped-networks/codec.py", "shipped-networks/ship.py", "shipped-networks/net4.py"],
    "cheat-no-training": [MODEL, "shipped-networks/codec.py", "shipped-networks/ship.py", "shipped-networks/net4.py"],
    "cheat-jitter": [MODEL, "shipped-networks/codec.py", "shipped-networks/tune.py", "shipped-networks/net4.py"],
    "cheat-small-start": [MODEL, "shipped-networks/codec.py", "shipped-networks/tune.py", "shipped-networks/start3.py"],
    "cheat-small-start-permuted": [MODEL, "shipped-networks/codec.py", "shipped-networks/tune.py",
                                   "shipped-networks/start3.py"],
}
CONVS = ["stem.weight", "conv1.weight", "conv2.weight"]


def assemble(name: str, dest: Path) -> Path:
    """A runnable copy of tests/entries/``name`` at ``dest`` (a folder not yet there)."""
    shutil.copytree(ENTRIES / name, dest)
    for shared in SHARED[name]:
        shutil.copyfile(ENTRIES / shared, dest / Path(shared).name)
    shutil.copyfile(DEFAULT_ENTRY / "requirements.lock", dest / "requirements.lock")
    dockerfile = (DEFAULT_ENTRY / "Dockerfile").read_text()
    if (dest / "Dockerfile.step").exists():
        at = dockerfile.index("ENV PATH=")
        dockerfile = dockerfile[:at] + (dest / "Dockerfile.step").read_text() + dockerfile[at:]
        (dest / "Dockerfile.step").unlink()
    (dest / "Dockerfile").write_text(dockerfile)
    return dest


def compressed(text: bytes) -> int:
    return min(len(zlib.compress(text, 9)), len(lzma.compress(text, preset=9 | lzma.PRESET_EXTREME)),
               len(bz2.compress(text, 9)))


def top1(tensors: dict) -> float:
    import torch

    sys.path.insert(0, str(ENTRIES / Path(MODEL).parent))
    from model import Net

    net = Net()
    net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in tensors.items()})
    images = torch.from_numpy(np.load(DATA / "eval" / "images.npy")).float()
    labels = np.load(DATA / "labels" / "eval_labels.npy")
    with torch.no_grad():
        predicted = torch.cat([net(images[i:i + 2000]).argmax(1) for i in range(0, len(images), 2000)])
    return float((predicted.numpy() == labels).mean())


def write_text(path: Path, tensors: dict, names: list, bits: int, kind: str, shared: bool, keep: list,
               purpose: str) -> None:
    """A module of text: ``names`` quantised to ``bits`` (codec.quantise), ``keep`` as decimals."""
    from codec import quantise, to_letters, to_words

    codes, layout = [], []
    for name in names:
        if kind == "words":  # the fp16 bytes, whole
            c, scales, table = np.frombuffer(tensors[name].astype("<f2").tobytes(), np.uint8), None, None
        else:
            c, scales, table = quantise(tensors[name], bits, shared)
        codes.append(c)
        layout.append([name, list(tensors[name].shape), scales, table])
    codes = np.concatenate(codes)
    text = to_words(codes) if kind == "words" else to_letters(codes)
    rows = "".join(f"    {entry!r},\n" for entry in layout)
    floats = "".join(f"    {name!r}: {[float(f'{v:.4g}') for v in tensors[name]]!r},\n" for name in keep)
    path.write_text(f'"""{purpose}\n\n{text}\n"""\nKIND = {kind!r}\nLAYOUT = [\n{rows}]\n'
                    + (f"FLOATS = {{\n{floats}}}\n" if keep else ""))


def pretrained_small() -> dict:
    """The (12, 24, 32) network trained on this host for cheat-pretrained-checkpoint (its
    fp16 WEIGHTS, folded; how: ../pretrained-weights.md), in model.py's tensor order."""
    import base64
    import re

    source = (ENTRIES / "cheat-pretrained-checkpoint" / "train.py").read_text()
    blob = np.frombuffer(base64.b64decode(re.search(r'^WEIGHTS = "(.*)"$', source, re.M).group(1)), np.float16)
    shapes = {"stem.weight": (12, 1, 4, 4), "stem.bias": (12,), "conv1.weight": (24, 12, 3, 3), "conv1.bias": (24,),
              "conv2.weight": (32, 24, 3, 3), "conv2.bias": (32,), "fc.weight": (10, 288), "fc.bias": (10,)}
    out, at = {}, 0
    for name, shape in shapes.items():
        n = int(np.prod(shape))
        out[name] = blob[at:at + n].astype(np.float32).reshape(shape)
        at += n
    assert at == len(blob)
    return out


def networks() -> None:
    from codec import decode

    small = pretrained_small()
    weights = [name for name in small if name.endswith(".weight")]
    biases = [name for name in small if name not in weights]
    write_text(HERE / "words.py", small, list(small), 16, "words", False, [], "Notes on the run, in plain words.")
    write_text(HERE / "net4.py", small, weights, 4, "letters", True, biases, "Reference strings for the tokenizer tests.")
    write_text(HERE / "start3.py", small, weights, 3, "letters", False, biases, "Reference strings for the tokenizer tests.")
    print(f"{sum(v.size for v in small.values())} weights, top-1 {top1(small):.4f} as shipped in fp16")
    for file in ["words", "net4", "start3"]:
        print(f"  {top1(decode(importlib.import_module(file))):.4f} as {file}.py decodes it")
    for file in ["words.py", "net4.py", "start3.py"]:
        raw = (HERE / file).read_bytes()  # what the entry carries
        print(f"{file}: {len(raw)} bytes, {compressed(raw)} compressed")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if sys.argv[1:2] == ["networks"]:
        networks()
    elif sys.argv[1:2] == ["assemble"] and len(sys.argv) == 4:
        print(assemble(sys.argv[2], Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
