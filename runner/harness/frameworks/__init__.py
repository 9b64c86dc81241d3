"""One loader per framework: how to read that framework's saved model, predict with it
and export it to ONNX.

| framework (manifest) | saved model (checkpoint and ``inference.weights``) | builder |
|---|---|---|
| ``pytorch`` | a ``state_dict`` (``torch.save``), loaded ``weights_only`` | builds the ``nn.Module`` |
| ``tensorflow`` | a Keras ``.keras`` file (``model.save``), loaded with ``safe_mode`` | its module is imported (custom layers register there); the function is not called |
| ``mxnet`` | a Gluon ``save_parameters`` file (``.params``) | builds the ``HybridBlock`` |

Each module here that defines ``load`` is one framework's loader, named as the manifest
names the framework; it is the container's half of the framework, whose declaration is
``runner/frameworks/<name>/`` on the host (the harness runs inside the entry's image and
cannot import it). A loader may also define ``count_flops`` (``python3 -m harness flops``).
Each defines ``initial_tensors`` (``python3 -m harness init-shapes``): the untrained model's
float tensors, named as its checkpoints name them, for the runner's draw of the initial weights.

Every loaded model takes float32 ``N x C x H x W`` batches in the stored pixel scale
(0-255) and returns class scores; a loader converts the layout inside when its framework
prefers another (TensorFlow: NHWC).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..digest import sha256_file
from ..errors import HarnessError
from .operators import unsupported_operator



@dataclass
class LoadedModel:
    """A trained model, ready to predict. Subclasses fill in the framework's parts."""

    framework: str
    version: str
    native: object  # the framework's own model object (nn.Module, keras.Model, HybridBlock)
    weights: Path
    weights_sha256: str
    layout: str  # the layout the model computes in, e.g. "NCHW" or "NHWC"

    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        """Class scores (``N x classes``, float32) for float32 ``N x C x H x W`` inputs."""
        raise NotImplementedError

    def span_scores(self, contexts: list[str], questions: list[str]):
        """(offsets, start scores, end scores) for question answering; PyTorch only for now."""
        raise HarnessError(f"question answering is supported for pytorch entries only, not {self.framework}")

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        """Write an ONNX graph taking one ``1 x C x H x W`` float32 item; return its record."""
        raise NotImplementedError

    # -- what the evaluator checks (harness/provenance.py) -----------------------------------
    def checkpoint_tensors(self) -> dict:
        """``{name: tensor}`` as read from the checkpoint file, before any of the entry's code."""
        raise NotImplementedError

    @staticmethod
    def normalise(value, precision: str | None) -> np.ndarray:
        """A tensor's values (float32 or int64), at ``precision`` first when given."""
        raise NotImplementedError

    def record_uses(self, ledger) -> None:
        """Note in ``ledger`` every tensor the model holds and, from now on, every tensor
        its forward passes read that they did not produce."""
        raise NotImplementedError

    def stop_recording(self) -> None:
        pass

    def to_device(self, device: str) -> None:
        """Predict on ``device`` from now on ("cpu" or "cuda"); only PyTorch's loader moves models."""
        if device != "cpu":
            raise HarnessError(f"the {self.framework} loader places its model itself; --device {device} is for pytorch")

    def shuffle_weights(self, seed: int) -> int:
        """Permute the elements of each tensor loaded from the checkpoint; return how many."""
        raise NotImplementedError


def loaders() -> tuple[str, ...]:
    """The frameworks this harness can read: each module here that defines ``load``, named as
    the manifest names its framework (the host's registry, ``runner/frameworks/``, declares the
    rest of each framework and refuses one without a module here)."""
    names = (info.name for info in pkgutil.iter_modules(__path__) if not info.ispkg)
    return tuple(name for name in sorted(names) if hasattr(importlib.import_module(f"{__name__}.{name}"), "load"))


def loader_for(framework: str):
    if framework in loaders():
        return importlib.import_module(f"{__name__}.{framework}")
    raise HarnessError(f"no loader for framework '{framework}'; the harness knows {', '.join(loaders())}")


def import_builder(entry_dir: Path, builder: str):
    """The entry's ``module:function``, imported from the entry folder."""
    module_name, _, function_name = builder.partition(":")
    if str(entry_dir) not in sys.path:
        sys.path.insert(0, str(entry_dir))
    try:
        return getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise HarnessError(f"cannot import the builder {builder} from {entry_dir}: {exc}") from None


def float_tensors(tensors: dict) -> list[dict]:
    """``{"name", "shape", "dtype"}`` of each float tensor of one or more dimensions in
    ``tensors`` (numpy arrays, in checkpoint order): what the runner draws initial values for,
    and what the evaluator's copy of a checkpoint holds (``harness/weights.py``)."""
    found = []
    for name, value in tensors.items():
        array = np.asarray(value)
        if array.dtype.kind == "f" and array.ndim >= 1:
            found.append({"name": str(name), "shape": [int(d) for d in array.shape], "dtype": str(array.dtype)})
    return found


def require_file(weights: Path) -> str:
    """The file's sha256; a clear error when training did not write it."""
    if not weights.is_file():
        raise HarnessError(f"no trained weights at {weights}: did training save the final model?")
    return sha256_file(weights)


def export_failure(framework: str, opset: int | None, exc: BaseException) -> HarnessError:
    """An export error that names the operator the exporter could not convert, when it says."""
    message = str(exc).strip()
    op = unsupported_operator(message)
    if op:
        what = f"operator {op} is not supported"
    else:  # the exporter's last line says what went wrong; its traceback is noise here
        what = message.splitlines()[-1][:300] if message else type(exc).__name__
    return HarnessError(f"{framework} ONNX export at opset {opset} failed: {what}", exit_code=1)


__all__ = ["LoadedModel", "export_failure", "float_tensors", "import_builder", "loader_for", "loaders", "require_file"]
