"""Rebuild the entry's model: import its builder from the entry folder, load the weights."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

from .digest import sha256_file
from .errors import HarnessError


@dataclass
class LoadedModel:
    module: object  # torch.nn.Module in eval mode
    weights: Path
    weights_sha256: str


def load_model(entry_dir: Path, builder: str, weights: Path) -> LoadedModel:
    import torch

    module_name, _, function_name = builder.partition(":")
    if str(entry_dir) not in sys.path:
        sys.path.insert(0, str(entry_dir))
    try:
        build = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise HarnessError(f"cannot import the builder {builder} from {entry_dir}: {exc}") from None
    if not weights.is_file():
        raise HarnessError(f"no trained weights at {weights}: did training save the final model?")
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
    return LoadedModel(module=model, weights=weights, weights_sha256=sha256_file(weights))
