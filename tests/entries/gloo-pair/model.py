"""A small BN CNN for MNIST; input (B, 1, 28, 28) in 0..255 pixels, normalised inside."""
from torch import nn


def block(c_in, c_out, kernel_size=3, stride=1, padding=1, pool=False):
    layers = [nn.Conv2d(c_in, c_out, kernel_size, stride, padding, bias=False)]
    layers += [nn.MaxPool2d(2)] if pool else []
    return nn.Sequential(*layers, nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            block(1, 16, kernel_size=4, stride=2),  # 14x14: no full-resolution activations
            block(16, 32, pool=True), block(32, 64, pool=True), nn.Flatten(),  # 3x3
            nn.Linear(64 * 9, 256, bias=False), nn.BatchNorm1d(256), nn.ReLU(inplace=True),
            nn.Linear(256, 10),
        )

    def forward(self, x):
        return self.body((x - 33.3) / 78.6)  # MNIST's pixel mean and std


def build_model():
    return Net()
