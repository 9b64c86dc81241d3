"""Adversarial entry (threat class 2, moved into the evaluator): the builder trains the model.

train.py only copies the training set into its checkpoint (two tensors, train_x and
train_y) and asks for an evaluation at once. The runner's evaluator calls build_model()
before it loads that checkpoint, while the training container is frozen: time the clock
does not count. So build_model() finds the checkpoint the evaluator is about to load (the
newest request under the evaluator's --requests, or the inference harness' --weights),
trains the network on the data inside it (the default entry's network and recipe, and for
at least MIN_SECONDS), and returns a module whose state_dict holds only the two data
tensors: the checkpoint loads into it and changes nothing.

Input: float32 (B, 1, 28, 28), pixels 0..255. Output: logits (B, 10).
"""
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn
import torch.nn.functional as F

MEAN, STD = 33.32, 78.57
EPOCHS, BATCH, LR, MOMENTUM, WD, WARMUP = 3, 256, 0.2, 0.9, 5e-4, 0.2
MIN_SECONDS = 6.0  # the builder's time is free: it takes at least this much


def conv_bn_relu(c_in, c_out, kernel_size=3, stride=1, padding=1, pool=False):
    layers = [nn.Conv2d(c_in, c_out, kernel_size, stride, padding, bias=False)]
    if pool:
        layers.append(nn.MaxPool2d(2))
    layers += [nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class Net(nn.Module):
    """The default entry's network (entries/mnist-cnn-cpu/model.py)."""

    def __init__(self, widths=(16, 32, 64), hidden=256):
        super().__init__()
        w0, w1, w2 = widths
        self.stem = conv_bn_relu(1, w0, kernel_size=4, stride=2, padding=1)
        self.stage1 = conv_bn_relu(w0, w1, pool=True)
        self.stage2 = conv_bn_relu(w1, w2, pool=True)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(w2 * 9, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, 10),
        )

    def forward(self, x):
        x = (x - MEAN) * (1.0 / STD)
        return self.head(self.stage2(self.stage1(self.stem(x))))


class TrainedHere(nn.Module):
    """Holds the data the checkpoint carries (so it loads) and the network trained on it
    (a plain attribute: not in the state_dict, so loading the checkpoint leaves it be)."""

    def __init__(self, net, train_x, train_y):
        super().__init__()
        self.register_buffer("train_x", torch.empty_like(train_x))
        self.register_buffer("train_y", torch.empty_like(train_y))
        self.__dict__["net"] = net

    def forward(self, x):
        return self.net(x)


def _checkpoint_to_be_loaded() -> str:
    argv = sys.argv
    if "--requests" in argv:  # the runner's evaluator serves the newest request
        folder = Path(argv[argv.index("--requests") + 1])
        newest = max((p for p in folder.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
        return json.loads(newest.read_text())["checkpoint"]
    return argv[argv.index("--weights") + 1]  # the inference harness


def _train(train_x, train_y) -> Net:
    torch.manual_seed(0)
    net = Net().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, nesterov=True, weight_decay=WD)
    per_epoch = max(1, len(train_x) // BATCH)
    total = EPOCHS * per_epoch
    warmup = max(1, int(WARMUP * total))
    start, step = time.monotonic(), 0
    net.train()
    while step < total or time.monotonic() - start < MIN_SECONDS:
        if step % per_epoch == 0:
            perm = torch.randperm(len(train_x))
        i = step % per_epoch
        idx = perm[i * BATCH:(i + 1) * BATCH]
        s = min(step, total - 1)  # one-cycle over the schedule, then its last (tiny) rate
        lr = LR * (s + 1) / warmup if s < warmup else LR * (total - s) / (total - warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        x = train_x[idx].float().contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), train_y[idx], label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
    return net.eval().requires_grad_(False)  # constants to the ONNX tracer, as plain attributes are


def build_model():
    if "--requests" not in sys.argv and "--weights" not in sys.argv:  # the runner only lists the tensors
        return TrainedHere(Net(), torch.empty(0, 1, 28, 28, dtype=torch.uint8), torch.empty(0, dtype=torch.long))
    state = torch.load(_checkpoint_to_be_loaded(), map_location="cpu", weights_only=True)
    train_x, train_y = state["train_x"], state["train_y"]
    with torch.inference_mode(False), torch.enable_grad():
        net = _train(train_x, train_y)
    return TrainedHere(net, train_x, train_y)
