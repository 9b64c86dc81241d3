"""Orphan clean-up removes containers of killed runners, never those of a runner that is
still running (two runner processes share one engine: a study beside a reproduction)."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from runner.run.container import MANAGED_LABEL, OWNER_LABEL, remove_orphans

pytestmark = pytest.mark.docker


def test_a_live_runners_containers_are_not_orphans(docker_client, cpu_base_image):
    gone = subprocess.Popen(["true"])
    gone.wait()  # a runner process that has exited
    host = socket.gethostname()
    live = docker_client.containers.create(
        cpu_base_image.tag, command=["true"],
        labels={MANAGED_LABEL: "test-live", OWNER_LABEL: f"{host}:{os.getpid()}"})
    dead = docker_client.containers.create(
        cpu_base_image.tag, command=["true"],
        labels={MANAGED_LABEL: "test-dead", OWNER_LABEL: f"{host}:{gone.pid}"})
    try:
        remove_orphans(docker_client)
        left = {c.id for c in docker_client.containers.list(all=True, filters={"label": MANAGED_LABEL})}
        assert live.id in left and dead.id not in left
    finally:
        for c in (live, dead):
            try:
                c.remove(force=True)
            except Exception:
                pass
