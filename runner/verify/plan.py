"""Does ``plan.json`` describe its result? One function for ``verify`` and ``audit --replay``.

The plan (``runner.plan.RunPlan``) is what the run's containers were started from: the seed,
the staged data, the limits, the network, the mounts, the image. ``runner audit --replay``
and ``runner reinfer`` read it again, so a plan that names another seed, other folders (a
system folder, the signing keys), other limits or the host's network would send them
elsewhere; and a signed plan that disagrees with the result it sits beside is a false record
of how the run was made. ``plan_problems`` compares the plan's own words with what the
result records and what the bundle's hardware profile grants; ``check_plan`` is
``verify``'s row. A result written before plans were saved has none ("no plan recorded"); a
result that records its plan (``result.json`` ``plan``: the file and its sha256) must carry it.
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath

from runner import safe_read
from runner.data.public_inputs import PUBLIC_MOUNT
from runner.digests import sha256_file
from runner.plan import PLAN_FILE
from runner.profiles import Profile
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import Verdict

# Docker's own networks: a run's containers get none; a run spanning nodes gets its cluster's.
ENGINE_NETWORKS = ("host", "bridge", "none", "default")


def _get(data: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _folder(text: object) -> PurePosixPath | None:
    """An absolute, normalised host folder, else None."""
    if not isinstance(text, str) or not text.startswith("/") or ".." in text.split("/"):
        return None
    return PurePosixPath(text)


def _data_problems(plan: dict, result: dict) -> list[str]:
    """The staged set's digest and folders, and the public inputs' mounts."""
    data = plan.get("data")
    if data is None:
        return ["it names no data"]
    if not isinstance(data, dict):
        return ["its data is not an object"]
    problems = []
    if data.get("digest") != _get(result, "data", "digest"):
        problems.append(f"data digest {data.get('digest')} (the result: {_get(result, 'data', 'digest')})")
    train, evaluation = _folder(data.get("train_dir")), _folder(data.get("eval_dir"))
    tree = bool(_get(result, "data", "train_tree_digest")) and not result.get("smoke")
    if evaluation is None or evaluation.name != "eval":
        problems.append(f"evaluation folder {data.get('eval_dir')!r} is not a staged set's eval/")
    elif train is None:
        problems.append(f"training folder {data.get('train_dir')!r} is not an absolute folder")
    elif not tree and train != evaluation.parent / "train":
        problems.append(f"training folder {train} is not the staged set's train/ ({evaluation.parent / 'train'})")
    elif tree and (train in evaluation.parents or evaluation.parent in train.parents or train == evaluation.parent):
        problems.append(f"training tree {train} holds the staged set ({evaluation.parent}) and its labels")
    public = data.get("public") or []
    names = sorted(str(p.get("name")) for p in result.get("public_inputs") or [] if isinstance(p, dict))
    mounts = sorted(m[1] for m in public if isinstance(m, list) and len(m) == 2) if isinstance(public, list) else None
    if mounts != [f"{PUBLIC_MOUNT}/{name}" for name in names]:
        problems.append(f"public mounts {public!r} (the result's public inputs: {names})")
    return problems


def _limit_problems(plan: dict, result: dict, profile: Profile) -> list[str]:
    """The containers' limits are the profile's; the network is none (a cluster's for a run
    spanning nodes)."""
    limits = plan.get("limits")
    if not isinstance(limits, dict):
        return ["it names no limits"]
    problems = []
    granted = profile.container_limits
    cpus, memory = (granted.cpus, granted.memory) if granted else (None, None)
    if limits.get("cpus") != cpus or limits.get("memory") != memory:
        problems.append(f"limits of {limits.get('cpus')} CPUs and {limits.get('memory')} memory "
                        f"({profile.id} grants {cpus} and {memory})")
    gpus, threads, timeout = limits.get("gpus"), limits.get("threads"), limits.get("timeout_s")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or not 0 <= gpus <= profile.gpu_count:
        problems.append(f"{gpus!r} GPUs ({profile.id} has {profile.gpu_count})")
    if granted and threads != int(granted.cpus):
        problems.append(f"{threads!r} threads ({profile.id} grants {int(granted.cpus)} cores)")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0:
        problems.append(f"a training time limit of {timeout!r} s")
    network, nodes = plan.get("network"), _get(result, "hardware", "nodes") or 1
    if network is not None and (nodes == 1 or not isinstance(network, str) or network in ENGINE_NETWORKS
                                or network.startswith("container:")):
        problems.append(f"network {network!r} (a run on {nodes} node(s) gets "
                        + ("none" if nodes == 1 else "its cluster's network") + ")")
    return problems


def plan_problems(plan: object, result: dict, profile: Profile) -> list[str]:
    """Where ``plan`` (plan.json, as read) does not describe ``result`` (result.json, as
    read) run under ``profile`` (the bundle's hardware profile); empty when it does."""
    if not isinstance(plan, dict):
        return ["it is not an object"]
    problems = []
    seed, seeds = plan.get("seed"), plan.get("seeds")
    if seed != result.get("seed") or not isinstance(seeds, list) or result.get("seed") not in seeds:
        problems.append(f"seed {seed!r} of {seeds!r} (the result: {result.get('seed')!r})")
    if _get(plan, "options", "smoke") is not result.get("smoke"):
        problems.append(f"smoke {_get(plan, 'options', 'smoke')!r} (the result: {result.get('smoke')!r})")
    named = (plan.get("entry_name"), plan.get("task"), plan.get("profile"))
    recorded = (_get(result, "entry", "name"), _get(result, "task", "id"), _get(result, "hardware", "profile"))
    if named != recorded:
        problems.append(f"entry, task and profile {named} (the result: {recorded})")
    if plan.get("image") != _get(result, "image", "id"):
        problems.append(f"image {plan.get('image')} (the result: {_get(result, 'image', 'id')})")
    if (plan.get("hyperparameters") or {}) != (result.get("hyperparameters") or {}):
        problems.append(f"hyperparameters {plan.get('hyperparameters')} (the result: {result.get('hyperparameters')})")
    return (problems + _variant_problems(plan, result) + _data_problems(plan, result)
            + _limit_problems(plan, result, profile))


def _variant_problems(plan: dict, result: dict) -> list[str]:
    """The switches the plan turned off and its placement are the result's ``variant``: a run
    of a study's variant cannot pass for the entry's own recipe."""
    variant = result.get("variant")
    if not isinstance(variant, dict):
        variant = {}
    off, recorded = _get(plan, "options", "switches_off") or [], variant.get("switches_off") or []
    if (not isinstance(off, list) or not isinstance(recorded, list)
            or sorted(map(str, off)) != sorted(map(str, recorded))):
        return [f"switches off {off!r} (the result: {recorded!r})"]
    return [f"{key} {_get(plan, 'options', key)!r} (the result's variant: {variant[key]!r})"
            for key in ("nodes", "processes_per_node") if key in variant and _get(plan, "options", key) != variant[key]]


def read_plan(ev: Evidence) -> object | None:
    """plan.json as read, None when the bundle has none."""
    path = ev.root / PLAN_FILE
    if not path.exists():
        return None
    try:
        return safe_read.read_json(path, "json")
    except safe_read.Unreadable as err:
        raise Unavailable(f"{PLAN_FILE} is unreadable ({err.why})") from None


def check_plan(ev: Evidence) -> Verdict:
    """plan.json describes its result: seed, data, limits, network, mounts, image."""
    plan, recorded = read_plan(ev), ev.result.get("plan")
    if plan is None:
        if recorded is None:
            return Verdict(True, "no plan recorded (a result written before plans were saved)")
        return Verdict(False, f"result.json records its plan ({PLAN_FILE}) but the bundle has none")
    problems = plan_problems(plan, ev.result, ev.profile)
    if recorded is not None and _get(recorded, "sha256") != sha256_file(ev.root / PLAN_FILE):
        problems.insert(0, f"it is not the plan result.json records (sha256 {_get(recorded, 'sha256')})")
    if problems or not isinstance(plan, dict):  # a plan that is no object is a problem already
        return Verdict(False, f"{PLAN_FILE} does not describe its result: " + "; ".join(problems))
    return Verdict(True, f"{PLAN_FILE} describes its result (seed {plan['seed']}, its data, "
                   f"{ev.profile.id}'s limits, no other network or mounts, its image)")
