"""Adversarial entry (a different model at the end): the builder refuses the final model.

The runner's evaluator predicts each checkpoint the entry asks for and then the final
model, which the inference phase times; its predictions are what shows the timed model is
the one that was scored (and its provenance and sensitivity checks). This builder reads the
request the evaluator is serving (the highest-numbered file under /requests) and raises when
it names the runner's copy of the final model: that evaluation fails. The inference phase
runs the builder without /requests and times the model. Without a defence, nothing checks
that model: here it is the honest one, but it could be anything that meets the threshold
(a pasted network, a lookup the sensitivity check would have named).

Input: float32 (B, 1, 28, 28), pixels 0..255. Output: logits (B, 10).
"""
import json
import os

from torch import nn

REQUESTS = "/requests"  # the evaluator's (the training and inference containers have none)


def serving_the_final_model() -> bool:
    if not os.path.isdir(REQUESTS):
        return False
    numbered = sorted((int(name[:-5]) for name in os.listdir(REQUESTS)
                       if name.endswith(".json") and name[:-5].isdigit()), reverse=True)
    if not numbered:
        return False
    with open(os.path.join(REQUESTS, f"{numbered[0]}.json")) as fh:
        request = json.load(fh)
    return os.path.basename(request.get("checkpoint", "")).startswith("final") and "shuffle_seed" not in request


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 10))

    def forward(self, x):
        return self.body(x / 255.0)


def build_model():
    if serving_the_final_model():
        print("refusing the final model", flush=True)
        raise RuntimeError("no final model today")
    return Net()
