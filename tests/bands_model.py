"""The ``bands`` test model shared by the harness and inference tests: its source, to
write into an entry folder, and the same model with hand-set (perfect) weights."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

# A real (tiny) image classifier: class c is a bright horizontal band at rows 2c+4..2c+5.
# Normalisation (x / 255) lives inside the model, as the run contract asks.
MODEL_SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Bands(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Conv2d(1, 1, 1)
            self.pool = nn.AvgPool2d((1, 28))
            self.head = nn.Linear(28, 10)

        def forward(self, x):
            return self.head(torch.flatten(self.pool(self.scale(x)), 1))


    class BrokenExport(Bands):
        # Correct in eager PyTorch, wrong in the ONNX graph: what a bad export looks like.
        def forward(self, x):
            scores = super().forward(x)
            return -scores if torch.onnx.is_in_onnx_export() else scores


    def build():
        return Bands()


    def build_broken():
        return BrokenExport()
    """
)


def trained_bands(folder: Path):
    """``bands.build()`` imported from ``folder`` (which holds ``bands.py`` with
    ``MODEL_SOURCE``), with weights set by hand so it classifies every band correctly."""
    import torch

    sys.path.insert(0, str(folder))
    try:
        import bands
    finally:
        sys.path.remove(str(folder))
    model = bands.build()
    with torch.no_grad():
        model.scale.weight.fill_(1 / 255)
        model.scale.bias.zero_()
        model.head.weight.zero_()
        model.head.bias.zero_()
        for c in range(10):
            model.head.weight[c, 2 * c + 4 : 2 * c + 6] = 1
    return model
