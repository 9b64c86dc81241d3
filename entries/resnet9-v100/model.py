"""ResNet-9 as in the DAWNBench CIFAR10 entries of Myrtle.ai (David Page, "How to train your
ResNet", 2018): 8 conv layers in three stages plus two residual blocks, max pooling only,
and a linear classifier whose output is scaled by 0.125.

The model takes float32 pixels in their stored scale (0..255, B x 3 x 32 x 32), as the run
contract requires, and normalises them itself; it returns logits.
"""

from __future__ import annotations

import torch
from torch import nn

# CIFAR10 training-set channel statistics, in the 0..1 scale.
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


def conv_bn(c_in: int, c_out: int) -> nn.Sequential:
    # No conv bias: the batch norm that follows has its own shift.
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class Residual(nn.Module):
    """x + two conv_bn layers of the same width (the recipe's only skip connections)."""

    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(conv_bn(channels, channels), conv_bn(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResNet9(nn.Module):
    def __init__(self, num_classes: int = 10, output_scale: float = 0.125):
        super().__init__()
        # Constants, not weights: kept out of the state_dict so a checkpoint holds only what
        # training changed (the builder recreates these).
        mean = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1) * 255
        std = torch.tensor(CIFAR10_STD).view(1, 3, 1, 1) * 255
        self.register_buffer("mean", mean, persistent=False)
        self.register_buffer("std", std, persistent=False)
        self.output_scale = output_scale

        self.prep = conv_bn(3, 64)                                     # 32x32
        self.layer1 = nn.Sequential(conv_bn(64, 128), nn.MaxPool2d(2), Residual(128))   # 16x16
        self.layer2 = nn.Sequential(conv_bn(128, 256), nn.MaxPool2d(2))                 # 8x8
        self.layer3 = nn.Sequential(conv_bn(256, 512), nn.MaxPool2d(2), Residual(512))  # 4x4
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.classifier = nn.Linear(512, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - self.mean) / self.std
        x = self.layer3(self.layer2(self.layer1(self.prep(x))))
        x = torch.flatten(self.pool(x), 1)
        # The 0.125 scale keeps early logits small, which the recipe found trains faster
        # than a smaller learning rate on the last layer.
        return self.classifier(x) * self.output_scale


def build_model() -> ResNet9:
    """The untrained model; the harness loads ``/output/model/weights.pt`` into it."""
    return ResNet9()
