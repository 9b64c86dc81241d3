"""Adversarial entry (threat class 4): the "training" of a model that was trained before the run.

The network is in model.py (a constant); its state_dict is empty. So this writes an empty
state dict, in torch's legacy pickle format so that not even torch need be imported (the
clock runs from this process' start), asks for an evaluation at once, and saves the same
empty file as the final model.
"""
import json
import os
import pickle
import sys

OUT = os.environ.get("RUNNER_OUTPUT", "/output")


def log(key, **metadata):
    print(":::MLLOG " + json.dumps({"key": key, "value": None, "metadata": metadata}), flush=True)


def save_empty_state_dict(path):
    """What torch.save({}, path, _use_new_zipfile_serialization=False) writes."""
    with open(path, "wb") as fh:
        for item in (0x1950A86A20F9469CFC6C, 1001,
                     {"protocol_version": 1001, "little_endian": sys.byteorder == "little",
                      "type_sizes": {"short": 2, "int": 4, "long": 4}},
                     {}, []):
            pickle.dump(item, fh, protocol=2)


log("run_start")
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
save_empty_state_dict(f"{OUT}/checkpoints/epoch_1.pt")
log("eval_request", epoch_num=1, checkpoint="checkpoints/epoch_1.pt")
os.makedirs(f"{OUT}/model", exist_ok=True)
save_empty_state_dict(f"{OUT}/model/weights.pt")
log("run_stop", status="success")
