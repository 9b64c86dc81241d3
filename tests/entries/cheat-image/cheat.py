"""Adversarial entry (threat class 4): its model was trained before the run.

The weights come with the entry folder (pretrained.pt; the test writes it, and blocks.py, as an author
would ship them) and a Dockerfile RUN step leaves a data file in the image; the run only
loads the weights and asks for an evaluation at once.
"""
import json
import os

import torch

OUT = os.environ.get("RUNNER_OUTPUT", "/output")


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "metadata": metadata}), flush=True)


state = torch.load("/entry/pretrained.pt", weights_only=True)
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
os.makedirs(f"{OUT}/model", exist_ok=True)
torch.save(state, f"{OUT}/checkpoints/0.pt")
log("eval_request", epoch_num=0, checkpoint="checkpoints/0.pt")
torch.save(state, f"{OUT}/model/weights.pt")
