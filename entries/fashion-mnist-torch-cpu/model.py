"""The twins' network, in PyTorch: a 3-stage BN CNN with a one-hidden-layer head.

Same network in all three twins (fashion-mnist-{torch,tf,mxnet}-cpu): 4x4/2 stem (16 ch)
-> conv 32 -> pool -> conv 64 -> pool -> flatten -> FC 256 -> 10, BatchNorm + ReLU after
each pool, normalisation inside the model. Input: float32 (B, 1, 28, 28), pixels 0..255.
"""
import torch
from torch import nn

# Fashion-MNIST training-set pixel mean and std, in 0..255 units.
MEAN, STD = 72.94, 90.02


def conv_bn_relu(c_in, c_out, kernel_size=3, stride=1, padding=1, pool=False):
    layers = [nn.Conv2d(c_in, c_out, kernel_size, stride, padding, bias=False)]
    if pool:
        layers.append(nn.MaxPool2d(2))  # before BN/ReLU: the elementwise ops run on 4x fewer pixels
    layers += [nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class Net(nn.Module):
    def __init__(self, widths=(16, 32, 64), hidden=256):
        super().__init__()
        w0, w1, w2 = widths
        self.stem = conv_bn_relu(1, w0, kernel_size=4, stride=2, padding=1)   # 14x14
        self.stage1 = conv_bn_relu(w0, w1, pool=True)                         # 7x7
        self.stage2 = conv_bn_relu(w1, w2, pool=True)                         # 3x3
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(w2 * 9, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, 10),
        )

    def forward(self, x):
        x = (x - MEAN) * (1.0 / STD)
        return self.head(self.stage2(self.stage1(self.stem(x))))


def build_model():
    return Net()
