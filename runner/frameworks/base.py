"""What a framework declares, in one place: the ``Framework`` every framework package builds
(its ``FRAMEWORK``). Kept apart from the registry (``runner.frameworks``) so a framework
package imports only this module.

A framework has two halves. The host's half is its declaration here: the facts the runner
reads on the host (the manifest's name, the wheels that carry it, what the image probe asks
it, how MLPerf names it, where the evaluator places its model, who counts its FLOPs). The
container's half is code that runs inside the entry's image, where nothing of ``runner.*``
is importable (``runner/harness`` is mounted alone, as the top-level package ``harness``):
its loader, ``runner/harness/frameworks/<name>.py`` (reads its saved model; ``count_flops``
there when it has a FLOP counter), and its native backends, the rows of the backend table
(``runner/harness/backends/__init__.py``) whose ``framework`` is its name. The registry
refuses a declaration whose loader is missing and a backend row naming an undeclared framework.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.harness.backends import REGISTRY as BACKENDS

LOADERS_PACKAGE = "runner.harness.frameworks"  # the container's half: one loader module per framework


@dataclass(frozen=True)
class Framework:
    """One deep-learning framework an entry may train with."""

    name: str  # the manifest's ``framework.name``; its folder here and its loader module are named so
    listed: int  # where it comes in the runner's lists (schema, probe, fingerprint, MLPerf)
    label: str  # its own spelling, as MLPerf's system description names it ("PyTorch")
    module: str  # its Python import name: the image probe's and the fingerprint's key ("torch")
    distributions: tuple[str, ...]  # the wheels that carry it (CPU and GPU builds have their own names)
    # Lines the image's software probe runs (runner/fingerprint/image_software.py): they set
    # ``out[module]`` to None when the image lacks it, else to a dict with at least "version".
    probe: str
    # ``runner fingerprint``'s rows for it: (label, keys of its probe record); several keys are
    # shown "a / b". Default: its module and version.
    fingerprint_rows: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The evaluator's ``--device`` when the training container has GPUs; None: its loader
    # places the model itself (the evaluator passes no device).
    gpu_device: str | None = None
    # What counts its FLOPs for the roofline study (its loader's ``count_flops``); None: none.
    flop_counter: str | None = None
    # What reads a model's penultimate features for the generalization study's transfer measure
    # (``python3 -m harness features``, which asks its loader for ``FEATURE_READER``); None: none.
    feature_reader: str | None = None
    # Its saved weights keep Keras' ``[..., in, out]`` order (flatten puts the channel last):
    # the cross-seed weight comparison turns them into PyTorch's ``[out, in, ...]``.
    channel_last_weights: bool = False
    # The initial-weight role the runner draws a tensor of two or more dimensions from
    # (runner/run/init_weights.py ROLES): the framework's own default initialiser.
    default_init: str = "fan_in_uniform"

    @property
    def loader(self) -> str:
        """The dotted name of its loader module (the container's half)."""
        return f"{LOADERS_PACKAGE}.{self.name}"

    @property
    def rows(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return self.fingerprint_rows or ((self.module, ("version",)),)

    @property
    def native_backends(self) -> tuple[str, ...]:
        """The backends that run its own model: the backend table's rows naming it."""
        return tuple(name for name, spec in BACKENDS.items() if spec.framework == self.name)
