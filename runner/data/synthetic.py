"""Synthetic data sets for smoke runs: the real layout and shapes, learnable content.

A run on them checks that an entry starts, trains, is evaluated and scored, in seconds;
its result is never conforming (``staged.json`` says so). Each task declares the maker of
its stand-in (``Task.synthetic``: image tasks use ``runner.staging.blocks``); this module gives
every maker the same staging and the one random generator a seed decides."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.data.store import StagedData, load
from runner.staging.stage import Stage
from runner.tasks import get_task

# The smoke run's data set, regenerated exactly so by verify and replay.
SMOKE_SIZES = {"n_train": 2048, "n_eval": 512}


def smoke_data(task: str, root: Path) -> StagedData:
    """What every smoke run trains and is scored on (the one recipe: its sizes, seed 0)."""
    return synthetic(task, root, seed=0, **SMOKE_SIZES)


def synthetic(task: str, root: Path, n_train: int, n_eval: int, seed: int) -> StagedData:
    """Stage ``n_train``/``n_eval`` random items shaped like ``task`` into ``root``."""
    spec = get_task(task)
    make = spec.synthetic_maker()
    rng = np.random.default_rng(seed)
    with Stage(
        task, Path(root), source=f"synthetic:seed={seed}", source_digest=None, conforming=False
    ) as stage:
        make(stage, rng, spec, n_train, n_eval)
    return load(Path(root))
