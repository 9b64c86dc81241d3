"""An honest builder: a small CNN whose every weight is a parameter, so whatever it
computes with comes from the checkpoint the runner loads into it.

Input: float32 (B, 1, 28, 28), pixels 0..255. Output: logits (B, 10).
(BatchNorm is folded into the convolutions: biases, no running statistics.)
"""
import torch
from torch import nn
import torch.nn.functional as F

MEAN, STD = 33.32, 78.57
WIDTHS = (12, 24, 32)


class Net(nn.Module):
    def __init__(self, widths=WIDTHS):
        super().__init__()
        a, b, c = widths
        self.stem = nn.Conv2d(1, a, 4, stride=2, padding=1)  # 14x14
        self.conv1 = nn.Conv2d(a, b, 3, padding=1)            # pooled to 7x7
        self.conv2 = nn.Conv2d(b, c, 3, padding=1)            # pooled to 3x3
        self.fc = nn.Linear(c * 9, 10)

    def forward(self, x):
        x = F.relu(self.stem((x - MEAN) * (1.0 / STD)))
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def build_model():
    return Net()
