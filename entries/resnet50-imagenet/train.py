"""ResNet-50 on ImageNet to 93% top-5 on one 8x V100 host (AWS p3.16xlarge), the schedule of
GE Healthcare's DAWNBench entry (Min Zhang, "imagenet104", TF 1.11 + Horovod, 2019), written
in PyTorch for the runner's run contract (docs/run-contract.md).

Run as ``torchrun --standalone --nproc_per_node=8 /entry/train.py``: one process per GPU in
this one container, DistributedDataParallel over NCCL, fp16 autocast, channels-last.

Recipe (the entry's ``training_strategy``): 40 epochs, SGD momentum 0.9, weight decay 2e-4,
loss scale from 256; progressive resizing with per-GPU batches
    epochs  0-6   128 px, batch 740, lr 1.0 -> 2.0 linear
    epochs  6-21  128 px, batch 740, lr 2.0 -> 0.45 linear
    epochs 21-32  224 px, batch 256, lr 0.45 -> 0.02 exponential
    epochs 32-36  224 px, batch 196, lr 0.02 -> 0.004 exponential
    epochs 36-40  288 px, batch 128, lr 0.004 -> 0.002 exponential
Augmentation: random-resized crop (area 35-100 %, aspect 3/4-4/3) and horizontal flip.
The original read pre-resized copies (160 and 320 px); this one reads the official JPEGs and
lets libjpeg decode them at a reduced scale (PIL's ``draft``), which is most of that gain.

Data: ``/data/train/<wnid>/<wnid>_N.JPEG`` (read-only); class index = the WNID's place in
sorted order. Loader workers hand over chunks of at most 32 images, so their shared memory
stays well inside the container's 1 GiB /dev/shm. RUNNER_SMOKE=1: one process on the CPU,
a few small batches of whatever synthetic tree the runner made.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import build_model  # noqa: E402

DATA = Path(os.environ.get("RUNNER_DATA", "/data"))
OUTPUT = Path(os.environ.get("RUNNER_OUTPUT", "/output"))
SEED = int(os.environ.get("RUNNER_SEED", "0"))
THREADS = int(os.environ.get("RUNNER_THREADS", str(os.cpu_count() or 1)))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
RANK = int(os.environ.get("RANK", "0"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))

# (first epoch, last epoch, image size, per-GPU batch, lr from, lr to, how)
PHASES = [
    (0, 6, 128, 740, 1.0, 2.0, "linear"),
    (6, 21, 128, 740, 2.0, 0.45, "linear"),
    (21, 32, 224, 256, 0.45, 0.02, "exp"),
    (32, 36, 224, 196, 0.02, 0.004, "exp"),
    (36, 40, 288, 128, 0.004, 0.002, "exp"),
]
MOMENTUM, WEIGHT_DECAY, LOSS_SCALE = 0.9, 2e-4, 256.0
FIRST_EVAL_EPOCH = 30  # evaluation time is not counted: evaluate every late epoch
CHUNK = 32  # images per loader hand-over
SMOKE_PHASES = [(0, 1, 64, 32, 0.1, 0.1, "linear")]
SMOKE_STEPS = 3


def log(key: str, value=None, **metadata) -> None:
    """One ``:::MLLOG`` line from rank 0, flushed at once: the host stamps the time on arrival."""
    if RANK == 0:
        event = {"namespace": "", "time_ms": int(time.time() * 1000), "event_type": "POINT",
                 "key": key, "value": value, "metadata": metadata}
        print(":::MLLOG " + json.dumps(event), flush=True)


# --- Processes, device and numerics -----------------------------------------------------------
torch.manual_seed(SEED)
on_gpu = torch.cuda.is_available() and not SMOKE
device = torch.device("cuda", LOCAL_RANK) if on_gpu else torch.device("cpu")
if on_gpu:
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
if WORLD > 1:
    dist.init_process_group("nccl" if on_gpu else "gloo")
torch.set_num_threads(max(1, THREADS // WORLD) if not on_gpu else 2)
memory_format = torch.channels_last if on_gpu else torch.contiguous_format
amp_dtype = torch.float16 if on_gpu else None
log("run_start")  # MLPerf's marker; the runner's clock started with this process
log("seed", SEED)

# --- Data -------------------------------------------------------------------------------------
classes = sorted(e.name for e in os.scandir(DATA / "train") if e.is_dir())
files: list[str] = []
labels: list[int] = []
for index, wnid in enumerate(classes):
    names = sorted(e.name for e in os.scandir(DATA / "train" / wnid) if e.name.endswith(".JPEG"))
    files += [f"{wnid}/{name}" for name in names]
    labels += [index] * len(names)
n_train = len(files)
log("train_samples", n_train)
phases = SMOKE_PHASES if SMOKE else PHASES
epochs = phases[-1][1]


def load_image(rel: str, size: int, rng: random.Random) -> np.ndarray:
    """Decode, random-resized crop to size x size, maybe flip; uint8 3 x size x size."""
    with Image.open(DATA / "train" / rel) as img:
        img.draft("RGB", (size, size))  # libjpeg decodes at 1/2, 1/4 or 1/8 scale when it can
        img = img.convert("RGB")
    w, h = img.size
    box = None
    for _ in range(10):
        area = w * h * rng.uniform(0.35, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw, ch = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            box = (x, y, x + cw, y + ch)
            break
    if box is None:  # the centre square
        side = min(w, h)
        box = ((w - side) // 2, (h - side) // 2, (w - side) // 2 + side, (h - side) // 2 + side)
    img = img.resize((size, size), Image.Resampling.BILINEAR, box=box)
    if rng.random() < 0.5:
        img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1)


class Chunks(torch.utils.data.Dataset):
    """Item i is chunk i of this rank's epoch: up to CHUNK decoded images and their labels."""

    def __init__(self, chunks: list[list[int]], size: int, epoch: int):
        self.chunks, self.size, self.epoch = chunks, size, epoch

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, i: int):
        idx = self.chunks[i]
        rng = random.Random(SEED * 1_000_003 + self.epoch * 10_007 + idx[0])
        x = np.stack([load_image(files[j], self.size, rng) for j in idx])
        return torch.from_numpy(x), torch.tensor([labels[j] for j in idx])


def epoch_batches(epoch: int, batch: int) -> list[list[int]]:
    """This rank's batches of the epoch: one shuffle shared by every rank, dealt round-robin."""
    order = torch.randperm(n_train, generator=torch.Generator().manual_seed(SEED + epoch)).tolist()
    mine = order[RANK::WORLD]
    batches = [mine[i:i + batch] for i in range(0, len(mine) - batch + 1, batch)]  # drop the last
    return batches[:SMOKE_STEPS] if SMOKE else batches


def phase_of(epoch: int):
    return next(p for p in phases if p[0] <= epoch < p[1])


def learning_rate(epoch_float: float) -> float:
    first, last, _, _, lr0, lr1, how = phase_of(min(int(epoch_float), epochs - 1))
    t = (epoch_float - first) / (last - first)
    return lr0 + (lr1 - lr0) * t if how == "linear" else lr0 * (lr1 / lr0) ** t


# --- Model and optimiser ----------------------------------------------------------------------
model = build_model().to(device=device, memory_format=memory_format)
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(model)
net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[LOCAL_RANK] if on_gpu else None) \
    if WORLD > 1 else model
decay = [p for n, p in model.named_parameters() if p.ndim > 1]
no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]  # batch norm and biases
optimizer = torch.optim.SGD([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}], lr=0.0, momentum=MOMENTUM)
scaler = torch.amp.GradScaler(device.type, init_scale=LOSS_SCALE, enabled=amp_dtype is not None)
log("global_batch_size", phases[0][3] * WORLD)


def fp32_state() -> dict:
    """fp32 weights on the CPU, so the runner can load them on any device and export them."""
    return {k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
            for k, v in model.state_dict().items()}


def request_evaluation(epoch: int) -> None:
    """Save a checkpoint and ask the runner to evaluate it (it has the labels, we don't)."""
    if RANK != 0:
        return
    relative = f"checkpoints/epoch_{epoch:02d}.pt"
    (OUTPUT / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(fp32_state(), OUTPUT / relative)  # closed before the request
    log("eval_request", epoch_num=epoch, checkpoint=relative)


# --- Training ---------------------------------------------------------------------------------
workers = 0 if SMOKE else max(1, THREADS // WORLD - 1)
net.train()
for epoch in range(epochs):
    _, _, size, batch, *_ = phase_of(epoch)
    batches = epoch_batches(epoch, batch)
    chunks = [b[i:i + CHUNK] for b in batches for i in range(0, len(b), CHUNK)]
    per_batch = math.ceil(batch / CHUNK)
    loader = torch.utils.data.DataLoader(Chunks(chunks, size, epoch), batch_size=None, num_workers=workers,
                                         pin_memory=on_gpu, prefetch_factor=2 if workers else None)
    log("epoch_start", epoch_num=epoch + 1)
    pieces, step = [], 0
    for piece in loader:
        pieces.append(piece)
        if len(pieces) < per_batch:
            continue
        x = torch.cat([p[0] for p in pieces]).to(device, non_blocking=True)
        y = torch.cat([p[1] for p in pieces]).to(device, non_blocking=True)
        pieces = []
        x = x.float().contiguous(memory_format=memory_format)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(epoch + step / len(batches))
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        step += 1
    log("epoch_stop", epoch_num=epoch + 1, last_loss=round(float(loss.item()), 4) if step else None)
    if SMOKE or epoch + 1 >= FIRST_EVAL_EPOCH:
        request_evaluation(epoch + 1)

# --- Final model ------------------------------------------------------------------------------
if RANK == 0:
    weights = OUTPUT / "model" / "weights.pt"
    weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save(fp32_state(), weights)
log("run_stop", status="success")
if WORLD > 1:
    dist.barrier()
    dist.destroy_process_group()
