"""Adversarial entry (choosing what is scored): the builder rewrites the runner's earlier
answers with later ones.

The builder runs in the runner's evaluator, once per request, after training. The first
request is for an untrained checkpoint (no crossing), the second for a trained one (the
crossing). Each time it is called, the builder copies the latest answer it finds under the
evaluator's output (/evaluations/<n>/: the predictions, the probe's, the provenance
record) over every earlier one. By the final model's request the first
answer holds the trained checkpoint's predictions: scored from those files, the untrained
checkpoint would cross, at the time of the first request. (A thread left behind by the
builder could do the same at any time; a call is deterministic.)

Input: float32 (B, 1, 28, 28), pixels 0..255. Output: logits (B, 10).
"""
import os
import shutil

import torch
from torch import nn

OUTBOX = "/evaluations"  # the evaluator's --out (the training container has no such folder)


def rewrite_earlier_answers() -> None:
    if not os.path.isdir(OUTBOX):
        return
    # Answers of the model as it is (a provenance record), not of the runner's permuted copies.
    answered = sorted(int(d) for d in os.listdir(OUTBOX) if d.isdigit()
                      and os.path.isfile(os.path.join(OUTBOX, d, "provenance.json")))
    for later in reversed(answered):
        for earlier in [n for n in answered if n < later]:
            for name in ("clean.npy", "probe.npy", "provenance.json"):
                source = os.path.join(OUTBOX, str(later), name)
                if os.path.isfile(source):
                    shutil.copyfile(source, os.path.join(OUTBOX, str(earlier), name))
            print(f"rewrote answer {earlier} with answer {later}", flush=True)
        return


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 10))

    def forward(self, x):
        return self.body(x / 255.0)


def build_model():
    rewrite_earlier_answers()
    return Net()
