"""What a backend provides to the harness."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..errors import HarnessError
from ..timing import Ranked

if TYPE_CHECKING:
    from ..frameworks import LoadedModel


@runtime_checkable
class TorchModule(Protocol):
    """What the torch backends use of a ``torch.nn.Module`` (typed without importing torch,
    which only the images that carry it have)."""

    def to(self, *args: Any, **kwargs: Any) -> TorchModule: ...

    def eval(self) -> TorchModule: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass
class ModelFiles:
    """Everything a backend may start from; a backend uses what it needs."""

    model: LoadedModel  # (frameworks/): native model, framework, version, layout
    weights: Path
    weights_sha256: str
    onnx: Path | None  # the harness' export; None when no requested backend needs it
    onnx_info: dict | None
    input_shape: tuple[int, ...]  # one item: 1 x C x H x W
    topk: int  # 1 for top-1 tasks, 5 for top-5 tasks
    threads: int
    fp16: bool
    work_dir: Path  # this backend's output folder (engines and the like go here)
    extra: dict = field(default_factory=dict)

    def onnx_export(self, backend: str) -> tuple[Path, dict]:
        """The ONNX export and its record, which an ONNX-reading backend starts from; without
        them it cannot run (the harness exports only for a backend that asked)."""
        if self.onnx is None or self.onnx_info is None:
            raise HarnessError(f"the {backend} backend needs the ONNX export, which is missing", 1)
        return self.onnx, self.onnx_info

    @property
    def torch_model(self) -> TorchModule:
        """The PyTorch module (for the torch backends; other frameworks have their own)."""
        native = self.model.native
        if not isinstance(native, TorchModule):
            raise HarnessError(f"the torch backends need a PyTorch module; the builder gave {type(native).__name__}", 1)
        return native


class Backend:
    """One inference backend. Subclasses set ``name`` and ``needs_onnx``.

    ``check_available`` runs before any work (it must be cheap and raise HarnessError
    with a fix when the backend cannot run here); ``prepare`` builds the session or
    engine; ``predict`` infers one item, returning the top class (an int) or the
    ``topk`` classes ranked best first, already on the host.
    """

    name: str = ""
    needs_onnx: bool = False

    @staticmethod
    def model_record(files: ModelFiles, layout: str) -> dict:
        """What every info.json says about the model: its framework, version and input layout."""
        return {"framework": files.model.framework, "framework_version": files.model.version, "layout": layout}

    @classmethod
    def check_available(cls) -> None:
        raise NotImplementedError

    def prepare(self, files: ModelFiles) -> None:
        raise NotImplementedError

    def predict(self, x: np.ndarray) -> Ranked:
        raise NotImplementedError

    def info(self) -> dict:
        """Version, settings (providers / engine), threads, model file and its sha256."""
        raise NotImplementedError
