"""Adversarial entry (threat classes 1, 2, 5, 6, 7): every clock trick in one run.

Each trick would shrink the TTA of a harness that trusted the entry's own events:
  1. it trains BEFORE printing run_start (and spins for PRE_WORK_S more);
  2. it declares an evaluation window (eval_start..eval_stop) and trains inside it;
  7. it stamps every event with a fake time_ms of 0 and stalls after its request;
  5. its final model is not the model it asked to have evaluated (an untrained one);
  6. it ignores RUNNER_SEED and uses a seed of its own choosing.
"""
import json
import os
import time

import numpy as np
import torch

from blocks import build, train

PRE_WORK_S = 2.0
HIDDEN_WORK_S = 2.0
OUT = os.environ.get("RUNNER_OUTPUT", "/output")


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "time_ms": 0, "metadata": metadata}), flush=True)


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


torch.manual_seed(1234)  # class 6: a seed it likes, not the runner's
images = torch.from_numpy(np.load("/data/train/images.npy"))
labels = torch.from_numpy(np.load("/data/train/labels.npy"))
model = train(build(), images, labels)  # class 1: the real work, before run_start
spin(PRE_WORK_S)
log("run_start")
log("seed_seen", runner_seed=os.environ.get("RUNNER_SEED"))
log("eval_start", epoch_num=1)  # class 2: "evaluation" time that is really work
spin(HIDDEN_WORK_S)
log("eval_stop", epoch_num=1, predictions="none.npy")
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
torch.save(model.state_dict(), f"{OUT}/checkpoints/good.pt")
log("eval_request", epoch_num=1, checkpoint="checkpoints/good.pt")
time.sleep(1.0)  # class 7: a stall around the event
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(build().state_dict(), f"{OUT}/model/weights.pt")  # class 5: another model
log("run_stop", status="success")
