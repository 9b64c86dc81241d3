"""Copying a checkpoint the entry names under /output to a runner-owned file, hashed on the
way: the training phase copies each checkpoint an ``eval_request`` names, and the final
model's checks copy the final weights (``final_model.py``), also when ``runner reinfer``
evaluates a deferred final model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from runner.entry_outputs import UnsafeEntryFile, copy_limited, open_regular
from runner.run.output_quota import quota_bytes
from runner.score.evaluations import path_problem, resolve_inside
from runner.errors import RunnerError

MAX_CHECKPOINT_BYTES = 16 * 2**30


class CheckpointError(RunnerError):
    """A requested checkpoint the runner will not evaluate; the message says why."""

    default_fix = "have the entry name a regular checkpoint file inside /output, within the output quota"


def copy_checkpoint(output_dir: Path, relative: object, target: Path) -> str:
    """Copy the entry's checkpoint to a runner-owned file; return its sha256.

    The entry chose what the name is: its type and apparent size are checked before it is
    opened (a FIFO would block the runner forever, a sparse file claims any size), and it
    may be no larger than the output quota (a larger one would have stopped the run)."""
    if problem := path_problem(relative):
        raise CheckpointError(problem.replace("predictions path", "checkpoint path"))
    source = resolve_inside(output_dir, str(relative))  # a str: path_problem said so
    if source is None:
        raise CheckpointError(f"checkpoint {relative!r} leaves /output")
    quota = quota_bytes()
    limit, name = (quota, "the output quota, RUNNER_OUTPUT_QUOTA_GIB") if quota < MAX_CHECKPOINT_BYTES \
        else (MAX_CHECKPOINT_BYTES, "the largest checkpoint the runner copies")
    try:
        src, size = open_regular(source, limit, f"checkpoint {relative}", name)
    except UnsafeEntryFile as exc:
        raise CheckpointError(str(exc)) from None
    digest = hashlib.sha256()
    with src:
        copy_limited(src, size, target, digest.update)
    return digest.hexdigest()
