"""MXNet 1.9 Gluon: a ``HybridBlock`` from the manifest's builder and a ``save_parameters`` file.

Its loader is ``runner/harness/frameworks/mxnet.py``; its native backend is ``mxnet``.
"""

from runner.frameworks.base import Framework

PROBE = r'''
mx = load("mxnet")
out["mxnet"] = None if mx is None else {"version": mx.__version__}
'''

FRAMEWORK = Framework(
    name="mxnet",
    listed=2,
    label="MXNet",
    module="mxnet",
    distributions=("mxnet", "mxnet-mkl", "mxnet-cu112", "mxnet-cu110", "mxnet-cu102"),
    probe=PROBE,
    default_init="glorot_uniform",  # Gluon entries initialise with Xavier
)
