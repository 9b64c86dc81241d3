"""Adversarial entry: no training here. The training set goes into the checkpoint and the
model (model.py) trains on it in its first forward pass inside the runner's evaluator, on
time the clock does not count. The final model is the same file."""
import json
import os

import numpy as np
import torch

DATA = os.environ.get("RUNNER_DATA", "/data")
OUT = os.environ.get("RUNNER_OUTPUT", "/output")


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "value": None, "metadata": metadata}), flush=True)


log("run_start")
state = {"train_x": torch.from_numpy(np.load(f"{DATA}/train/images.npy")),
         "train_y": torch.from_numpy(np.load(f"{DATA}/train/labels.npy"))}
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
torch.save(state, f"{OUT}/checkpoints/epoch_1.pt")
log("eval_request", epoch_num=1, checkpoint="checkpoints/epoch_1.pt")
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(state, f"{OUT}/model/weights.pt")
log("run_stop", status="success")
