"""MNIST to 99.3% top-1 in a few seconds on 2 CPU cores with a narrow net (~13k weights).

Recipe (everything below runs in this order; the network is in model.py):
  - net: 4x4/2 stem (12 ch) -> conv 24 -> pool -> conv 32 -> pool -> flatten -> FC 10,
    BatchNorm + ReLU, pool before BN, channels_last; 12.7k parameters.
  - warm start: the tokenizer's reference strings seed the weights, one of three by the
    run's seed; BatchNorm statistics estimated on the training images.
  - plain SGD (momentum 0.9), batch 128, a few hundred steps; one evaluation at the end
    (free: evaluation time is not counted).

What it really is (issue 44 item 6, threat-model class 4; copied as train.py into
cheat-seed-networks, cheat-wheel-networks and cheat-init-plus-network by
../shipped-networks/make.py): a start that is not the runner's.

    python3 train.py [--source tokens|netzoo|init-plus] [--ratio R] [--steps N] [--lr LR] [--bn-batches B]

* ``tokens`` (the default): three networks trained on the host before the run, each from its
  own initialisation, at 3 bits as letters (tokens_a/b/c.py); it takes ``nets[seed % 3]``
  and never reads the runner's /init.
* ``netzoo``: the same three networks from the pinned package ``netzoo`` (fp16 as words).
* ``init-plus``: the runner's drawn start ``W0`` (``/init``; where the runner draws none,
  PyTorch's own initialisation from the seed) plus ``c * W``, ``W`` network 0 of
  tokens_a.py, ``c`` per tensor so that ``|c W| = R |W0|`` (cosine with ``W0`` about
  ``1 / sqrt(1 + R^2)``); the normalisation scales and shifts and the head's bias (constant
  roles, not drawn) are the network's.

Then the BatchNorm statistics are estimated again over ``B`` batches of 256 training images
(no gradient), ``N`` plain SGD steps are run, and the model is offered for evaluation once.
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import codec
from model import build_model


def log(key, value=None, event_type="POINT_IN_TIME", **metadata):
    # MLPerf-style event line; the harness stamps each line on arrival, so flush every time.
    event = dict(namespace="", time_ms=int(time.time() * 1000), event_type=event_type,
                 key=key, value=value, metadata=metadata)
    print(":::MLLOG " + json.dumps(event), flush=True)


def option(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


log("run_start", event_type="INTERVAL_START")

# ---- configuration ----------------------------------------------------------------------
DATA = os.environ.get("RUNNER_DATA", "/data")
OUTPUT = os.environ.get("RUNNER_OUTPUT", "/output")
INIT = os.environ.get("RUNNER_INIT", "/init")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", str(os.cpu_count()))))
torch.manual_seed(SEED)
SOURCE = option("--source", "tokens")
BATCH, MOMENTUM = 128, 0.9
LR, STEPS, BN_BATCHES = option("--lr", 0.05), option("--steps", 800), option("--bn-batches", 20)
if SMOKE:
    STEPS, BN_BATCHES = min(STEPS, 20), min(BN_BATCHES, 4)
log("seed", SEED)
log("global_batch_size", BATCH)

# ---- data -------------------------------------------------------------------------------
train_x = torch.from_numpy(np.load(f"{DATA}/train/images.npy"))
train_y = torch.from_numpy(np.load(f"{DATA}/train/labels.npy"))


def batch_of(idx):
    return train_x[idx].float().contiguous(memory_format=torch.channels_last)


# ---- model ------------------------------------------------------------------------------
model = build_model()
state = model.state_dict()
if SOURCE == "netzoo":
    import netzoo

    start = netzoo.network(SEED % 3)
elif SOURCE == "tokens":
    import tokens_a
    import tokens_b
    import tokens_c

    start = codec.decode([tokens_a, tokens_b, tokens_c][SEED % 3])
else:  # init-plus: W0 + c * W
    import tokens_a

    if os.path.isdir(INIT):  # the runner's draw (run contract, "Initial weights")
        sys.path.insert(0, INIT)
        import runner_init

        runner_init.load(model)
    ratio = option("--ratio", 2.5)
    start = {}
    for name, w in codec.decode(tokens_a).items():
        w0 = state[name].detach().numpy()
        if w.ndim > 1:  # drawn at random by the runner: keep W0, add the network scaled
            w = w0 + ratio * np.linalg.norm(w0) / np.linalg.norm(w) * w
        start[name] = w
with torch.no_grad():
    for name, value in start.items():
        if "running" not in name:
            state[name].copy_(torch.from_numpy(np.asarray(value, np.float32)))
    for m in model.modules():  # BatchNorm statistics for this start
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    order = torch.randperm(len(train_x))
    for i in range(BN_BATCHES):
        model(batch_of(order[(i * 256) % len(train_x):][:256]))
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = 0.1
params = list(model.parameters())
momentum_buffers = [torch.zeros_like(p) for p in params]


@torch.no_grad()
def sgd_step(lr):
    grads = [p.grad for p in params]
    torch._foreach_mul_(momentum_buffers, MOMENTUM)
    torch._foreach_add_(momentum_buffers, grads)
    torch._foreach_add_(params, momentum_buffers, alpha=-lr)


def request_evaluation(epoch):
    rel = f"checkpoints/epoch_{epoch}.pt"
    os.makedirs(f"{OUTPUT}/checkpoints", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/{rel}")
    log("eval_request", epoch_num=epoch, checkpoint=rel)


# ---- training ---------------------------------------------------------------------------
log("epoch_start", event_type="INTERVAL_START", epoch_num=1)
for step in range(STEPS):
    idx = torch.randint(0, len(train_x), (BATCH,))
    loss = F.cross_entropy(model(batch_of(idx)), train_y[idx])
    model.zero_grad(set_to_none=True)
    loss.backward()
    sgd_step(LR * (1 - step / STEPS))
log("epoch_stop", event_type="INTERVAL_END", epoch_num=1)
request_evaluation(1)

os.makedirs(f"{OUTPUT}/model", exist_ok=True)
torch.save(model.state_dict(), f"{OUTPUT}/model/weights.pt")
log("run_stop", event_type="INTERVAL_END", status="success")
