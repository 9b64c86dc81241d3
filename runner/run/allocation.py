"""Where a run's ranks may run: one host, or a Slurm allocation of exactly the entry's nodes
with a cluster network for its containers (docs/cluster.md).

A run spanning nodes is started by ``runner reproduce ENTRY --slurm``: each run's job asks
for ``--nodes=N --exclusive``; inside it, the runner on the batch host is rank 0's node.
Its containers and those of the other nodes meet on the Docker network the cluster
provides, named by ``RUNNER_CLUSTER_NETWORK``: it must exist on every node's engine and be
``internal`` (no gateway, no route out), so the ranks reach each other and nothing else.
"""

from __future__ import annotations

import os
import socket

from dataclasses import dataclass, field

from runner.engine.interface import Engine, NotFound
from runner.errors import UserError
from runner.profiles import match

NETWORK_ENV = "RUNNER_CLUSTER_NETWORK"


def allocated_nodes() -> int | None:
    """Nodes of the Slurm job this process runs in; None outside one."""
    count = os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES")
    return int(count) if os.environ.get("SLURM_JOB_ID") and count and count.isdigit() else None


def require_network_setting(nodes: int) -> str:
    name = os.environ.get(NETWORK_ENV)
    if not name:
        raise UserError(
            f"a run spanning {nodes} nodes needs the cluster's network for its containers, and "
            f"{NETWORK_ENV} names none",
            f"create an internal Docker network reaching the job's nodes only (docs/cluster.md) "
            f"and export {NETWORK_ENV}=<its name>",
        )
    return name


def check_nodes(nodes: int) -> None:
    """Refuse a run spanning nodes outside a Slurm allocation of exactly that many."""
    if nodes <= 1:
        return
    allocated = allocated_nodes()
    if allocated is None:
        raise UserError(
            f"the entry asks for {nodes} nodes; a run spanning nodes runs only inside a Slurm "
            "allocation of them",
            "submit it with `runner reproduce ENTRY --slurm` (docs/cluster.md), or set nodes: 1",
        )
    if allocated != nodes:
        raise UserError(
            f"the entry asks for {nodes} nodes but this Slurm job has {allocated}",
            f"submit it with `runner reproduce ENTRY --slurm`, which asks for --nodes={nodes}",
        )
    require_network_setting(nodes)


def cluster_network(engine: Engine, name: str) -> str:
    """The cluster network on this node's engine: it exists and routes nowhere."""
    try:
        network = engine.network(name)
    except NotFound:
        raise UserError(
            f"the cluster network {name!r} ({NETWORK_ENV}) does not exist on "
            f"{socket.gethostname()}'s Docker engine",
            "create it on every node of the job (an attachable overlay or macvlan network "
            "created with --internal; docs/cluster.md)",
        ) from None
    if not network.internal:
        raise UserError(
            f"the cluster network {name!r} ({NETWORK_ENV}) is not internal: the entry's "
            "containers could reach beyond the run",
            f"create it with `docker network create --internal ... {name}`",
        )
    return network.name


@dataclass(frozen=True)
class NodesVerdict:
    """What the runner found on the other nodes of a run spanning nodes, once their agents
    were ready: why the run may not go on, else the hardware mismatches it allows (named by
    node) and why the result is non-conforming."""

    refusal: str | None = None
    mismatches: list[str] = field(default_factory=list)
    nonconforming: list[str] = field(default_factory=list)


def judge_nodes(plan, ready: dict[int, dict]) -> NodesVerdict:
    """Each other node's hardware against the plan's profile, and the image each will run
    (``ready``: node -> its agent's ready message)."""
    opts = plan.options
    mismatches = [str(m) for node in sorted(ready)
                  for m in match(plan.profile, ready[node].get("fingerprint") or {}, plan.entry.nodes, node)]
    if mismatches and not (opts.allow_hardware_mismatch or opts.smoke):
        return NodesVerdict(refusal=f"hardware profile '{plan.profile.id}' is not met: " + "; ".join(mismatches))
    reasons = []
    if mismatches and not opts.smoke:  # a smoke run is non-conforming as such
        reasons.append("hardware mismatch: " + "; ".join(mismatches))
    for node, message in sorted(ready.items()):
        if message.get("image") != plan.image:
            reasons.append(f"node {node} ran image {message.get('image')}, built there, not the audited {plan.image}")
    return NodesVerdict(None, mismatches, reasons)
