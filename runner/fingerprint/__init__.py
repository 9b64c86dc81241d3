"""Fingerprint stage: what hardware and software a result was measured on.

One module per concern: ``cpu``, ``memory``, ``operating_system``, ``gpu`` (NVML),
``docker_engine``, ``image_software`` (versions inside an entry's image); ``host``
assembles them; ``table`` presents them (``runner.mlperf.system`` describes them in MLPerf's
terms, above this package).
"""

from runner.fingerprint.host import SCHEMA_VERSION, capture_host, load_fingerprint, node_file
from runner.fingerprint.image_software import capture_image

__all__ = ["SCHEMA_VERSION", "capture_host", "capture_image", "load_fingerprint", "node_file"]
