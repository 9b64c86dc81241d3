"""The checkpoint's float tensors, written for the host's cross-seed comparison.

The host never unpickles an entry's files, so it cannot read a checkpoint itself; the
evaluator, which loads it anyway, writes what it read (``checkpoint_tensors``, before any
permutation) as ``.npy`` files in checkpoint order, in their native dtype and in the order
their bytes have in memory (a channels-last convolution weight as ``[out, h, w, in]``, its
``"axes"`` named), with an index: ``OUT/n/weights.json`` = ``{"tensors": [{"name", "shape",
"dtype", "axes"?}], "bytes"}`` and ``OUT/n/weights/<k>.npy``. Only float tensors of one or more dimensions are written, up to
``MAX_BYTES`` in all (over it: the index alone, ``"too_large": true``). The entry's builder
runs in this process and could change what is written: the host checks that every tensor's
bytes occur in the checkpoint file it copied (``runner.score.weights_dump``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MAX_BYTES = 256 * 2**20  # a ResNet-50 (102 MB) and a DrQA reader with its word table (95 MB) fit
MAX_TENSORS = 4096


def channels_last(ndim: int) -> tuple[int, ...]:
    """The axes of a channels-last tensor in memory order (``[out, in, h, w]`` kept as
    ``[out, h, w, in]``): the one order besides C's that PyTorch saves weights in."""
    return (0, *range(2, ndim), 1)


def _native(value) -> tuple[np.ndarray, str, list[int] | None] | None:
    """(the tensor in its storage's order, its dtype's name, that order's axes when they are
    channels-last); None for what is not a float tensor."""
    if hasattr(value, "detach"):  # torch
        import torch  # lazy: optional (torch: only in images with PyTorch)

        t = value.detach().cpu()
        if not t.is_floating_point() or t.dim() < 1:
            return None
        axes = None
        if t.dim() >= 3 and not t.is_contiguous() and t.is_contiguous(memory_format=_memory_format(t.dim())):
            axes = list(channels_last(t.dim()))
            t = t.permute(*axes)
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16), "bfloat16", axes
        return t.numpy(), str(t.dtype).removeprefix("torch."), axes
    array = np.ascontiguousarray(value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value))
    if array.dtype.kind != "f" or array.ndim < 1:
        return None
    return array, str(array.dtype), None


def _memory_format(ndim: int):
    import torch  # lazy: optional (torch: only in images with PyTorch)

    return torch.channels_last if ndim == 4 else torch.channels_last_3d


def dump(tensors: dict, folder: Path) -> None:
    """Write ``tensors`` (``checkpoint_tensors()``) under ``folder``: see the module's text."""
    kept = [(str(name), *found) for name, value in tensors.items() if (found := _native(value)) is not None]
    total = sum(array.nbytes for _, array, _, _ in kept)
    index: dict = {"bytes": total, "tensors": []}
    if total > MAX_BYTES or len(kept) > MAX_TENSORS:
        index["too_large"] = True
    else:
        (folder / "weights").mkdir(parents=True, exist_ok=True)
        for k, (name, array, dtype, axes) in enumerate(kept):
            np.save(folder / "weights" / f"{k}.npy", array, allow_pickle=False)
            shape = list(array.shape) if axes is None else [array.shape[axes.index(i)] for i in range(array.ndim)]
            index["tensors"].append({"name": name, "shape": shape, "dtype": dtype, **({"axes": axes} if axes else {})})
    (folder / "weights.json").write_text(json.dumps(index))
