"""The runner's initial weights, loaded into an entry's model: one line in its training code.

The runner draws the initial value of every float tensor of the entry's model from the run's
seed (run contract, "Initial weights") and hands them to the training container read-only
at ``$RUNNER_INIT`` (``/init``): ``weights.npz`` (one array per tensor, named as the
framework's checkpoints name them) and this module. Training starts from them:

    sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init
    runner_init.load(model)        # PyTorch nn.Module, Keras model or Gluon HybridBlock

MXNet: call it before or after ``net.initialize(...)``; every value is the drawn one.

Every tensor of the file must exist in the model with its shape, or this raises: a model that
does not fit the weights the runner drew cannot start from them. The runner checks what
training produced against these values (the scored model must descend from them).
Nothing of the runner is imported here: the training container has only the entry's image.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

WEIGHTS = "weights.npz"


def weights(folder: str | None = None) -> dict:
    """``{name: float32 array}`` as the runner drew them."""
    folder = folder or os.environ.get("RUNNER_INIT", "/init")
    with np.load(os.path.join(folder, WEIGHTS), allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _mismatch(what: str, names) -> ValueError:
    names = sorted(names)
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return ValueError(f"runner_init: {what}: {shown}")


def _load_torch(model, drawn: dict) -> None:
    import torch  # lazy: optional (torch: only in images with PyTorch)

    state = model.state_dict()
    if missing := set(drawn) - set(state):
        raise _mismatch("the model has no tensor named", missing)
    with torch.no_grad():
        for name, value in drawn.items():
            target = state[name]
            if tuple(target.shape) != value.shape:
                raise _mismatch(f"shape {tuple(target.shape)} is not the drawn {value.shape} for", [name])
            target.copy_(torch.from_numpy(value))  # keeps the tensor's dtype, device and memory format


def _load_keras(model, drawn: dict) -> None:
    import h5py  # lazy: optional (h5py: only in images with Keras)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "init.weights.h5")
        model.save_weights(path)  # the model's own layout; each drawn array written in its place
        with h5py.File(path, "r+") as h5:
            found = set()
            h5.visititems(lambda name, obj: found.add(name) if isinstance(obj, h5py.Dataset) else None)
            if missing := set(drawn) - found:
                raise _mismatch("the model has no tensor named", missing)
            for name, value in drawn.items():
                if h5[name].shape != value.shape:
                    raise _mismatch(f"shape {h5[name].shape} is not the drawn {value.shape} for", [name])
                h5[name][...] = value
        model.load_weights(path)


def _load_gluon(net, drawn: dict) -> None:
    import mxnet as mx  # lazy: optional (mxnet: only in images with MXNet)

    try:  # where its parameters live; a block still waiting for its shapes lives on the CPU
        ctx = list(net.collect_params().values())[0].list_ctx()
    except (RuntimeError, ValueError, IndexError):
        ctx = mx.cpu()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "init.params")  # save_parameters' own format and names
        mx.nd.save(path, {name: mx.nd.array(value, dtype="float32") for name, value in drawn.items()})
        try:  # every parameter must be drawn, none extra; deferred shapes are set from the file
            net.load_parameters(path, ctx=ctx)
        except (AssertionError, RuntimeError, ValueError, mx.base.MXNetError) as exc:
            raise ValueError(f"runner_init: the block does not fit the drawn weights: {exc}") from None


def load(model, folder: str | None = None):
    """Set every tensor of ``model`` the runner drew to its drawn value; returns ``model``."""
    drawn = weights(folder)
    kind = type(model).__module__.split(".", 1)[0]
    if hasattr(model, "state_dict") and hasattr(model, "load_state_dict"):
        _load_torch(model, drawn)
    elif hasattr(model, "save_weights") and hasattr(model, "load_weights"):
        _load_keras(model, drawn)
    elif hasattr(model, "save_parameters") and hasattr(model, "load_parameters"):
        _load_gluon(model, drawn)
    else:
        raise TypeError(f"runner_init: no loader for a {kind} {type(model).__name__}")
    return model
