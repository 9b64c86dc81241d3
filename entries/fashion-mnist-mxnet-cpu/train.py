"""Fashion-MNIST to 92% top-1 on 2 CPU cores, MXNet 1.9 Gluon twin (see
../fashion-mnist-torch-cpu and ../fashion-mnist-tf-cpu: same network, schedule, batch size
and augmentation).

Recipe (identical in the three twins; the network is in model.py):
  - 8 epochs, batch 256, Nesterov SGD (MXNet's 'nag': momentum 0.9, lr 0.2, weight decay
    5e-4 as L2 on every parameter), label smoothing 0.1, one-cycle: linear warm-up over 20%
    of the steps, linear decay to 0. Augmentation: random horizontal flip (p = 0.5). fp32.
  - a checkpoint (save_parameters) and an eval_request after every epoch; the final model
    is the last epoch's.
Measured with the PyTorch twin on the host (outside the runner, one seed; 2-core EPYC, shared,
load average ~10): 86.2 / 88.7 / 90.2 / 91.2 / 91.2 / 91.9 / 92.2 / 92.6% after epochs 1-8,
so the planned crossing is epoch 7 and epoch 8 is the margin; 28-61 s per epoch under that
load. The 30 s TTA target needs ~3.5 s per epoch: not reachable in fp32 on two cores here.
This twin on the same host (seed 1): 87.2 / 89.0 / 90.3 / 90.1 / 91.4 / 91.8 / 91.7 / 92.5%,
crossing at epoch 8 only; 15-31 s per epoch (median ~20 s) under the same load.
Under the runner on a quiet 2-core EPYC (Zen 4, no AMX), seeds 11-13 (`runner reproduce
entries/fashion-mnist-mxnet-cpu --runs 3 --seed 11`): TTA median 51.7 s (CV 1%), 8.13 s per epoch,
crossing at epoch 7.
Written as MXNet users would: a hybridized Gluon block (static_alloc/static_shape cached
graph) and a hybridized loss, Xavier initialisation (Gluon's model-zoo default), NCHW
(MXNet's MKLDNN kernels take it natively), batches built with nd ops on the CPU context.
What limits it: compute (convolution-bound in fp32 on 2 cores); MXNet's asynchronous engine
overlaps little on 2 cores, and 92% needs ~6-8 epochs of this network.
"""
import json
import os
import sys
import time


def log(key, value=None, event_type="POINT_IN_TIME", **metadata):
    # MLPerf-style event line; the runner stamps each line on arrival, so flush every time.
    event = dict(namespace="", time_ms=int(time.time() * 1000), event_type=event_type,
                 key=key, value=value, metadata=metadata)
    print(":::MLLOG " + json.dumps(event), flush=True)


log("run_start", event_type="INTERVAL_START")
THREADS = int(os.environ.get("RUNNER_THREADS", str(os.cpu_count())))
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))  # MXNet reads it at import

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402

from model import build_model  # noqa: E402

DATA = os.environ.get("RUNNER_DATA", "/data")
OUTPUT = os.environ.get("RUNNER_OUTPUT", "/output")
SEED = int(os.environ.get("RUNNER_SEED", "0"))
SMOKE = os.environ.get("RUNNER_SMOKE") == "1"
mx.random.seed(SEED)
rng = np.random.default_rng(SEED)

EPOCHS = 1 if SMOKE else 8
BATCH = 256
LR, MOMENTUM, WD = 0.2, 0.9, 5e-4
LABEL_SMOOTHING = 0.1
WARMUP = 0.2
log("seed", SEED)
log("global_batch_size", BATCH)

train_x = np.load(f"{DATA}/train/images.npy")  # uint8 NCHW; each batch cast on the fly
train_y = np.load(f"{DATA}/train/labels.npy")
n_train = len(train_x)
steps_per_epoch = max(1, n_train // BATCH)
if SMOKE:
    steps_per_epoch = min(steps_per_epoch, 10)
total_steps = EPOCHS * steps_per_epoch
warmup_steps = max(1, int(WARMUP * total_steps))


def lr_at(step):
    # One-cycle: linear warm-up, then linear decay to exactly 0 at the last step.
    if step < warmup_steps:
        return LR * (step + 1) / warmup_steps
    return LR * (total_steps - step) / (total_steps - warmup_steps)


ctx = mx.cpu()
net = build_model()
net.initialize(mx.init.Xavier(magnitude=2.24), ctx=ctx)
# Training starts from the weights the runner drew for this run (run contract, "Initial weights").
sys.path.insert(0, os.environ.get("RUNNER_INIT", "/init")); import runner_init  # noqa: E402,E702
runner_init.load(net)
net.hybridize(static_alloc=True, static_shape=True)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False)
loss_fn.hybridize(static_alloc=True, static_shape=True)
trainer = gluon.Trainer(net.collect_params(), "nag", {"learning_rate": LR, "momentum": MOMENTUM, "wd": WD})


def request_evaluation(epoch):
    # The file is complete before the request is printed: the runner copies it at once.
    rel = f"checkpoints/epoch_{epoch}.params"
    os.makedirs(f"{OUTPUT}/checkpoints", exist_ok=True)
    net.save_parameters(f"{OUTPUT}/{rel}")
    log("eval_request", epoch_num=epoch, checkpoint=rel)


step = 0
for epoch in range(1, EPOCHS + 1):
    log("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
    perm = rng.permutation(n_train)
    for i in range(steps_per_epoch):
        idx = np.sort(perm[i * BATCH:(i + 1) * BATCH])  # sorted: a cache-friendlier gather
        x = nd.array(train_x[idx], ctx=ctx, dtype="float32")
        flip = nd.random.uniform(shape=(len(idx),), ctx=ctx) < 0.5
        x = nd.where(flip, nd.flip(x, axis=3), x)
        target = nd.one_hot(nd.array(train_y[idx], ctx=ctx), 10) * (1 - LABEL_SMOOTHING) + LABEL_SMOOTHING / 10
        with autograd.record():
            loss = loss_fn(net(x), target)
        loss.backward()
        trainer.set_learning_rate(lr_at(step))
        trainer.step(len(idx))  # the loss is per item: step() averages over the batch
        step += 1
    nd.waitall()
    log("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch)
    request_evaluation(epoch)

os.makedirs(f"{OUTPUT}/model", exist_ok=True)
net.save_parameters(f"{OUTPUT}/model/model.params")
log("run_stop", event_type="INTERVAL_END", status="success")
