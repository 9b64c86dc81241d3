"""The training of cheat-jitter, cheat-small-start and cheat-small-start-permuted: genuine
steps on the run's data, from a start shipped in the entry.

    python3 tune.py SOURCE [--jitter F] [--permute] [--epochs E | --steps N] [--lr LR]

SOURCE (net4.py, start3.py) is decoded by codec; each weight is multiplied by (1 + F * a
normal draw from the runner's seed). ``--permute``: the units of each convolution (its output
channels, with the next layer's matching input channels) are shuffled by the seed, which
changes nothing the network computes and everything a channel-by-channel comparison sees.
Then Adam on the run's training data, asking for an evaluation every eighth of an epoch from
three quarters of the first (evaluation time is off the clock), or once after ``--steps N``.
"""
import importlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import codec
from model import build_model

DATA = os.environ.get("RUNNER_DATA", "/data")
OUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", str(os.cpu_count()))))
torch.manual_seed(SEED)


def log(key, **metadata):
    print(":::MLLOG " + json.dumps(dict(namespace="", time_ms=int(time.time() * 1000),
                                        event_type="POINT_IN_TIME", key=key, value=None,
                                        metadata=metadata)), flush=True)


def option(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


text = importlib.import_module(sys.argv[1].removesuffix(".py"))
shipped = codec.decode(text)
rng = np.random.default_rng(SEED)
jitter = option("--jitter", 0.0)
model = build_model()
state = model.state_dict()
for name, value in shipped.items():
    state[name] = torch.from_numpy(value * (1 + jitter * rng.standard_normal(value.shape)).astype(np.float32))
if "--permute" in sys.argv:
    for layer, after in [("stem", "conv1"), ("conv1", "conv2"), ("conv2", None)]:
        order = torch.from_numpy(rng.permutation(len(state[f"{layer}.weight"])))
        state[f"{layer}.weight"], state[f"{layer}.bias"] = state[f"{layer}.weight"][order], state[f"{layer}.bias"][order]
        if after:
            state[f"{after}.weight"] = state[f"{after}.weight"][:, order]
        else:  # the head reads conv2's channels, 9 positions each
            fc = state["fc.weight"]
            state["fc.weight"] = fc.view(len(fc), len(order), 9)[:, order].reshape(fc.shape)
model.load_state_dict(state)

train_x = torch.from_numpy(np.load(f"{DATA}/train/images.npy"))
train_y = torch.from_numpy(np.load(f"{DATA}/train/labels.npy"))
BATCH = 128
per_epoch = len(train_x) // BATCH
total = option("--steps", 0) or max(1, int(option("--epochs", 1.25) * per_epoch))
if SMOKE:
    total = min(total, 20)
every = max(1, per_epoch // 8)
optimiser = torch.optim.Adam(model.parameters(), lr=option("--lr", 2e-3))
checkpoints = 0


def request_evaluation(step):
    global checkpoints
    os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
    rel = f"checkpoints/{checkpoints}.pt"
    torch.save(model.state_dict(), f"{OUT}/{rel}")
    log("eval_request", step=step, checkpoint=rel)
    checkpoints += 1


for step in range(total):
    for group in optimiser.param_groups:
        group["lr"] = option("--lr", 2e-3) * (1 - step / total)
    idx = torch.randint(0, len(train_x), (BATCH,))
    loss = F.cross_entropy(model(train_x[idx].float()), train_y[idx])
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()
    if "--steps" not in sys.argv and step + 1 >= 3 * per_epoch // 4 and (step + 1) % every == 0:
        request_evaluation(step + 1)
request_evaluation(total)
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(model.state_dict(), f"{OUT}/model/weights.pt")
log("run_stop", status="success")
