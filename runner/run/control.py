"""The control channel of a run spanning nodes: JSON lines over TCP between the runner on
rank 0's node and one node agent per other node.

The runner listens; each agent connects and opens with ``hello`` (its node and the run's
secret token, which the runner passes to ``srun`` in the environment, never on a command
line). Runner to agent: ``{"do": ...}`` (start, pause, unpause, finish, cancel); agent to
runner: ``{"kind": ...}`` (ready, failed, started, ack, rank_failed, finished). Only the
runner and its agents speak here: the entry's containers sit on the cluster's internal
network, and a connection without the token is dropped.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading

from runner.errors import RunnerError

TOKEN_ENV = "RUNNER_AGENT_TOKEN"
MAX_MESSAGE_BYTES = 8 << 20  # a node's fingerprint is the largest message, tens of KiB


class ChannelError(RunnerError):
    """The other side sent something that is not a message of this channel."""

    default_fix = ("check that every node runs the same runner and that nothing else connects to the runner's "
                   "control port")


class Channel:
    """One connection: whole JSON objects, one a line; ``send`` is safe from any thread."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("rb")
        self._lock = threading.Lock()

    def send(self, **message) -> bool:
        """False when the other side is gone."""
        data = json.dumps(message).encode() + b"\n"
        try:
            with self._lock:
                self.sock.sendall(data)
            return True
        except OSError:
            return False

    def receive(self) -> dict | None:
        """The next message; None when the other side closed the connection."""
        try:
            line = self._reader.readline(MAX_MESSAGE_BYTES + 1)
        except OSError:
            return None
        if not line:
            return None
        if len(line) > MAX_MESSAGE_BYTES or not line.endswith(b"\n"):
            raise ChannelError("a message longer than the channel allows")
        try:
            message = json.loads(line)
        except ValueError:
            raise ChannelError("a line that is not JSON") from None
        if not isinstance(message, dict):
            raise ChannelError("a message that is not a JSON object")
        return message

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def connect(address: str, token: str, node: int, timeout_s: float = 30) -> Channel:
    """An agent's connection to the runner at ``host:port``, introduced."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    sock.settimeout(None)
    channel = Channel(sock)
    channel.send(kind="hello", node=node, token=token)
    return channel


def introduced(channel: Channel, token: str, timeout_s: float = 30) -> int | None:
    """The node of a new connection whose hello carries ``token``; None otherwise."""
    channel.sock.settimeout(timeout_s)
    try:
        hello = channel.receive()
    except (ChannelError, OSError):
        return None
    finally:
        channel.sock.settimeout(None)
    if not hello or hello.get("kind") != "hello" or not isinstance(hello.get("token"), str):
        return None
    if not hmac.compare_digest(hello["token"].encode(), token.encode()):
        return None
    node = hello.get("node")
    return node if isinstance(node, int) and not isinstance(node, bool) else None
