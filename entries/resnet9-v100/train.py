"""CIFAR10 to 94% with ResNet-9 on one V100: the recipe of the DAWNBench entries by Myrtle.ai
(David Page, "How to train your ResNet"), written for the runner's run contract
(docs/run-contract.md).

Recipe: 24 epochs, batch 512, SGD with Nesterov momentum 0.9, weight decay 5e-4, a one-cycle
(piecewise linear) learning rate 0 -> 0.4 at epoch 5 -> 0 at epoch 24, augmentation by
reflect-pad 4 + random 32x32 crop, horizontal flip and an 8x8 cutout; fp16 on the GPU.

Reads /data/train/{images,labels}.npy, reports MLPerf-style events on stdout, saves a
checkpoint for the runner to evaluate (it freezes this container meanwhile) and the final
weights to /output/model/weights.pt. RUNNER_SMOKE=1 runs one short epoch (CPU is fine).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import CIFAR10_MEAN, build_model  # noqa: E402

DATA = Path(os.environ.get("RUNNER_DATA", "/data"))
OUTPUT = Path(os.environ.get("RUNNER_OUTPUT", "/output"))
SEED = int(os.environ.get("RUNNER_SEED", "0"))
THREADS = int(os.environ.get("RUNNER_THREADS", str(os.cpu_count() or 1)))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"

# The recipe's hyperparameters. Page sums the loss over the batch and uses lr/512 and
# weight decay 5e-4*512; with a mean loss the same SGD steps come from lr and 5e-4 as is.
EPOCHS = 24
BATCH_SIZE = 512
PEAK_LR = 0.4
PEAK_EPOCH = 5
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
FIRST_EVAL_EPOCH = 20  # evaluation time is not counted, so evaluating each late epoch is free

# Smoke runs: a few batches of one epoch on whatever synthetic set the runner made.
SMOKE_STEPS = 3
SMOKE_BATCH_SIZE = 32


def log(key: str, value=None, **metadata) -> None:
    """One ``:::MLLOG`` line, flushed at once: the host stamps the time on arrival."""
    event = {"namespace": "", "time_ms": int(time.time() * 1000), "event_type": "POINT",
             "key": key, "value": value, "metadata": metadata}
    print(":::MLLOG " + json.dumps(event), flush=True)


# --- Device and numerics ---------------------------------------------------------------------
# fp16 autocast with channels_last uses the V100's Tensor Cores; the CPU path (smoke runs
# only) stays in fp32.
torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(THREADS)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
on_gpu = device.type == "cuda"
if on_gpu:
    torch.backends.cudnn.benchmark = True  # fixed input shapes: let cuDNN pick the fastest convs
memory_format = torch.channels_last if on_gpu else torch.contiguous_format
amp_dtype = torch.float16 if on_gpu else None

log("run_start")  # MLPerf's marker; the runner's clock started with this process
log("seed", SEED)

# --- Data -------------------------------------------------------------------------------------
# The whole training set lives on the device as uint8 (150 MB for CIFAR10), so batches and
# their augmentation never leave it.
train_images = torch.from_numpy(np.load(DATA / "train" / "images.npy")).to(device)
train_labels = torch.from_numpy(np.load(DATA / "train" / "labels.npy")).long().to(device)
n_train = len(train_images)

batch_size = min(SMOKE_BATCH_SIZE, n_train) if SMOKE else BATCH_SIZE
epochs = 1 if SMOKE else EPOCHS
steps_per_epoch = n_train // batch_size  # the last partial batch is dropped, as in the recipe
if SMOKE:
    steps_per_epoch = min(steps_per_epoch, SMOKE_STEPS)
total_steps = epochs * steps_per_epoch
log("global_batch_size", batch_size)
log("train_samples", n_train)

# Cutout fills with the mean pixel, which is what zero meant in the recipe's normalised space.
fill = torch.tensor(CIFAR10_MEAN, device=device).view(1, 3, 1, 1) * 255
offsets = torch.arange(32, device=device)


def augment(images: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """uint8 (B,3,32,32) -> float32 raw pixels, randomly cropped, flipped and cut out."""
    b = len(images)
    x = F.pad(images.float(), (4, 4, 4, 4), mode="reflect")  # (B,3,40,40)
    # Random 32x32 crop: one (dy, dx) per image, gathered with broadcast index grids.
    dy = torch.randint(0, 9, (b,), device=device, generator=gen)
    dx = torch.randint(0, 9, (b,), device=device, generator=gen)
    rows = (dy[:, None] + offsets)[:, None, :, None]
    cols = (dx[:, None] + offsets)[:, None, None, :]
    x = x[torch.arange(b, device=device)[:, None, None, None],
          torch.arange(3, device=device)[None, :, None, None], rows, cols]
    # Horizontal flip for half of the images.
    flip = torch.rand(b, device=device, generator=gen) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    # Cutout: one 8x8 square per image, wholly inside it.
    y0 = torch.randint(0, 32 - 8 + 1, (b,), device=device, generator=gen)
    x0 = torch.randint(0, 32 - 8 + 1, (b,), device=device, generator=gen)
    in_y = (offsets >= y0[:, None]) & (offsets < y0[:, None] + 8)
    in_x = (offsets >= x0[:, None]) & (offsets < x0[:, None] + 8)
    box = (in_y[:, :, None] & in_x[:, None, :])[:, None]
    return torch.where(box, fill, x)


# --- Model and optimiser ----------------------------------------------------------------------
model = build_model().to(device=device, memory_format=memory_format)
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.0, momentum=MOMENTUM, nesterov=True,
                            weight_decay=WEIGHT_DECAY)
# Loss scaling keeps small fp16 gradients from flushing to zero; a no-op in fp32.
scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

# One-cycle schedule, updated every step: linear up to PEAK_LR at epoch 5 of 24, then down
# to 0 at the end. Shorter runs (smoke) keep the same shape over fewer steps.
knots = [0.0, PEAK_EPOCH / EPOCHS * total_steps, float(total_steps)]


def learning_rate(step: int) -> float:
    return float(np.interp(step, knots, [0.0, PEAK_LR, 0.0]))


def autocast():
    return torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)


def fp32_state() -> dict:
    """fp32 weights on the CPU, so the runner can load them on any device and export them."""
    return {k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
            for k, v in model.state_dict().items()}


def request_evaluation(epoch: int) -> None:
    """Save a checkpoint and ask the runner to evaluate it (it has the labels, we don't)."""
    relative = f"checkpoints/epoch_{epoch:02d}.pt"
    (OUTPUT / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(fp32_state(), OUTPUT / relative)  # closed before the request
    log("eval_request", epoch_num=epoch, checkpoint=relative)


# --- Training ---------------------------------------------------------------------------------
gen = torch.Generator(device=device).manual_seed(SEED)
step = 0
model.train()
for epoch in range(1, epochs + 1):
    log("epoch_start", epoch_num=epoch)
    order = torch.randperm(n_train, device=device, generator=gen)
    for i in range(steps_per_epoch):
        idx = order[i * batch_size:(i + 1) * batch_size]
        x = augment(train_images[idx], gen).contiguous(memory_format=memory_format)
        y = train_labels[idx]
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
        with autocast():
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        step += 1
    log("epoch_stop", epoch_num=epoch, last_loss=round(loss.item(), 4))
    if SMOKE or epoch >= FIRST_EVAL_EPOCH:
        request_evaluation(epoch)

# --- Final model ------------------------------------------------------------------------------
weights = OUTPUT / "model" / "weights.pt"
weights.parent.mkdir(parents=True, exist_ok=True)
torch.save(fp32_state(), weights)
log("run_stop", status="success")
