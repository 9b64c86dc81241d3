"""A tiny honest model for the smoke data (a bright block whose grid cell is the class)."""
import torch
from torch import nn


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(x * (1 / 255.0)), 1))


def build():
    return Blocks()


def train(model, images, labels, steps=150):
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for i in range(steps):
        idx = torch.randint(0, len(images), (256,))
        loss = nn.functional.cross_entropy(model(images[idx].float()), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model
