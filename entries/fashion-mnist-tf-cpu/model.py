"""The twins' network, in Keras (channels-last, TensorFlow's CPU layout).

Same network in all three twins: 4x4/2 stem (16 ch) -> conv 32 -> pool -> conv 64 -> pool
-> flatten -> FC 256 -> 10, BatchNorm + ReLU after each pool, normalisation inside the
model. Input: float32 (B, 28, 28, 1) NHWC, pixels 0..255. 'same' padding gives the other
twins' padding here (1 on each side for the 4x4/2 stem and the 3x3 convs); BatchNorm uses
the other twins' momentum (0.9 in Keras' convention) and epsilon (1e-5).

The saved model is Keras' own .keras file: the runner's harness loads it without calling
``build_model`` (the file holds the architecture); only built-in layers are used.
"""
import keras
from keras import layers

MEAN, STD = 72.94, 90.02  # Fashion-MNIST training-set pixel mean and std, 0..255 units


def conv_bn_relu(x, filters, kernel_size=3, strides=1, pool=False):
    x = layers.Conv2D(filters, kernel_size, strides=strides, padding="same", use_bias=False)(x)
    if pool:
        x = layers.MaxPooling2D(2)(x)  # before BN/ReLU: the elementwise ops run on 4x fewer pixels
    x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    return layers.ReLU()(x)


def build_model(widths=(16, 32, 64), hidden=256):
    w0, w1, w2 = widths
    inputs = keras.Input((28, 28, 1))
    x = layers.Rescaling(1.0 / STD, offset=-MEAN / STD)(inputs)
    x = conv_bn_relu(x, w0, kernel_size=4, strides=2)   # 14x14
    x = conv_bn_relu(x, w1, pool=True)                  # 7x7
    x = conv_bn_relu(x, w2, pool=True)                  # 3x3
    x = layers.Flatten()(x)
    x = layers.Dense(hidden, use_bias=False)(x)
    x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    x = layers.ReLU()(x)
    outputs = layers.Dense(10)(x)
    return keras.Model(inputs, outputs, name="small_bn_cnn")
