"""Aligned weights: do two runs' crossing checkpoints come from one starting point?

Two networks trained from different runner-drawn seeds start from unrelated random
weights and end with unrelated filters; two runs that start from one shipped network (with
noise, a fresh head, a few steps of genuine training) keep much of it. Compared tensor by
tensor, the second pair is alike and the first is not. Hidden units can be permuted without
changing what a network computes, so an entry could hide a shared start behind a per-seed
permutation: the units are aligned first, layer after layer, and only then measured.

The chain is read from the checkpoints alone, with no knowledge of the entry's code: the
weight tensors (two or more dimensions) in checkpoint order, in the framework's layout made
PyTorch's (``[out, in, ...]``). The output units of each weight of run ``b`` are matched to
run ``a``'s by the similarity of their incoming weights (an optimal assignment,
``scipy.optimize.linear_sum_assignment``), and that permutation is applied to the next
weight's input dimension when it has as many units, or a multiple of them (a flatten between
a convolution and a linear layer: the input is then ``units x spatial``, channel-major in
PyTorch and MXNet, channel-last in TensorFlow). The last weight's outputs are the task's
classes and are never permuted; a weight with more output units than ``MAX_UNITS`` (an
embedding table) is compared as it is. Then each weight's similarity is the Pearson
correlation of the two tensors (a cosine after removing their means, so that no offset makes
two tensors alike), and the overall figure is their mean weighted by size. One-dimensional
tensors (biases, normalisation scales and statistics) are left out: a positive running
variance is "alike" in every network.

A permuted copy of a network is matched exactly (its figure is 1); the figures of honest
runs and the limit are the task's (``Task.cross_seed``, with the evidence in the task's
folder).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from runner.frameworks import FRAMEWORKS

MAX_UNITS = 4096  # above: no assignment (its cost grows as the cube of the units)
# A smaller weight is measured in the overall figure but not judged alone: matching a few
# units with a few inputs each finds likeness by chance (two random 32 x 9 first layers
# align to about 0.5).
MIN_ELEMENTS = 1024


@dataclass(frozen=True)
class LayerSimilarity:
    name: str
    shape: tuple[int, ...]  # in PyTorch's layout
    similarity: float  # Pearson correlation of the aligned tensors
    aligned: bool  # its output units were matched


@dataclass(frozen=True)
class WeightsComparison:
    overall: float | None  # size-weighted mean of the layers' similarities
    layers: tuple[LayerSimilarity, ...] = ()
    problem: str | None = None  # why the two could not be compared

    @property
    def highest(self) -> LayerSimilarity | None:
        """The most alike layer that is judged alone: ``MIN_ELEMENTS`` or more, and not the
        last (the classes' layer, whose inputs are aligned: independent runs that learned
        one task read their aligned features into the classes alike)."""
        judged = [layer for layer in self.layers[:-1] if int(np.prod(layer.shape)) >= MIN_ELEMENTS]
        return max(judged, key=lambda layer: layer.similarity, default=None)

    def to_dict(self) -> dict:
        return {"overall": self.overall, "problem": self.problem,
                "layers": [{**asdict(layer), "shape": list(layer.shape)} for layer in self.layers]}


def keeps_channel_last(framework: str) -> bool:
    """The framework keeps Keras' ``[..., in, out]`` weights and flattens channel-last (as its
    declaration says); a name no framework declares (a result's, read as data) does not."""
    declared = FRAMEWORKS.get(framework)
    return declared is not None and declared.channel_last_weights


def torch_layout(value: np.ndarray, framework: str) -> np.ndarray:
    """A weight in PyTorch's ``[out, in, ...]`` layout (Keras keeps ``[..., in, out]``)."""
    if keeps_channel_last(framework) and value.ndim >= 2:
        return np.moveaxis(value, (-1, -2), (0, 1))
    return value


def public_table(shape: tuple[int, ...], public_width: int | None) -> bool:
    """A ``[rows, public_width]`` table of more rows than columns: a declared public input's
    vectors (GloVe's), the same start in every run by design."""
    return public_width is not None and len(shape) == 2 and shape[-1] == public_width and shape[0] > public_width


def weights_of(tensors: list[tuple[str, np.ndarray]], framework: str,
               public_width: int | None = None) -> list[tuple[str, np.ndarray]]:
    """The chain's weights: tensors of two or more dimensions, in PyTorch's layout, float64.
    Keras' saved optimizer state (``optimizer/...``) is not the model's, nor a public table."""
    return [(name, torch_layout(np.asarray(value, dtype=np.float64), framework))
            for name, value in tensors if np.ndim(value) >= 2 and not name.startswith("optimizer")
            and not public_table(np.shape(value), public_width)]


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1) - a.mean(), b.reshape(-1) - b.mean()
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm > 0 else 0.0


def _row_correlations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[i, j]``: the correlation of ``a``'s unit i's incoming weights with ``b``'s unit j's."""
    a = a.reshape(len(a), -1)
    b = b.reshape(len(b), -1)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def load_solver() -> None:
    """Import the assignment solver now (scipy.optimize: about half a second in a fresh
    process): ``runner reproduce`` does it while it measures the host's load, not at the runs' end."""
    from scipy.optimize import linear_sum_assignment  # lazy: heavy (scipy) # noqa: F401


def match_units(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``perm`` such that ``b[perm]`` puts b's units in the order of a's best matches."""
    from scipy.optimize import linear_sum_assignment  # lazy: heavy (scipy)

    rows, cols = linear_sum_assignment(_row_correlations(a, b), maximize=True)
    return cols[np.argsort(rows)]


def permute_inputs(b: np.ndarray, perm: np.ndarray | None, channel_last: bool) -> np.ndarray:
    """``b`` with its input dimension in the order ``perm`` gives the previous layer's units;
    an input ``units x spatial`` wide (a flatten) is permuted by unit; otherwise unchanged."""
    if perm is None or b.ndim < 2:
        return b
    units, width = len(perm), b.shape[1]
    if width == units:
        return b[:, perm]
    if width % units or b.ndim != 2:
        return b
    spatial = width // units
    if channel_last:
        return b.reshape(len(b), spatial, units)[:, :, perm].reshape(b.shape)
    return b.reshape(len(b), units, spatial)[:, perm, :].reshape(b.shape)


def compare(a: list[tuple[str, np.ndarray]], b: list[tuple[str, np.ndarray]], framework: str,
            public_width: int | None = None) -> WeightsComparison:
    """Two checkpoints' tensors (name, array) in checkpoint order, aligned and compared
    (``public_width``: the task's public tables, left out)."""
    wa, wb = weights_of(a, framework, public_width), weights_of(b, framework, public_width)
    if [(n, w.shape) for n, w in wa] != [(n, w.shape) for n, w in wb]:
        return WeightsComparison(None, problem="the two checkpoints do not hold the same tensors")
    if not wa:
        return WeightsComparison(None, problem="the checkpoints hold no weight of two or more dimensions")
    layers, perm = [], None
    for k, ((name, x), (_, y)) in enumerate(zip(wa, wb)):
        y = permute_inputs(y, perm, keeps_channel_last(framework))
        last = k == len(wa) - 1
        if not last and 2 <= len(x) <= MAX_UNITS:
            perm = match_units(x, y)
            y = y[perm]
        else:
            perm = None
        layers.append(LayerSimilarity(name, tuple(x.shape), round(correlation(x, y), 6), perm is not None))
    sizes = np.array([x.size for _, x in wa], dtype=np.float64)
    overall = float(np.dot(sizes, [layer.similarity for layer in layers]) / sizes.sum())
    return WeightsComparison(round(overall, 6), tuple(layers))
