"""Data-parallel MNIST on two processes with torch.distributed (gloo, CPU, one core each).

The runner starts one container per rank and gives each torchrun's variables (MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK). Every rank trains on its half of each global batch and the
gradients are averaged with all_reduce; rank 0 alone logs events, saves the checkpoints it
asks the runner to evaluate (the runner freezes every rank meanwhile) and the final model.
"""
import json
import os
import sys
import socket
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from model import build_model

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])


def log(key, value=None, event_type="POINT_IN_TIME", **metadata):
    if RANK == 0:  # rank 0's events are the run's events
        event = dict(namespace="", time_ms=int(time.time() * 1000), event_type=event_type,
                     key=key, value=value, metadata=metadata)
        print(":::MLLOG " + json.dumps(event), flush=True)


log("run_start", event_type="INTERVAL_START")
DATA, OUTPUT = os.environ["RUNNER_DATA"], os.environ["RUNNER_OUTPUT"]
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", "1")))
torch.manual_seed(int(os.environ.get("RUNNER_SEED", "0")))  # same init and order on every rank
dist.init_process_group("gloo", timeout=timedelta(minutes=2))
print(f"rank {RANK} of {WORLD} joined", flush=True)

# 3 epochs, global batch 256, Nesterov SGD with a linear one-cycle: crosses 99.3% at epoch 2-3.
EPOCHS, BATCH, LR = (1 if SMOKE else 3), 256, 0.2
train_x = torch.from_numpy(np.load(f"{DATA}/train/images.npy"))
train_y = torch.from_numpy(np.load(f"{DATA}/train/labels.npy"))
steps = len(train_x) // BATCH if not SMOKE else 5
model = build_model().to(memory_format=torch.channels_last)
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(model)
opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, nesterov=True, weight_decay=5e-4)
warmup = max(1, EPOCHS * steps // 5)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / warmup if s < warmup
                                          else (EPOCHS * steps - s) / (EPOCHS * steps - warmup))


def request_evaluation(epoch):
    os.makedirs(f"{OUTPUT}/checkpoints", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/checkpoints/epoch_{epoch}.pt")
    log("eval_request", epoch_num=epoch, checkpoint=f"checkpoints/epoch_{epoch}.pt")


for epoch in range(1, EPOCHS + 1):
    log("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
    perm = torch.randperm(len(train_x))
    for i in range(steps):
        idx = perm[i * BATCH:(i + 1) * BATCH][RANK::WORLD]  # this rank's half of the batch
        x = train_x[idx].float().contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), train_y[idx], label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= WORLD
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        opt.step()
        sched.step()
    log("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch)
    if RANK == 0:
        request_evaluation(epoch)

if RANK == 0:
    os.makedirs(f"{OUTPUT}/model", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/model/weights.pt")
    # After the last evaluation, so outside the timed window: the run's network must have no
    # route out (peers are reachable, as training just showed).
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        print("route out: yes", flush=True)
    except OSError:
        print("route out: no", flush=True)
    # The runner freezes on seeing the last request, a few ms after it: until then rank 1
    # waits in the barrier below, so the freeze finds every rank alive (the tests check
    # that each freeze paused both); without this, rank 1 could be gone by then.
    time.sleep(0.5)
dist.barrier()
dist.destroy_process_group()
log("run_stop", event_type="INTERVAL_END", status="success")
# Past this point only the interpreter's teardown is left. Once (in a clean-clone CI run)
# rank 1 died there with SIGSEGV after its peer had gone, gloo's threads still winding
# down: nothing is left to do, so no rank runs that teardown (everything is flushed).
os._exit(0)
