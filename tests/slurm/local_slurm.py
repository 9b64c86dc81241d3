"""A real Slurm on this machine for the tests: munged, slurmctld and two slurmd "nodes".

Debian's slurmd is built with multiple-slurmd support (``slurmd -N NODENAME``): the second
node is a second slurmd on this machine with its own name and port, so a job can span two
nodes (``srun`` steps reach both) while both share this machine's cores and Docker engine.
Partition ``debug`` (the default) holds the first node only, so single-node jobs behave as
on a one-node cluster; partition ``pair`` holds both, for runs spanning two nodes.

``start()`` installs Debian's ``slurm-wlm`` and ``munge`` when they are missing, writes a
cgroup-free ``slurm.conf`` for this host (its real CPUs and memory) into a fixed work folder,
makes a munge key if there is none, starts the daemons as root in the background and waits
until ``sinfo`` shows the node idle. ``stop()`` ends the daemons it started. Daemons left
behind by an earlier, killed session are found by the pid files in the work folder (or by
the config path on their command line) and stopped first, so starting twice never breaks.

Run by hand: ``python3 tests/slurm/local_slurm.py start|stop`` (prints the SLURM_CONF to export).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

WORK = Path(tempfile.gettempdir()) / "runner-slurm"
PACKAGES = ("slurm-wlm", "munge")
TOOLS = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "munged")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
MUNGED_PID = Path("/run/munge/munged.pid")
PARTITION, PAIR_PARTITION = "debug", "pair"
# Ports of our own, so a site's Slurm on the default 6817/6818 is never touched.
CTLD_PORT, SLURMD_PORT = 16817, 16818
SECOND_SLURMD_PORT = 16819


@dataclass(frozen=True)
class LocalSlurm:
    conf: Path
    node: str  # the first node, the only one of ``partition``
    partition: str
    cpus: int
    work: Path
    nodes: tuple[str, ...] = ()  # both nodes, the nodes of ``pair_partition``
    pair_partition: str = PAIR_PARTITION

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def _sbin(tool: str) -> str | None:
    return shutil.which(tool) or next(
        (str(p) for p in (Path("/usr/sbin") / tool, Path("/sbin") / tool) if p.exists()), None
    )


def install() -> None:
    """apt-get the packages when any tool is missing (a fresh CI machine)."""
    if all(_sbin(t) for t in TOOLS):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-q"], env=env)
    # policy-rc.d forbids the packages' init scripts from starting daemons of their own.
    policy = Path("/usr/sbin/policy-rc.d")
    added = not policy.exists()
    if added:
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    try:
        _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES], env=env)
    finally:
        if added:
            policy.unlink(missing_ok=True)
    missing = [t for t in TOOLS if not _sbin(t)]
    if missing:
        raise RuntimeError(f"installed {' '.join(PACKAGES)} but {missing} are still missing")


def memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def second_node(node: str) -> str:
    return f"{node}-b"


def write_conf(work: Path, node: str, cpus: int) -> Path:
    # RealMemory a little under the total: slurmd drains a node that reports less than this.
    real_memory = int(memory_mb() * 0.9)
    conf = work / "slurm.conf"
    conf.write_text(f"""\
# Written by tests/slurm/local_slurm.py: two slurmd "nodes" on one machine, no cgroups,
# no accounting database.
ClusterName=runner-test
SlurmctldHost={node}
SlurmctldPort={CTLD_PORT}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool/%n
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd-%n.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=30
SchedulerParameters=sched_interval=1
NodeName={node} NodeAddr=127.0.0.1 Port={SLURMD_PORT} CPUs={cpus} RealMemory={real_memory} State=UNKNOWN
NodeName={second_node(node)} NodeAddr=127.0.0.1 Port={SECOND_SLURMD_PORT} CPUs={cpus} RealMemory={real_memory} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
PartitionName={PAIR_PARTITION} Nodes={node},{second_node(node)} MaxTime=INFINITE State=UP
""")
    return conf


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _our_daemon_pids(work: Path) -> list[int]:
    """Daemons of an earlier session: pid files in the work folder, or our config on the
    command line (a pid file may be gone when the folder was wiped)."""
    pids = set()
    for pid_file in [work / "slurmctld.pid", *work.glob("slurmd*.pid")]:
        try:
            pids.add(int(pid_file.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    marker = str(work / "slurm.conf").encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline and (b"slurmctld" in cmdline or b"slurmd" in cmdline):
                pids.add(int(proc.name))
    comm_ok = []
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm in ("slurmctld", "slurmd", "slurmstepd"):
            comm_ok.append(pid)
    return comm_ok


def _kill(pids: list[int], timeout: float = 15) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _munge_works() -> bool:
    if not shutil.which("munge") or not shutil.which("unmunge"):
        return False
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        if cred.returncode:
            return False
        return subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def start_munge(work: Path) -> bool:
    """Make munge work; True when we started munged (so stop() ends it too)."""
    if _munge_works():
        return False
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        if _sbin("mungekey"):
            _run([_sbin("mungekey"), "--create", f"--keyfile={MUNGE_KEY}"])
        else:
            MUNGE_KEY.write_bytes(os.urandom(1024))
    # munged insists on private key/state folders owned by its user.
    for folder, mode in (("/run/munge", 0o755), ("/var/lib/munge", 0o700),
                         ("/var/log/munge", 0o700), ("/etc/munge", 0o700)):
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "munge", "munge")
        Path(folder).chmod(mode)
    shutil.chown(MUNGE_KEY, "munge", "munge")
    MUNGE_KEY.chmod(0o400)
    MUNGE_SOCKET.unlink(missing_ok=True)
    _run([_sbin("runuser") or "runuser", "-u", "munge", "--", _sbin("munged"), "--force"])
    deadline = time.monotonic() + 20
    while not _munge_works():
        if time.monotonic() > deadline:
            raise RuntimeError("munged started but munge -n | unmunge still fails")
        time.sleep(0.2)
    return True


def _wait_idle(env: dict, node: str, work: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env=env,
                             capture_output=True, text=True)
        # One line per partition the node is in: they all state the node's one state.
        state = (out.stdout.split() or [""])[0]
        if out.returncode == 0 and state.rstrip("*") in ("idle", "mixed", "allocated"):
            return
        if state.rstrip("*") in ("down", "drained", "draining"):
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env=env,
                           capture_output=True)
        time.sleep(0.5)
    logs = "".join(f.read_text()[-1500:] for f in [work / "slurmctld.log", *work.glob("slurmd*.log")]
                   if f.exists())
    raise RuntimeError(f"Slurm node {node} is not idle after {timeout:.0f} s (sinfo: {state!r})\n{logs}")


def start(work: Path = WORK) -> LocalSlurm:
    install()
    work.mkdir(parents=True, exist_ok=True)
    _kill(_our_daemon_pids(work))
    # A fresh state folder: jobs of an earlier session must not come back.
    for sub in ("state", "spool"):
        shutil.rmtree(work / sub, ignore_errors=True)
        (work / sub).mkdir()
    node = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    conf = write_conf(work, node, cpus)
    if start_munge(work):
        (work / "munged.started").touch()
    env = {**os.environ, "SLURM_CONF": str(conf)}
    # The daemons fork into the background themselves; -c: no state from earlier runs.
    _run([_sbin("slurmctld"), "-c", "-f", str(conf)], env=env)
    nodes = (node, second_node(node))
    for name in nodes:
        (work / "spool" / name).mkdir(parents=True, exist_ok=True)
        _run([_sbin("slurmd"), "-N", name, "-f", str(conf)], env=env)
    for name in nodes:
        _wait_idle(env, name, work)
    return LocalSlurm(conf, node, PARTITION, cpus, work, nodes)


def stop(work: Path = WORK) -> None:
    env = {**os.environ, "SLURM_CONF": str(work / "slurm.conf")}
    if (work / "slurm.conf").exists():
        # Cancel what is left so slurmd does not leave job processes behind.
        for partition in (PARTITION, PAIR_PARTITION):
            subprocess.run(["scancel", "--full", f"--partition={partition}"], env=env,
                           capture_output=True, timeout=30)
    _kill(_our_daemon_pids(work))
    if (work / "munged.started").exists():
        try:
            _kill([int(MUNGED_PID.read_text().split()[0])])
        except (OSError, ValueError, IndexError):
            pass
        (work / "munged.started").unlink(missing_ok=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["start"]:
        cluster = start()
        print(f"export SLURM_CONF={cluster.conf}")
    elif sys.argv[1:] == ["stop"]:
        stop()
    else:
        sys.exit("usage: local_slurm.py start|stop")
