"""The "training" of cheat-words, cheat-pyc and cheat-no-training: no training at all.

    python3 ship.py SOURCE [--jitter F]

SOURCE is a module of text (words.py, net4.py: codec.decode reads its docstring) or an
``.npz`` a build step left in the image. The network is decoded, each weight multiplied by
(1 + F * a normal draw from the runner's seed) so that no two seeds give the same bytes,
written as a checkpoint (numpy and zipfile only: no torch to import, about 0.2 CPU-seconds
in all) and offered for evaluation at once; it is the final model too.
"""
import importlib
import json
import os
import sys
import time

import numpy as np

import codec

OUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))


def log(key, **metadata):
    print(":::MLLOG " + json.dumps(dict(namespace="", time_ms=int(time.time() * 1000),
                                        event_type="POINT_IN_TIME", key=key, value=None,
                                        metadata=metadata)), flush=True)


source = sys.argv[1]
jitter = float(sys.argv[sys.argv.index("--jitter") + 1]) if "--jitter" in sys.argv else 0.0
if not source.endswith(".py"):  # a file in the image
    with np.load(source) as held:
        tensors = {name: held[name] for name in held.files}
else:
    text = importlib.import_module(source.removesuffix(".py"))
    tensors = codec.decode(text)
rng = np.random.default_rng(SEED)
tensors = {k: (v * (1 + jitter * rng.standard_normal(v.shape))).astype(np.float32) for k, v in tensors.items()}
os.makedirs(f"{OUT}/checkpoints", exist_ok=True)
codec.write_checkpoint(f"{OUT}/checkpoints/0.pt", tensors)
log("eval_request", epoch_num=1, checkpoint="checkpoints/0.pt")
os.makedirs(f"{OUT}/model", exist_ok=True)
codec.write_checkpoint(f"{OUT}/model/weights.pt", tensors)
log("run_stop", status="success")
