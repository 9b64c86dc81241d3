"""MNIST to 99.3% top-1 in ~5.5 s on 2 CPU cores (Sapphire Rapids, AMX).

Recipe (everything below runs in this order; the network is in model.py):
  - net: 4x4/2 stem (16 ch) -> conv 32 -> pool -> conv 64 -> pool -> flatten -> FC 256 -> 10,
    BatchNorm + ReLU, pool before BN, channels_last; 174k parameters.
  - 3-epoch schedule, batch 256, Nesterov SGD (momentum 0.9, lr 0.2, wd 5e-4), label
    smoothing 0.1, one-cycle: linear warm-up over 20% of the steps, linear decay to 0.
  - bf16 autocast for training where the CPU computes bf16 natively (AMX: a step is
    ~1.9x faster than fp32; AVX512-BF16 on Zen 4/5), fp32 elsewhere (on an AVX2-only Zen 3
    bf16 is emulated: 1.17 s a step against 0.039 s in fp32, measured), fp32 for
    evaluation and for the saved model.
  - evaluate after every epoch (free: evaluation time is not counted). The planned
    crossing is the end of epoch 2 (99.30-99.51% over seeds 0-8); epoch 3 is the safety
    net and the saved model (99.41-99.52%).
Measured here with 2 threads: ~2.4 s per epoch (the first ~0.5 s more: one-time oneDNN
kernel setup); TTA 5.4-5.6 s (crossing at epoch 2) on a quiet machine.

Switches (entry.yaml's `switches:`; `runner study lesion|factors` turns them off, unset is on):
RUNNER_SWITCH_BF16=0 trains in fp32, RUNNER_SWITCH_ONE_CYCLE=0 keeps the learning rate
constant, RUNNER_SWITCH_LABEL_SMOOTHING=0 uses plain cross-entropy, RUNNER_SWITCH_CHANNELS_LAST=0
trains in NCHW; the batch switch is RUNNER_HP_GLOBAL_BATCH_SIZE / RUNNER_HP_LR. Several
processes (`runner study scaling`: WORLD_SIZE > 1, gloo) each take a slice of every batch and
average the gradients; one process (the recipe) never touches torch.distributed.
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import build_model


RANK = int(os.environ.get("RANK", "0"))  # several processes (`runner study scaling`)
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


def log(key, value=None, event_type="POINT_IN_TIME", **metadata):
    # MLPerf-style event line; the harness stamps each line on arrival, so flush every time.
    if RANK:  # rank 0's events are the run's events
        return
    event = dict(namespace="", time_ms=int(time.time() * 1000), event_type=event_type,
                 key=key, value=value, metadata=metadata)
    print(":::MLLOG " + json.dumps(event), flush=True)


# MLPerf-compatible marker only: the runner's clock started when its launcher ran us.
log("run_start", event_type="INTERVAL_START")

# ---- configuration ----------------------------------------------------------------------
DATA = os.environ.get("RUNNER_DATA", "/data")
OUTPUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
torch.set_num_threads(int(os.environ.get("RUNNER_THREADS", str(os.cpu_count()))))
torch.manual_seed(SEED)

# A 3-epoch schedule already crosses at the end of epoch 2 (a 2-epoch schedule crosses at
# about the same time but with a 0.03% margin); epoch 3 gives the saved model its margin.
EPOCHS = 1 if SMOKE else 3
# `runner study batch-size` varies these (entry.yaml's hyperparameters); unset: the recipe's.
BATCH = int(os.environ.get("RUNNER_HP_GLOBAL_BATCH_SIZE") or 256)  # 512: no faster per image, more epochs
LR = float(os.environ.get("RUNNER_HP_LR") or 0.2)
MOMENTUM, WD = 0.9, 5e-4


def switch(name):
    """A declared switch (entry.yaml): on unless the runner set RUNNER_SWITCH_<NAME>=0."""
    return os.environ.get(f"RUNNER_SWITCH_{name}") != "0"


ONE_CYCLE = switch("ONE_CYCLE")
CHANNELS_LAST = switch("CHANNELS_LAST")
LAYOUT = torch.channels_last if CHANNELS_LAST else torch.contiguous_format
LABEL_SMOOTHING = 0.1 if switch("LABEL_SMOOTHING") else 0.0  # 0.1: best of 0 / 0.1 / 0.2 in our sweeps
WARMUP = 0.2                     # fraction of steps spent warming up the learning rate
log("seed", SEED)
log("global_batch_size", BATCH)


def native_bf16() -> bool:
    """The CPU has bf16 arithmetic (AMX or AVX512-BF16); elsewhere autocast emulates it, slowly."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line for line in fh if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


NATIVE_BF16 = native_bf16() and switch("BF16")

# ---- data -------------------------------------------------------------------------------
# Kept as uint8 (47 MB); each batch is gathered and cast to float32 on the fly (~0.04 s an
# epoch, measured). No normalisation here: the model does it internally.
train_x = torch.from_numpy(np.load(f"{DATA}/train/images.npy"))
train_y = torch.from_numpy(np.load(f"{DATA}/train/labels.npy"))
n_train = len(train_x)
steps_per_epoch = max(1, n_train // BATCH)
if SMOKE:
    steps_per_epoch = min(steps_per_epoch, 10)
total_steps = EPOCHS * steps_per_epoch

# ---- model and optimiser ----------------------------------------------------------------
# channels_last (the builder's layout): oneDNN's fast conv kernels are NHWC; NCHW was
# 1.6-1.9x slower (measured).
model = build_model()
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(model)
if not CHANNELS_LAST:
    model = model.to(memory_format=LAYOUT)
params = list(model.parameters())
momentum_buffers = [torch.zeros_like(p) for p in params]
warmup_steps = max(1, int(WARMUP * total_steps))


def lr_at(step):
    # One-cycle: linear warm-up, then linear decay to exactly 0 at the last step.
    if not ONE_CYCLE:
        return LR
    if step < warmup_steps:
        return LR * (step + 1) / warmup_steps
    return LR * (total_steps - step) / (total_steps - warmup_steps)


if WORLD > 1:  # several processes: the same seed gives every rank the same start and order
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(minutes=2))  # MASTER_ADDR etc. from the runner
    comm_seconds = 0.0


@torch.no_grad()
def average_gradients():
    # One all_reduce of every gradient, flattened; its time is logged per epoch.
    global comm_seconds
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    started = time.perf_counter()
    dist.all_reduce(flat)
    comm_seconds += time.perf_counter() - started
    flat /= WORLD
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


@torch.no_grad()
def sgd_step(lr):
    # Nesterov SGD with coupled weight decay, the same update as torch.optim.SGD(nesterov=True).
    # Hand-written because constructing torch.optim.SGD imports torch._dynamo: ~1 s of the
    # timed window on this machine (measured), a fifth of the whole run.
    grads = [p.grad for p in params]
    torch._foreach_add_(grads, params, alpha=WD)
    torch._foreach_mul_(momentum_buffers, MOMENTUM)
    torch._foreach_add_(momentum_buffers, grads)
    torch._foreach_add_(grads, momentum_buffers, alpha=MOMENTUM)
    torch._foreach_add_(params, grads, alpha=-lr)


def request_evaluation(epoch):
    # The runner evaluates the checkpoint itself (fp32, eval-mode BN) while this process is
    # frozen; the file must be complete before the request is printed.
    rel = f"checkpoints/epoch_{epoch}.pt"
    os.makedirs(f"{OUTPUT}/checkpoints", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/{rel}")
    log("eval_request", epoch_num=epoch, checkpoint=rel)


# ---- training ---------------------------------------------------------------------------
step = 0
for epoch in range(1, EPOCHS + 1):
    log("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
    perm = torch.randperm(n_train)
    for i in range(steps_per_epoch):
        idx = perm[i * BATCH:(i + 1) * BATCH]
        if WORLD > 1:
            idx = idx[RANK::WORLD]  # this rank's slice of the global batch
        x = train_x[idx].float().contiguous(memory_format=LAYOUT)
        # bf16 autocast: AMX bf16 convs/matmuls make a step ~1.9x faster than fp32 (measured).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=NATIVE_BF16):
            loss = F.cross_entropy(model(x), train_y[idx], label_smoothing=LABEL_SMOOTHING)
        model.zero_grad(set_to_none=True)
        loss.backward()
        if WORLD > 1:
            average_gradients()
        sgd_step(lr_at(step))
        step += 1
    log("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch)
    if WORLD > 1:  # the time this rank spent in all_reduce this epoch (its own clock)
        log("communication_seconds", round(comm_seconds, 4), epoch_num=epoch)
        comm_seconds = 0.0
    # Evaluation time is not counted, so ask for one after every epoch: the runner takes
    # the first crossing (planned: epoch 2), and the schedule still runs to its end.
    if RANK == 0:
        request_evaluation(epoch)

# ---- final model (after the last checkpoint; the timed model of the inference phase) ----
if RANK == 0:
    os.makedirs(f"{OUTPUT}/model", exist_ok=True)
    torch.save(model.state_dict(), f"{OUTPUT}/model/weights.pt")
log("run_stop", event_type="INTERVAL_END", status="success")
if WORLD > 1:
    # The runner freezes every rank a few ms after rank 0's last request: the others wait in
    # the barrier until then, so the freeze finds them all; then no rank runs the interpreter's
    # teardown, where gloo's threads can crash once a peer has gone (tests/entries/gloo-pair).
    if RANK == 0:
        time.sleep(0.5)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)
