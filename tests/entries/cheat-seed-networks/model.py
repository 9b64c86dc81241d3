"""The MNIST network of this entry: a 3-stage BN CNN with a linear head.

Input: float32 (B, 1, 28, 28) in raw pixel scale 0..255. Output: logits (B, 10).
~13k parameters; normalisation lives inside the module so the saved state_dict is
self-contained for the harness (ONNX export, batch-1 inference).
"""
import torch
from torch import nn

# MNIST training-set pixel mean and std, in 0..255 units.
MEAN, STD = 33.32, 78.57
WIDTHS = (12, 24, 32)


def conv_bn_relu(c_in, c_out, kernel_size=3, stride=1, padding=1, pool=False):
    # Pool before BN/ReLU (as in airbench): the elementwise ops, not the convs, dominate
    # the step on 2 CPU cores, so running them on the 4x smaller pooled map is the cheap order.
    layers = [nn.Conv2d(c_in, c_out, kernel_size, stride, padding, bias=False)]
    if pool:
        layers.append(nn.MaxPool2d(2))
    layers += [nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class Net(nn.Module):
    def __init__(self, widths=WIDTHS):
        super().__init__()
        w0, w1, w2 = widths
        self.stem = conv_bn_relu(1, w0, kernel_size=4, stride=2, padding=1)   # 14x14
        self.stage1 = conv_bn_relu(w0, w1, pool=True)                         # 7x7
        self.stage2 = conv_bn_relu(w1, w2, pool=True)                         # 3x3
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(w2 * 9, 10))

    def forward(self, x):
        x = (x - MEAN) * (1.0 / STD)
        return self.head(self.stage2(self.stage1(self.stem(x))))


def build_model():
    return Net().to(memory_format=torch.channels_last)
