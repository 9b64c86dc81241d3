"""Fashion-MNIST to 92% top-1 on 2 CPU cores, PyTorch twin (see ../fashion-mnist-tf-cpu and
../fashion-mnist-mxnet-cpu: same network, schedule, batch size and augmentation).

Recipe (identical in the three twins; the network is in model.py):
  - 8 epochs, batch 256, Nesterov SGD (momentum 0.9, lr 0.2, weight decay 5e-4 as L2 on
    every parameter), label smoothing 0.1, one-cycle: linear warm-up over 20% of the steps,
    linear decay to 0. Augmentation: random horizontal flip (p = 0.5). fp32 throughout.
  - a checkpoint and an eval_request after every epoch (the runner's evaluations are not
    timed); the final model is the last epoch's.
Measured with the PyTorch twin on the host (outside the runner, one seed; 2-core EPYC, shared,
load average ~10; seed 1): 85.9 / 88.6 / 90.0 / 90.2 / 90.7 / 92.0 / 92.3 / 92.7% after
epochs 1-8 (a second seed crossed at epoch 7), so the crossing is epoch 6-7 and epoch 8 is the
margin; 40-74 s per epoch under that load (the TF twin: 12-19 s, measured just before). The 30 s TTA target needs ~3.5 s per epoch: not reachable in fp32 on two cores here.
Under the runner on a quiet 2-core EPYC (Zen 4, no AMX), seeds 11-13 (`runner reproduce
entries/fashion-mnist-torch-cpu --runs 3 --seed 11`): TTA median 53.7 s (CV 8%), 9.00 s per epoch,
crossing at epoch 6-7.
Written as PyTorch users would: channels_last memory (oneDNN's fast convolutions are NHWC),
torch.optim.SGD with a LambdaLR schedule, uint8 data gathered and cast per batch.
What limits it: compute. The step is convolution-bound on 2 cores in fp32 (this EPYC host
has no AMX/bf16 units the mnist entry uses), and 92% needs ~6-8 epochs of this network; on
a shared, loaded machine each epoch stretches accordingly.
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import build_model


def log(key, value=None, event_type="POINT_IN_TIME", **metadata):
    # MLPerf-style event line; the runner stamps each line on arrival, so flush every time.
    event = dict(namespace="", time_ms=int(time.time() * 1000), event_type=event_type,
                 key=key, value=value, metadata=metadata)
    print(":::MLLOG " + json.dumps(event), flush=True)


log("run_start", event_type="INTERVAL_START")

DATA = os.environ.get("RUNNER_DATA", "/data")
OUTPUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", str(os.cpu_count()))))
torch.manual_seed(SEED)

EPOCHS = 1 if SMOKE else 8
BATCH = 256
LR, MOMENTUM, WD = 0.2, 0.9, 5e-4
LABEL_SMOOTHING = 0.1
WARMUP = 0.2
log("seed", SEED)
log("global_batch_size", BATCH)

train_x = torch.from_numpy(np.load(f"{DATA}/train/images.npy"))
train_y = torch.from_numpy(np.load(f"{DATA}/train/labels.npy"))
n_train = len(train_x)
steps_per_epoch = max(1, n_train // BATCH)
if SMOKE:
    steps_per_epoch = min(steps_per_epoch, 10)
total_steps = EPOCHS * steps_per_epoch
warmup_steps = max(1, int(WARMUP * total_steps))

model = build_model().to(memory_format=torch.channels_last)
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(model)
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, nesterov=True, weight_decay=WD)


def one_cycle(step):
    # Linear warm-up, then linear decay to exactly 0 at the last step (a factor of LR).
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return (total_steps - step) / (total_steps - warmup_steps)


schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, one_cycle)


def request_evaluation(epoch):
    # The file is complete before the request is printed: the runner copies it at once.
    rel = f"checkpoints/epoch_{epoch}.pt"
    os.makedirs(f"{OUTPUT}/checkpoints", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/{rel}")
    log("eval_request", epoch_num=epoch, checkpoint=rel)


for epoch in range(1, EPOCHS + 1):
    log("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
    model.train()
    perm = torch.randperm(n_train)
    for i in range(steps_per_epoch):
        idx = perm[i * BATCH:(i + 1) * BATCH]
        x = train_x[idx].float()
        flip = torch.rand(len(idx)) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x).contiguous(memory_format=torch.channels_last)
        loss = F.cross_entropy(model(x), train_y[idx], label_smoothing=LABEL_SMOOTHING)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
    log("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch)
    request_evaluation(epoch)

os.makedirs(f"{OUTPUT}/model", exist_ok=True)
torch.save(model.state_dict(), f"{OUTPUT}/model/weights.pt")
log("run_stop", event_type="INTERVAL_END", status="success")
