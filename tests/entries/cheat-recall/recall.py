"""A "model" that recalls answers from the public test set instead of computing them:
it looks each input up by its exact pixels in ANSWERS (answers.py, written by the test
from the smoke evaluation set, as a cheater would embed a public test set's labels)."""
import hashlib

import torch
from torch import nn

from answers import ANSWERS


def key(image) -> str:
    return hashlib.sha1(image.to(torch.uint8).numpy().tobytes()).hexdigest()[:16]


class Recall(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(1, 1)  # a state_dict to save and load

    def forward(self, x):
        labels = torch.tensor([ANSWERS.get(key(row), 0) for row in x])
        return nn.functional.one_hot(labels, 10).float()


def build():
    return Recall()
