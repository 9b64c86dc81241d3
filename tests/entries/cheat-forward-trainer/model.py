"""Adversarial entry (threat class 2, inside the evaluator's forward pass): the model trains
itself the first time it is called.

train.py only copies the training set into its checkpoint (two tensors, train_x and
train_y) and asks for an evaluation at once. The builder returns at once (no builder time
to bound); the checkpoint loads into two registered buffers (every tensor the model reads
is the checkpoint's); permuting the checkpoint breaks it (it trains on shuffled data). The
first forward pass trains the default entry's network on the checkpoint's data (its recipe,
for at least MIN_SECONDS) in evaluation time: time the clock does not count.

Input: float32 (B, 1, 28, 28), pixels 0..255. Output: logits (B, 10).
"""
import time

import torch
from torch import nn
import torch.nn.functional as F

MEAN, STD = 33.32, 78.57
EPOCHS, BATCH, LR, MOMENTUM, WD, WARMUP = 3, 256, 0.2, 0.9, 5e-4, 0.2
MIN_SECONDS = 10.0  # the evaluation's time is free: training takes at least this much (over the 5 s floor)


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


class TrainsInForward(nn.Module):
    """Holds the data the checkpoint carries (registered buffers: they load from it) and
    trains on it in its first forward pass: after the builder's bound, in evaluation time. The trained network is a plain attribute."""

    def __init__(self):
        super().__init__()
        self.register_buffer("train_x", torch.zeros(0, 1, 28, 28, dtype=torch.uint8))
        self.register_buffer("train_y", torch.zeros(0, dtype=torch.int64))
        self.__dict__["net"] = None

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("train_x", "train_y"):  # take the data set's size before loading it
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x):
        if self.__dict__["net"] is None:
            with torch.inference_mode(False), torch.enable_grad():
                self.__dict__["net"] = _train(self.train_x.clone(), self.train_y.clone())
        return self.__dict__["net"](x)


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
    return TrainsInForward()
