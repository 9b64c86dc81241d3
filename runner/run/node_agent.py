"""One node of a run spanning nodes: ``runner node-agent``, started by the run's runner
with ``srun`` on every node of the allocation but rank 0's (``runner.run.remote_nodes``).

The agent connects to the runner, receives the run's plan (``RunPlan.to_dict``), fingerprints its node into the
result folder (``fingerprint-node<i>.json``, on the shared file system), stages the data
(checked against node 0's digest) and finds the entry's image on its own engine
(building it from the shared entry folder if missing). It reports ``ready``, and starts
its ranks' containers on the cluster network only when the runner says ``start``. It
pauses and unpauses them when told and confirms with each container's state as its engine
reports it. A rank that ends badly is reported at once; a lost runner cancels everything.
Every rank's output goes to ``logs/train-rank<r>.log``, the agent's own to
``logs/node<i>-agent.log``.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from runner.entry_build import build_entry
from runner.engine import get_engine
from runner.errors import UserError
from runner.fingerprint import capture_host, node_file
from runner.results import write_json
from runner.run import ownership
from runner.run.allocation import NETWORK_ENV, cluster_network
from runner.run.control import Channel, ChannelError, connect
from runner.run.multiprocess import Peers, rank_spec
from runner.plan import SeedRun, sent_run
from runner.report import Reporter, reporting
from runner.run.training import training_spec
from runner.data.for_run import stage_data, stage_public_inputs


class NodeAgent:
    def __init__(self, channel: Channel, plan: SeedRun, node: int, scratch: Path):
        self.channel, self.plan, self.node, self.scratch = channel, plan, node, scratch
        self.result_dir = plan.result_dir
        self.log_path = plan.log(f"node{node}-agent.log")
        per_node = plan.entry.processes_per_node
        self.ranks = list(range(node * per_node, (node + 1) * per_node))
        self.peers: Peers | None = None
        self.t0 = time.monotonic()

    def log(self, text: str) -> None:
        with open(self.log_path, "a") as log:
            log.write(f"[{time.monotonic() - self.t0:10.3f}] {text}\n")

    def prepare(self) -> dict:
        """Fingerprint, data, image and the ranks' containers: the ``ready`` message."""
        plan = self.plan
        engine = get_engine()
        ownership.set_run(self.result_dir.name)  # the run's containers carry its id
        fingerprint = capture_host(engine)
        write_json(self.result_dir / node_file(self.node), fingerprint)

        entry = plan.entry
        with reporting(Reporter(Console(stderr=True))):  # the agent's stdout is its channel's log
            staged = stage_data(entry, plan.smoke, self.scratch)
        public = stage_public_inputs(entry, plan.smoke, staged, self.scratch)
        if staged.digest != plan.data.digest:
            raise UserError(f"node {self.node}'s {staged.task} data (digest {staged.digest}) differ from node 0's "
                            f"({plan.data.digest})", "stage the same data set on every node")
        image = plan.image
        if engine.find_image(image) is None:
            image = build_entry(entry, engine).image_id
            self.log(f"built the entry's image here: {image}")
        if plan.network is None:  # the runner sends a node agent only a run spanning nodes, which has one
            raise UserError("the runner sent a plan with no cluster network", f"set {NETWORK_ENV} on the runner's host")
        network = cluster_network(engine, plan.network)
        here = replace(plan, image=image, data=replace(plan.data, train_dir=Path(staged.train_dir),
                                                       public=tuple((p.folder, p.mount) for p in public)))
        spec = training_spec(here)  # the plan as this node resolved it
        specs = [rank_spec(spec, plan.run_name, network, r, entry.world_size, plan.limits.gpus,
                           entry.processes_per_node) for r in self.ranks]
        self.peers = Peers(engine, specs, self.result_dir, self.rank_failed, ranks=self.ranks)
        self.log(f"ready: ranks {self.ranks}, image {image}, network {network}")
        return {"fingerprint": fingerprint, "image": image, "data_digest": staged.digest,
                "host": (fingerprint.get("host") or {}).get("hostname")}

    def rank_failed(self, who: str, why: str | None) -> None:
        self.log(f"{who} ended badly: {why}")
        self.channel.send(kind="rank_failed", rank=int(who.split()[-1]), why=why)

    def serve(self) -> int:
        """Follow the runner's orders until it says finish (0) or is gone (1)."""
        assert self.peers is not None
        while True:
            try:
                order = self.channel.receive() or {}  # {}: the runner closed the connection
            except ChannelError:
                order = {}
            do = order.get("do")
            if do == "start":
                self.peers.start()
                self.peers.wait_running()
                self.log(f"started ranks {self.ranks}")
                self.channel.send(kind="started")
            elif do in ("pause", "unpause"):
                states = self.peers.each(do)
                self.log(f"{do}: " + ", ".join(f"rank {r} {s}" for r, s in states.items()))
                self.channel.send(kind="ack", id=order.get("id"), states=states)
            elif do == "finish":
                self.peers.stop(float(order.get("grace_s", 60)))
                outcomes = {rank: (o.reason() if o else "never started")
                            for rank, o in ((r, self.peers.outcomes.get(r)) for r in self.ranks)}
                self.log(f"finished: {outcomes}")
                self.channel.send(kind="finished", outcomes=outcomes)
                return 0
            elif do is None or do == "cancel":
                self.log("cancelled by the runner" if do else "lost the runner: cancelling")
                self.peers.cancel.set()
                self.peers.stop(0)
                return 1


def run_agent(address: str, token: str, node: int) -> int:
    channel = connect(address, token, node)
    try:
        order = channel.receive()
        if not order or order.get("do") != "plan":
            return 1
        with tempfile.TemporaryDirectory(prefix=f"runner-node{node}-") as scratch:
            agent = None
            try:
                agent = NodeAgent(channel, sent_run(order["plan"], Path(scratch)), node,
                                  Path(scratch))
                agent.log_path.parent.mkdir(parents=True, exist_ok=True)
                ready = agent.prepare()
            except Exception as exc:  # noqa: BLE001 - the runner must hear why, in words
                why = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
                if agent is not None:
                    agent.log(f"failed: {why}")
                channel.send(kind="failed", why=why)
                return 1
            channel.send(kind="ready", **ready)
            return agent.serve()
    finally:
        channel.close()
