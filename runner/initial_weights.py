"""The runner's draw of a run's initial weights: roles, fans, values and their digest
(``runner.run.init_weights`` lists the model's tensors and hands the values to training;
``runner.score.descent`` and ``runner verify`` draw them again from ``init.json``).

An entry that carries a network trained elsewhere (in its code, its words, a wheel) and
starts training from it reaches the threshold sooner than honest training can. So the runner,
not the entry, owns the starting point: for every run it draws the initial value of every
float tensor of the entry's model from its own generator, seeded by the run's seed, and hands
them to the training container read-only (``/init/weights.npz``, with ``runner_init.py``,
the one-line loader of ``init_loader/``). The run contract says training starts from them;
``runner.score.descent`` then checks that the scored model descends from them.

* **Values** are drawn on the host, a tensor at a time, each from its own stream:
  ``numpy.random.Generator(PCG64(SeedSequence(seed, spawn_key=(k,))))`` with ``k`` the first
  8 bytes of the tensor name's sha256, in a standard distribution for its role (``ROLES``),
  as float32. Anyone with ``init.json`` (seed, names, shapes, roles) draws the same values:
  ``runner verify`` does, and compares the digest.
* **Roles** default by the framework's conventions (``default_role``): the framework's default
  initialiser for tensors of two or more dimensions (fan-in from its weight layout), ones for
  normalisation scales and variances, zeros for biases, shifts and means. An entry may choose
  another role per tensor from the same small vocabulary (``initial_weights:`` in
  ``entry.yaml``, a glob on names): a few bits per tensor, never a value. Two roles are not
  drawn: ``public`` (a tensor the task's public input supplies: SQuAD's GloVe vectors) and
  ``data`` (a tensor the entry computes from the training data in the run, such as a
  whitening layer); both are named in the report, and with the constant roles they may hold
  only ``UNDRAWN_SHARE`` of the model's elements.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from runner.frameworks import FRAMEWORKS

INIT_DIR = "init"  # in the result folder; mounted read-only in the training containers
INIT_RECORD = "init.json"
INIT_WEIGHTS = "weights.npz"
GENERATOR = "numpy PCG64, SeedSequence(seed, spawn_key=(first 8 bytes of sha256(name) as a big-endian integer,))"
MAX_TENSORS = 4096
MAX_ELEMENTS = 4 * 10**8  # far over any DAWNBench model (ResNet-50: 25.6M); a hostile init.json draws no more

ROLES = {
    "fan_in_uniform": "U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for convolution and linear weights",
    "fan_in_normal": "N(0, 2/fan_in): He normal",
    "fan_out_normal": "N(0, 2/fan_out): He normal in fan-out mode (torchvision's ResNets)",
    "glorot_uniform": "U(-sqrt(6/(fan_in+fan_out)), +sqrt(6/(fan_in+fan_out))): Keras' default kernel, MXNet's Xavier",
    "glorot_normal": "N(0, 2/(fan_in+fan_out)): Glorot normal",
    "normal": "N(0, 1): PyTorch's default embedding",
    "zeros": "0: biases, normalisation shifts and running means",
    "ones": "1: normalisation scales and running variances",
    "public": "not drawn: the task's declared public input (its word vectors), loaded by the entry",
    "data": "not drawn: computed from the training data in the run (e.g. a whitening layer)",
}
DRAWN = ("fan_in_uniform", "fan_in_normal", "fan_out_normal", "glorot_uniform", "glorot_normal", "normal")  # random: judged by descent
CONSTANT = ("zeros", "ones")
UNDRAWN = ("public", "data")
# Constant, data-computed tensors together may hold at most this share of the model's
# elements (public inputs aside): normalisation and biases are about 1 % of the project's models.
UNDRAWN_SHARE = 0.05


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    role: str

    @property
    def size(self) -> int:
        return math.prod(self.shape)


# -- roles ----------------------------------------------------------------------------------

def _last(name: str) -> str:
    return name.replace("/", ".").rsplit(".", 1)[-1].lower()


def default_role(name: str, shape: tuple[int, ...], framework: str) -> str:
    """The framework's convention for a tensor of this name and shape."""
    if len(shape) >= 2:
        return FRAMEWORKS[framework].default_init
    last = _last(name)
    if "/vars/" in name:  # Keras' h5 names: layers/<layer>/vars/<i>; a normalisation's are gamma, beta, mean, variance
        layer, _, index = name.rpartition("/vars/")
        if "normalization" in layer.rsplit("/", 1)[-1] and index.isdigit():
            return ("ones", "zeros", "zeros", "ones")[int(index) % 4]
        return "zeros"
    if last in ("weight", "gamma", "scale", "running_var", "moving_var", "moving_variance"):
        return "ones"
    return "zeros"


def assign_roles(listed: list[tuple[str, tuple[int, ...]]], framework: str,
                 declared: tuple[tuple[str, str], ...]) -> list[Tensor]:
    """Each tensor with its role: the first declared glob that matches it, else the default."""
    tensors = []
    for name, shape in listed:
        role = next((r for pattern, r in declared if fnmatch.fnmatchcase(name, pattern)), None)
        tensors.append(Tensor(name, tuple(shape), role or default_role(name, tuple(shape), framework)))
    return tensors


def undrawn_problem(tensors: list[Tensor]) -> str | None:
    """Why the roles leave too much of the model to anything but the runner's draw."""
    if not any(t.role in DRAWN for t in tensors):
        return ("the model has no tensor the runner draws at random (its builder's model holds "
                f"{len(tensors)} float tensor(s)): it cannot start from the runner's initial weights")
    total = sum(t.size for t in tensors if t.role != "public")
    undrawn = [t for t in tensors if t.role in CONSTANT or t.role == "data"]
    share = sum(t.size for t in undrawn) / total if total else 0.0
    if share <= UNDRAWN_SHARE:
        return None
    largest = sorted(undrawn, key=lambda t: -t.size)[:4]
    named = ", ".join(f"{t.name} ({t.role}, {t.size:,})" for t in largest)
    return (f"{share:.1%} of the model's elements are not drawn at random by the runner (constant or computed "
            f"from data; at most {UNDRAWN_SHARE:.0%}): {named}")


# -- fans and draws ---------------------------------------------------------------------------

def fans(shape: tuple[int, ...], framework: str) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight in the framework's layout: ``[out, in, *kernel]``, or
    Keras' ``[*kernel, in, out]``."""
    if len(shape) < 2:
        return max(1, shape[0] if shape else 1), max(1, shape[0] if shape else 1)
    if FRAMEWORKS[framework].channel_last_weights:
        receptive = math.prod(shape[:-2])
        return shape[-2] * receptive, shape[-1] * receptive
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def stream(seed: int, name: str) -> np.random.Generator:
    key = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(key,))))


def draw_one(t: Tensor, seed: int, framework: str) -> np.ndarray | None:
    """The tensor's initial value (float32); None for a role that is not drawn."""
    if t.role in UNDRAWN:
        return None
    if t.role == "zeros":
        return np.zeros(t.shape, np.float32)
    if t.role == "ones":
        return np.ones(t.shape, np.float32)
    fan_in, fan_out = fans(t.shape, framework)
    rng = stream(seed, t.name)
    if t.role == "fan_in_uniform":
        bound = 1.0 / math.sqrt(fan_in)
        values = rng.uniform(-bound, bound, t.shape)
    elif t.role == "fan_in_normal":
        values = rng.normal(0.0, math.sqrt(2.0 / fan_in), t.shape)
    elif t.role == "fan_out_normal":
        values = rng.normal(0.0, math.sqrt(2.0 / fan_out), t.shape)
    elif t.role == "glorot_uniform":
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        values = rng.uniform(-bound, bound, t.shape)
    elif t.role == "glorot_normal":
        values = rng.normal(0.0, math.sqrt(2.0 / (fan_in + fan_out)), t.shape)
    elif t.role == "normal":
        values = rng.normal(0.0, 1.0, t.shape)
    else:
        raise ValueError(f"unknown role {t.role!r}")
    return values.astype(np.float32)


def draw(tensors: list[Tensor], seed: int, framework: str) -> dict[str, np.ndarray]:
    return {t.name: value for t in tensors if (value := draw_one(t, seed, framework)) is not None}


def digest(values: dict[str, np.ndarray]) -> str:
    """The drawn values' sha256: names, shapes and float32 bytes, in order."""
    h = hashlib.sha256()
    for name, value in values.items():
        h.update(f"{name}\0{list(value.shape)}\0".encode())
        h.update(np.ascontiguousarray(value, dtype="<f4").tobytes())
    return h.hexdigest()


# -- the record (init.json) -----------------------------------------------------------------

def record(tensors: list[Tensor], seed: int, framework: str, values: dict[str, np.ndarray]) -> dict:
    return {
        "seed": seed, "framework": framework, "generator": GENERATOR,
        "tensors": [{"name": t.name, "shape": list(t.shape), "role": t.role} for t in tensors],
        "sha256": digest(values),
        "drawn_elements": sum(t.size for t in tensors if t.role in DRAWN),
        "undrawn": [{"name": t.name, "role": t.role, "elements": t.size} for t in tensors if t.role in UNDRAWN],
    }


def tensors_of(data: object) -> list[Tensor]:
    """The tensors of an ``init.json`` (untrusted: every field checked); ValueError when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("tensors"), list) or len(data["tensors"]) > MAX_TENSORS:
        raise ValueError("init.json lists no tensors")
    found, total = [], 0
    for t in data["tensors"]:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or t.get("role") not in ROLES:
            raise ValueError("a tensor of init.json is malformed")
        shape = t.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and 0 < d for d in shape) or not shape:
            raise ValueError(f"tensor {t['name'][:80]!r} of init.json has no shape")
        total += math.prod(shape)
        if total > MAX_ELEMENTS:
            raise ValueError("init.json lists more elements than any model")
        found.append(Tensor(t["name"], tuple(shape), t["role"]))
    return found


def redraw(data: dict) -> tuple[list[Tensor], dict[str, np.ndarray]]:
    """The tensors and values an ``init.json`` describes, drawn again (``runner verify``)."""
    tensors = tensors_of(data)
    seed, framework = data.get("seed"), data.get("framework")
    if type(seed) is not int or seed < 0 or framework not in FRAMEWORKS:
        raise ValueError("init.json has no seed or framework")
    return tensors, draw(tensors, seed, framework)
