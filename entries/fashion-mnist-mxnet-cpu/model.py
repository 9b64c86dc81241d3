"""The twins' network, in MXNet Gluon (a HybridBlock: hybridized into a static graph).

Same network in all three twins: 4x4/2 stem (16 ch) -> conv 32 -> pool -> conv 64 -> pool
-> flatten -> FC 256 -> 10, BatchNorm + ReLU after each pool, normalisation inside the
model. Input: float32 (B, 1, 28, 28) NCHW (MXNet's native layout), pixels 0..255.
``build_model`` returns the uninitialised block; the runner's harness loads the saved
``save_parameters`` file into it.
"""
from mxnet.gluon import nn

MEAN, STD = 72.94, 90.02  # Fashion-MNIST training-set pixel mean and std, 0..255 units


class Normalise(nn.HybridBlock):
    def hybrid_forward(self, F, x):
        return (x - MEAN) * (1.0 / STD)


def conv_bn_relu(block, channels, kernel_size=3, strides=1, padding=1, pool=False):
    block.add(nn.Conv2D(channels, kernel_size, strides=strides, padding=padding, use_bias=False))
    if pool:
        block.add(nn.MaxPool2D(2))  # before BN/ReLU: the elementwise ops run on 4x fewer pixels
    block.add(nn.BatchNorm(momentum=0.9, epsilon=1e-5), nn.Activation("relu"))


def build_model(widths=(16, 32, 64), hidden=256):
    w0, w1, w2 = widths
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(Normalise())
        conv_bn_relu(net, w0, kernel_size=4, strides=2)   # 14x14
        conv_bn_relu(net, w1, pool=True)                  # 7x7
        conv_bn_relu(net, w2, pool=True)                  # 3x3
        net.add(nn.Flatten(), nn.Dense(hidden, use_bias=False),
                nn.BatchNorm(momentum=0.9, epsilon=1e-5), nn.Activation("relu"), nn.Dense(10))
    return net
