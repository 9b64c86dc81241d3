"""The container-side inference harness.

Mounted read-only at ``/opt/runner/harness`` in the inference container and run as
``python3 -m harness`` (``PYTHONPATH=/opt/runner``). It rebuilds the entry's model,
exports ONNX, and times every requested backend one item at a time.

It runs inside the entry's image, so it imports nothing from ``runner.*``: only the
standard library, numpy, the entry's framework (through its loader in ``frameworks/``,
chosen by ``--framework``) and a backend's own package when that backend is asked for.
Nothing imports a framework at module level, so the harness runs in an image with any one.
"""
