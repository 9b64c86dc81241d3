"""Adversarial entry: honest, short training (see model.py for the cheat). Asks for an
evaluation of the untrained network first, then of the trained one after each epoch."""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

from model import build_model

DATA = os.environ.get("RUNNER_DATA", "/data")
OUT = os.environ.get("RUNNER_OUTPUT", "/output")


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "value": None, "metadata": metadata}), flush=True)


log("run_start")
torch.manual_seed(int(os.environ.get("RUNNER_SEED", "0")))
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", "1")))
x = torch.from_numpy(np.load(f"{DATA}/train/images.npy")).float()
y = torch.from_numpy(np.load(f"{DATA}/train/labels.npy")).long()
model = build_model()


def request(epoch):
    os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
    torch.save(model.state_dict(), f"{OUT}/checkpoints/epoch_{epoch}.pt")
    log("eval_request", epoch_num=epoch, checkpoint=f"checkpoints/epoch_{epoch}.pt")


request(0)  # untrained: far from the threshold
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
for epoch in (1, 2):
    perm = torch.randperm(len(x))
    for i in range(0, len(x), 64):
        idx = perm[i:i + 64]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    request(epoch)
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(model.state_dict(), f"{OUT}/model/weights.pt")
log("run_stop", status="success")
