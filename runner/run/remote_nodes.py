"""The ranks of a run on its other nodes, seen from the runner on rank 0's node.

Inside a Slurm allocation of N nodes the runner starts one node agent on each of nodes
1..N-1 with ``srun --relative=1`` (``runner node-agent``, ``runner.run.node_agent``). Each
agent connects back over the control channel (``runner.run.control``), prepares its node
(fingerprint, data, image) and says ``ready``; its ranks start only when the runner says
``start``, once rank 0's container runs, so no rank works before the clock. A freeze
(``each("pause")``) counts only when every agent confirmed its ranks paused. A rank that
ends badly, an agent that fails or disconnects, or ``srun`` ending early stops the run
through ``on_failure``, with the reason in words.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

from runner.run.control import TOKEN_ENV, Channel, ChannelError, introduced
from runner.errors import RunnerError

# How the agents reach this runner: this host's name unless the cluster says otherwise.
ADDRESS_ENV = "RUNNER_CONTROL_HOST"
FREEZE_CONFIRM_S = 30.0


class NodeError(RunnerError):
    """The other nodes could not be brought up; the message says which and why."""

    default_fix = ("check that srun can start `runner node-agent` on every node and that each reaches the first node "
                   "(RUNNER_CONTROL_HOST)")


def agent_command(runner: list[str], address: str) -> list[str]:
    """``srun`` starting one agent on each node of the allocation but the first."""
    nodes = int(os.environ["SLURM_JOB_NUM_NODES"])
    return ["srun", f"--nodes={nodes - 1}", f"--ntasks={nodes - 1}", "--ntasks-per-node=1",
            "--relative=1", "--overlap", "--kill-on-bad-exit=0", "--export=ALL",
            *runner, "node-agent", "--control", address]


class RemoteNodes:
    def __init__(self, nodes: int, plan: dict, on_failure, runner: list[str], log_path: Path,
                 command=None):
        """``command(address)``: how the agents are started (default: ``agent_command``)."""
        self.command = command or (lambda address: agent_command(runner, address))
        self.expected = set(range(1, nodes))
        self.plan, self.on_failure, self.runner, self.log_path = plan, on_failure, runner, log_path
        self.token = secrets.token_urlsafe(32)
        self.server = socket.create_server(("", 0))
        self.channels: dict[int, Channel] = {}
        self.ready: dict[int, dict] = {}
        self.replies: dict[tuple[int, int], dict] = {}
        self.finished: dict[int, dict] = {}
        self.failure: str | None = None
        self.failed: tuple[str, str] | None = None  # (who, why) of the first failure
        self.cond = threading.Condition()
        self.ids = itertools.count()
        self.proc: subprocess.Popen | None = None
        self.closing = False
        self.running = False  # on_failure stops rank 0, which runs only after start()

    def address(self) -> str:
        host = os.environ.get(ADDRESS_ENV) or socket.gethostname()
        return f"{host}:{self.server.getsockname()[1]}"

    # -- bringing the nodes up ---------------------------------------------------------------
    def open(self, timeout_s: float = 1800) -> dict[int, dict]:
        """Start the agents and wait until each is ready; node -> its ready message
        (``fingerprint``, ``image``, ``data_digest``). Raises NodeError."""
        threading.Thread(target=self._accept, daemon=True, name="runner-control").start()
        command = self.command(self.address())
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"$ {shlex.join(command)}\n".encode())
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, TOKEN_ENV: self.token}, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while len(self.ready) < len(self.expected) and self.failure is None:
                if self.proc.poll() is not None:
                    self.failure = f"srun ended (exit {self.proc.returncode}) before every node agent was ready; see {self.log_path.name}"
                elif time.monotonic() > deadline:
                    self.failure = f"node(s) {sorted(self.expected - set(self.ready))} not ready within {timeout_s:.0f} s"
                else:
                    self.cond.wait(0.5)
            if len(self.ready) < len(self.expected):
                raise NodeError(self.failure or "not every node agent was ready")
            return dict(self.ready)

    def _accept(self) -> None:
        while not self.closing:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(Channel(sock),), daemon=True,
                             name="runner-control-node").start()

    def _serve(self, channel: Channel) -> None:
        node = introduced(channel, self.token)
        with self.cond:
            if node not in self.expected or node in self.channels:
                channel.close()  # not one of ours, or a second agent for one node
                return
            self.channels[node] = channel
        channel.send(do="plan", plan=self.plan)
        while True:
            try:
                message = channel.receive()
            except ChannelError as err:
                message = {"kind": "failed", "why": f"broke the control channel: {err}"}
            if message is None:
                with self.cond:
                    lost = node not in self.finished and not self.closing
                if lost:
                    self._fail(f"node {node}", "its node agent disconnected")
                return
            self._handle(node, message)

    def _handle(self, node: int, message: dict) -> None:
        kind = message.get("kind")
        with self.cond:
            if kind == "ready":
                self.ready[node] = message
            elif kind == "ack" and isinstance(message.get("id"), int):
                self.replies[(node, message["id"])] = message
            elif kind == "finished":
                self.finished[node] = message
            self.cond.notify_all()
        if kind == "failed":
            self._fail(f"node {node}", str(message.get("why"))[:2000])
        elif kind == "rank_failed" and self.running:
            self.on_failure(f"rank {message.get('rank')} (node {node})", str(message.get("why"))[:2000])

    def _fail(self, who: str, why: str) -> None:
        with self.cond:
            first = self.failure is None
            if first:
                self.failure, self.failed = f"{who}: {why}", (who, why)
            self.cond.notify_all()
        if first and self.running:
            self.on_failure(who, why)

    # -- during the run ------------------------------------------------------------------------
    def _send_all(self, **message) -> None:
        with self.cond:
            channels = dict(self.channels)
        for channel in channels.values():
            channel.send(**message)

    def start(self) -> None:
        """Every node starts its ranks (rank 0's container runs: the clock has started)."""
        self.running = True
        self._send_all(do="start")
        if self.failed is not None:  # a node was lost after it was ready
            self.on_failure(*self.failed)

    def each(self, action: str, timeout_s: float = FREEZE_CONFIRM_S) -> dict[int, str] | None:
        """``pause`` or ``unpause`` the ranks of every node; rank -> state as each node's
        engine reports it, or None when a node did not answer in time."""
        request = next(self.ids)
        self._send_all(do=action, id=request)
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not all((node, request) in self.replies for node in self.expected):
                if self.failure is not None or time.monotonic() > deadline:
                    return None
                self.cond.wait(0.2)
            replies = [self.replies.pop((node, request)) for node in sorted(self.expected)]
        return {int(rank): str(state) for reply in replies for rank, state in (reply.get("states") or {}).items()}

    def stop(self, grace_s: float = 60) -> str | None:
        """Wait for every node's ranks to end (rank 0 has); the first failure, or None."""
        self._send_all(do="finish", grace_s=grace_s)
        deadline = time.monotonic() + grace_s + 60
        with self.cond:
            while len(self.finished) < len(self.channels) and self.failure is None:
                if time.monotonic() > deadline:
                    break
                self.cond.wait(0.5)
            finished = dict(self.finished)
            failure = self.failure
        self.close()
        for node in sorted(finished):
            for rank, why in sorted((finished[node].get("outcomes") or {}).items(), key=lambda kv: int(kv[0])):
                if why and why != "interrupted":
                    return f"rank {rank} (node {node}): {why}"
        if failure:
            return failure
        missing = sorted(self.expected - set(finished))
        return f"node(s) {missing} did not report the end of their ranks" if missing else None

    def close(self) -> None:
        """Cancel what still runs on the other nodes and end srun."""
        with self.cond:
            self.closing = True
            channels = list(self.channels.values())
        for channel in channels:
            channel.send(do="cancel")
            channel.close()
        try:
            self.server.close()
        except OSError:
            pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=20)  # the agents end once told to finish or cancel
            except subprocess.TimeoutExpired:
                self.proc.terminate()  # srun passes it on to the agents
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
