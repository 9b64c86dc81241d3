"""Adversarial entry (threat class 3): answers that are not a model's.

It trains nothing. It writes a perfect predictions file of its own (from the answers it
carries) and declares an evaluation of it, and it asks the runner to evaluate a
"checkpoint" whose builder recalls the answers by exact pixels (recall.py).
"""
import json
import os

import numpy as np
import torch

from answers import LABELS
from recall import build

OUT = os.environ.get("RUNNER_OUTPUT", "/output")


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "metadata": metadata}), flush=True)


log("run_start")
np.save(f"{OUT}/predictions.npy", np.array(LABELS, dtype=np.int64))
log("eval_start", epoch_num=0)
log("eval_stop", epoch_num=0, predictions="predictions.npy")
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(build().state_dict(), f"{OUT}/checkpoints/0.pt")
log("eval_request", epoch_num=0, checkpoint="checkpoints/0.pt")
torch.save(build().state_dict(), f"{OUT}/model/weights.pt")
log("run_stop", status="success")
