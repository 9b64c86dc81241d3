"""TensorFlow 2 / Keras: a ``.keras`` file saved by ``model.save``.

Its loader is ``runner/harness/frameworks/tensorflow.py``; its native backend is
``tensorflow``. Keras keeps weights as ``[..., in, out]`` and flattens channel-last.
"""

from runner.frameworks.base import Framework

PROBE = r'''
tf = load("tensorflow")
if tf is None:
    out["tensorflow"] = None
else:
    build = attempt(lambda: dict(tf.sysconfig.get_build_info())) or {}
    out["tensorflow"] = {"version": tf.__version__, "cuda": build.get("cuda_version"),
                         "cudnn": build.get("cudnn_version")}
'''

FRAMEWORK = Framework(
    name="tensorflow",
    listed=1,
    label="TensorFlow",
    module="tensorflow",
    distributions=("tensorflow", "tensorflow-cpu", "tensorflow-intel"),
    probe=PROBE,
    channel_last_weights=True,
    default_init="glorot_uniform",  # Keras' default kernel initializer
)
