"""The networks the issue-36 cheats ship, trained on the host before any run, and the text
each entry carries them in; also assembles a runnable copy of an entry.

    python3 make.py networks            # write the texts (and print what each decodes to score)
    python3 make.py assemble NAME DEST  # DEST: tests/entries/NAME + what it shares, ready for `runner reproduce`
    python3 make.py train SEED EPOCHS   # issue 44: one network of cheat-seed-networks' model (host cache)
    python3 make.py seed-networks       # issue 44: seed_networks.py and tokens_a/b/c.py from the three

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

Issue 44 (item 6) adds three networks of one narrower copy of the default entry's BN CNN
(``cheat-seed-networks/model.py``, (12, 24, 32), a linear head, 12,722 parameters), each
trained on the host from its own initialisation (``train 0|1|2 16``: seeds 0, 1, 2, 16 epochs of
../pretrained-weights.md's recipe in fp32, about 21 minutes for the three at once on the contended 2-core host;
99.46, 99.37, 99.31 % in fp16),
kept as ``seed_networks.py`` (fp16, base64: the netzoo wheel's source, tests/netzoo_wheel.py)
and written at 3 bits as letters (``tokens_a/b/c.py``, the BatchNorm scales and shifts and the
head's bias as decimals) for cheat-seed-networks and cheat-init-plus-network; ``warm.py`` is
those entries' train.py.

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
# Issue 44's (cheat-seed-networks' model.py: a narrower copy of the default entry's BN CNN;
# warm.py is their train.py, its ``--source`` in each entry.yaml; cheat-wheel-networks keeps
# its own lock, which pins the netzoo wheel).
SEED_MODEL = "cheat-seed-networks/model.py"
WARM = ("shipped-networks/warm.py", "train.py")
SEED_TEXTS = ["tokens_a.py", "tokens_b.py", "tokens_c.py"]  # network 0, 1, 2
SHARED.update({
    "cheat-seed-networks": ["shipped-networks/codec.py", WARM] + [f"shipped-networks/{t}" for t in SEED_TEXTS],
    "cheat-wheel-networks": [SEED_MODEL, "shipped-networks/codec.py", WARM],
    "cheat-init-plus-network": [SEED_MODEL, "shipped-networks/codec.py", WARM, "shipped-networks/tokens_a.py"],
    "cheat-init-plus-network-untrained": [SEED_MODEL, "shipped-networks/codec.py", WARM, "shipped-networks/tokens_a.py"],
})
CONVS = ["stem.weight", "conv1.weight", "conv2.weight"]


def assemble(name: str, dest: Path) -> Path:
    """A runnable copy of tests/entries/``name`` at ``dest`` (a folder not yet there)."""
    shutil.copytree(ENTRIES / name, dest)
    for shared in SHARED[name]:
        source, named = shared if isinstance(shared, tuple) else (shared, Path(shared).name)
        shutil.copyfile(ENTRIES / source, dest / named)
    if not (dest / "requirements.lock").exists():
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


# -- issue 44: three networks of one narrow BN CNN, each from its own initialisation --------------

TRAINED = Path(os.environ.get("TRAINED", os.path.expanduser("~/.cache/runner/issue44-networks")))  # the float networks (not committed)


def _seed_model():
    sys.path.insert(0, str(ENTRIES / Path(SEED_MODEL).parent))
    module = importlib.import_module("model")
    sys.path.pop(0)
    return module


def train_network(seed: int, epochs: int, out: Path) -> None:
    """cheat-seed-networks/model.py's Net (12, 24, 32; BatchNorm kept, 12,722 parameters)
    trained on the staged MNIST training set from torch's default initialisation under
    ``seed``: Nesterov SGD (lr 0.1, momentum 0.9, wd 5e-4), one-cycle over ``epochs``, batch
    128, label smoothing 0.1, random shifts of up to 2 pixels (../pretrained-weights.md's
    recipe, fp32). Saved as ``out`` (.npz of the state dict, floats only)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    net = _seed_model().Net()
    tx = torch.from_numpy(np.load(DATA / "train" / "images.npy"))
    ty = torch.from_numpy(np.load(DATA / "train" / "labels.npy"))
    batch = 128
    steps = epochs * (len(tx) // batch)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=steps, pct_start=0.2)

    def shift(x, k=2):
        n = x.shape[0]
        p = F.pad(x, (k, k, k, k))
        dx, dy, idx = torch.randint(0, 2 * k + 1, (n,)), torch.randint(0, 2 * k + 1, (n,)), torch.arange(28)
        rows = (dy[:, None] + idx[None]).view(n, 1, 28, 1).expand(n, 1, 28, 28 + 2 * k)
        cols = (dx[:, None] + idx[None]).view(n, 1, 1, 28).expand(n, 1, 28, 28)
        return torch.gather(torch.gather(p, 2, rows), 3, cols)

    started = time.time()
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(len(tx))
        for i in range(len(tx) // batch):
            idx = perm[i * batch:(i + 1) * batch]
            loss = F.cross_entropy(net(shift(tx[idx].float())), ty[idx], label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        state = {k: v.numpy().copy() for k, v in net.state_dict().items() if v.dtype == torch.float32}
        print(f"seed {seed} epoch {epoch + 1} {time.time() - started:.0f}s top-1 {seed_top1(state):.4f}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **state)


def seed_top1(tensors: dict, recalibrate: bool = False) -> float:
    """Top-1 on the staged evaluation set of model.py's Net holding ``tensors``;
    ``recalibrate``: its BatchNorm statistics estimated again on 20 training batches first
    (what cheat-seed-networks does)."""
    import torch

    net = _seed_model().Net()
    state = net.state_dict()
    state.update({k: torch.from_numpy(np.asarray(v, np.float32)) for k, v in tensors.items()})
    net.load_state_dict(state)
    if recalibrate:
        tx = torch.from_numpy(np.load(DATA / "train" / "images.npy"))
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.reset_running_stats()
                m.momentum = None  # a plain average
        net.train()
        with torch.no_grad():
            for i in range(20):
                net(tx[i * 256:(i + 1) * 256].float())
    net.eval()
    images = torch.from_numpy(np.load(DATA / "eval" / "images.npy")).float()
    labels = np.load(DATA / "labels" / "eval_labels.npy")
    with torch.no_grad():
        predicted = torch.cat([net(images[i:i + 2000]).argmax(1) for i in range(0, len(images), 2000)])
    return float((predicted.numpy() == labels).mean())


def seed_networks() -> None:
    """From the networks ``train`` wrote: ``seed_networks.py``, their fp16 bytes (base64; the
    netzoo wheel's source, tests/netzoo_wheel.py), and from those the three texts of
    cheat-seed-networks: conv and linear weights at 3 bits as letters (uniform per output
    channel), BatchNorm scales and shifts and the head's bias as decimals. Running statistics
    are not carried (the entries estimate them again)."""
    import base64

    from codec import decode

    networks, layout = [], None
    for index in range(len(SEED_TEXTS)):
        with np.load(TRAINED / f"net{index}.npz") as held:
            net = {k: held[k].astype(np.float16).astype(np.float32) for k in held.files if "running" not in k}
        layout = layout or [[k, list(v.shape)] for k, v in net.items()]
        networks.append(base64.b64encode(b"".join(v.astype("<f2").tobytes() for v in net.values())).decode())
        weights = [k for k in net if net[k].ndim > 1]
        text = SEED_TEXTS[index]
        write_text(HERE / text, net, weights, 3, "letters", False, [k for k in net if k not in weights],
                   "Reference strings for the tokenizer tests.")
        decoded = decode(importlib.import_module(text.removesuffix(".py")))
        raw = (HERE / text).read_bytes()
        print(f"{text}: network {index}, top-1 {seed_top1(net, True):.4f} in fp16, {seed_top1(decoded, True):.4f} at 3 bits "
              f"(statistics estimated again); {len(raw)} bytes, {compressed(raw)} compressed")
    rows = "".join(f"    {row!r},\n" for row in layout)
    blobs = "".join(f'    "{b}",\n' for b in networks)
    (HERE / "seed_networks.py").write_text(
        '"""The three networks of cheat-seed-networks as trained (make.py train 0|1|2 16, then\n'
        "seed-networks): fp16 bytes, base64, tensors in LAYOUT's order. The source of tokens_a/b/c.py\n"
        'and of the netzoo wheel (tests/netzoo_wheel.py); no entry carries this file."""\n'
        f"LAYOUT = [\n{rows}]\nNETWORKS = [\n{blobs}]\n")

if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if sys.argv[1:2] == ["networks"]:
        networks()
    elif sys.argv[1:2] == ["train"] and len(sys.argv) == 4:  # SEED EPOCHS: TRAINED/net<SEED>.npz
        train_network(int(sys.argv[2]), int(sys.argv[3]), TRAINED / f"net{sys.argv[2]}.npz")
    elif sys.argv[1:2] == ["seed-networks"]:
        seed_networks()
    elif sys.argv[1:2] == ["assemble"] and len(sys.argv) == 4:
        print(assemble(sys.argv[2], Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
