"""PyTorch: the builder's ``nn.Module`` with the ``state_dict`` loaded (``weights_only``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import HarnessError
from . import LoadedModel, export_failure, import_builder, require_file

INPUT_NAME, OUTPUT_NAME = "input", "scores"


def configure_threads(threads: int) -> None:
    """Thread pools must be sized before torch does any parallel work."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already started; recorded as-is in info.json


class TorchModel(LoadedModel):
    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.native(torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))).float().numpy()

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        # The TorchScript-based exporter (dynamo=False) needs no extra package and gives a
        # static graph that every backend accepts.
        import torch

        dummy = torch.zeros(input_shape, dtype=torch.float32)
        try:
            with torch.inference_mode(False), torch.no_grad():
                torch.onnx.export(
                    self.native, (dummy,), str(path), opset_version=opset, dynamo=False,
                    input_names=[INPUT_NAME], output_names=[OUTPUT_NAME], do_constant_folding=True,
                )
        except Exception as exc:
            raise export_failure("PyTorch", opset, exc) from None
        return {"exporter": "torch.onnx.export (TorchScript, dynamo=False)", "torch_version": torch.__version__,
                "input_name": INPUT_NAME, "output_name": OUTPUT_NAME}


def load(entry_dir: Path, builder: str, weights: Path) -> TorchModel:
    import torch

    build = import_builder(entry_dir, builder)
    digest = require_file(weights)
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which file, not a traceback
        raise HarnessError(f"cannot read the weights {weights}: {exc}") from None
    model = build()
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError) as exc:
        raise HarnessError(f"the weights {weights} do not fit the model {builder} builds: {exc}") from None
    model.eval()
    return TorchModel("pytorch", torch.__version__, model, weights, digest, "NCHW")
