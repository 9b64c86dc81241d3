"""What a user asks of a reproduction (``runner reproduce``'s flags): the ``options`` part of
the run plan (``runner.plan.RunPlan``), for every placement."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReproduceOptions:
    runs: int | None = None
    seed: int | None = None  # the auditor's; None: the runner draws one
    smoke: bool = False
    allow_hardware_mismatch: bool = False
    # A host busy on the run's CPUs, before the build and before each run's training
    # (runner.run.calm): waited for up to calm_timeout_s (None: RUNNER_CALM_TIMEOUT, else
    # 10 minutes), or with allow_contended gone on at once (the run is marked as the
    # contention check finds it).
    allow_contended: bool = False
    calm_timeout_s: float | None = None
    backends: list[str] | None = None
    timeout_minutes: float | None = None
    infer: bool = True
    # After the crossing the clock has stopped: later checkpoints are evaluated only when a
    # study asks for the whole accuracy curve (runs are shorter without them).
    full_curve: bool = False
    # LoadGen beside the per-item pass: True (the "dawnbench" settings, a few seconds), False
    # (none), or "mlperf" (MLPerf Inference's minimums, for a result claiming MLPerf compliance).
    loadgen: bool | str = True
    sign: bool = True  # False on Slurm compute nodes: the submit host signs what it gathers
    # Declared hyperparameters a study chose, by name (global_batch_size, lr): RUNNER_HP_<NAME>.
    hyperparameters: dict[str, str] = field(default_factory=dict)
    # Declared switches a study turned off, by name (runner.manifest.switches): RUNNER_SWITCH_* = 0,
    # or a declared batch size. A run with any off is a study variant, never a claim.
    switches_off: tuple[str, ...] = ()
    # Another placement than the manifest's (`runner study scaling`): None keeps the manifest's.
    nodes: int | None = None
    processes_per_node: int | None = None
    verbose: bool = False  # -v: print where each run's time went (its result's timings)
