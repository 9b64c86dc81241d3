"""The inference phase, host side: run the harness in the entry's image, then gate,
check and summarise each backend's batch-1 timing."""

from runner.inference.measure import TRANSPORT_SLACK_S, cost_per_10k_usd, evaluate_backend, latency_stats_ms
from runner.inference.phase import TrainedModel, harness_command, inference_spec, run_inference
from runner.inference.preflight import GPU_BACKENDS, check_backends_available

__all__ = [
    "GPU_BACKENDS",
    "TRANSPORT_SLACK_S",
    "TrainedModel",
    "check_backends_available",
    "cost_per_10k_usd",
    "evaluate_backend",
    "harness_command",
    "inference_spec",
    "latency_stats_ms",
    "run_inference",
]
