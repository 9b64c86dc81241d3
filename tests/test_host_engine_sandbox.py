"""The host engine's sandbox (issue 48), against the real ``bwrap``: what the runner promises of
every engine, checked where an engine with no image could lose it, and what an entry that
runs on the host's own root would try.

- **the lock-down**: loopback only, user 1000 with no capabilities, a read-only root, private
  ``/tmp``, ``/scratch`` and ``/dev/shm``, read-only mounts, its own PID namespace, the
  spec's environment only, and the runner's cgroups (tests/test_charliecloud.py's probes and
  assertions, run on this engine where the promise is the same, with what the host adds);
- **the host's own root**: the runner's home (its signing key, the staged evaluation labels),
  the results folder, the host's ``/tmp``, ``/var/tmp`` and home folders hidden; nothing
  written to ``/usr``, ``/etc``, the repository's checkout or ``/var/tmp``; no server of the
  host's loopback reachable; the entry's copy (``/entry``) unchangeable from inside and, on
  the host, by the container's uid;
- **the cgroup limits and operations**: memory without swap, pids, cpuset; freeze and thaw,
  and a busy loop's CPU time stands still while frozen; stop and remove leave no process, even one that double-forked
  away from the entry; orphans; a second rank in the first rank's network namespace;
- **escapes**: thaw itself or leave its cgroup, remount the root writable, signal or trace the
  runner, reach an engine socket, open a host device, gain privileges;
- **without bubblewrap**: a refusal in one line, and ``--unsandboxed`` runs with the mounts in
  place;
- **the adversarial entries** about the runtime (cheat-clock, cheat-rewrite-answers): they
  lose under the host engine as tests/test_threat_model.py asserts they do under Docker.

Runs as root (the containers live in cgroups the runner creates). The runner's home and
results folder are made under ``/var/lib``, readable by anyone, so that only the sandbox's
hiding (not a folder's mode, not the sandbox's own ``/tmp``) keeps them from the entry.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner import paths
from runner.engine import cgroups
from runner.engine.interface import Mount
from runner.engine.process import STAGE_ROOT
from runner.errors import UserError
from tests import test_charliecloud as charliecloud
from tests.test_charliecloud import run, start, wait_for

pytestmark = pytest.mark.docker
SECRET_VAR = "RUNNER_TEST_HOST_SECRET"
REPO = paths.repo_root()
# What the sandbox gives every container besides the spec's environment (HostEngine._environment).
ENGINE_ENV = {"PATH", "HOME", "USER", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES"}


def as_uid_1000(*argv: str) -> subprocess.CompletedProcess:
    """``argv`` run on the host (no sandbox) as the container's uid, to tell the sandbox's
    barrier from a file's mode."""
    return subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", *argv],
                          capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture(scope="module")
def places():
    """The runner's home and results folder outside the host's temporary folders, readable by
    anyone, each with what an entry would want from it: a signing key (beside the runner's
    own, which it keeps private), staged evaluation labels, another run's result."""
    if os.geteuid() != 0:
        pytest.skip("the host engine's containers run in cgroups the runner creates: these tests need root")
    top = Path("/var/lib") / f"runner-host-test-{secrets.token_hex(4)}"
    home, results = top / "home", top / "results"
    planted = {"key": home / "keys" / "planted-signing.key", "labels": home / "data" / "mnist" / "eval" / "labels.npy",
               "result": results / "other-entry" / "run-1" / "result.json"}
    for path in planted.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"secret {path.name}")
    for root, _dirs, files in os.walk(top):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    yield {"home": home, "results": results, **planted}
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def host(places):
    """The host engine (bubblewrap installed when missing), with this module's home and
    results folder."""
    from runner.engine.host import UNSANDBOXED_ENV, HostEngine
    from runner.engine.kinds import ENGINES

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNNER_HOME", str(places["home"]))
        patch.setenv("RUNNER_RESULTS", str(places["results"]))
        patch.delenv(UNSANDBOXED_ENV, raising=False)
        engine = HostEngine.setup(ENGINES["host"], install=True)  # raises where bubblewrap cannot be installed
        assert (refusal := engine.refusal()) is None, refusal
        yield engine


@pytest.fixture(scope="module")
def image(host, tmp_path_factory):
    """The "image" of a small entry: the record of its files, copied and owned by root."""
    context = tmp_path_factory.mktemp("host-context")
    entry = context / "entry"
    entry.mkdir()
    (entry / "Dockerfile").write_text("FROM scratch\n")
    (entry / "requirements.lock").write_text("")
    (entry / "hello.txt").write_text("hello from the entry\n")
    (entry / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(entry / "run.sh", 0o777)  # writable by anyone in the context: the copy must not be
    tag = f"runner/test/host-probe-{secrets.token_hex(4)}:a"
    for _ in host.build_image(context, "entry/Dockerfile", tag, build_args={}, labels={"dev.runner.test": "host"}):
        pass
    assert host.image(tag).id.startswith("sha256:")
    yield SimpleNamespace(tag=tag)  # what test_charliecloud's run and start take of an image
    host.remove_image(tag)


class Listener:
    """A TCP server on the host's 127.0.0.1 and one on an abstract unix socket (both in the
    host's network namespace), counting who got through."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.port = self.tcp.getsockname()[1]
        self.abstract_name = f"runner-host-test-{secrets.token_hex(4)}"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind("\0" + self.abstract_name)
        self.unix.listen(8)
        self.accepted = 0
        self.threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in (self.tcp, self.unix)]
        for thread in self.threads:
            thread.start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                peer, _ = server.accept()
            except OSError:
                return
            self.accepted += 1
            peer.close()

    def close(self) -> None:
        for server in (self.tcp, self.unix):
            server.close()


# --- the lock-down ----------------------------------------------------------------------------

PRINT = "print(json.dumps(found))\n"


def probe(base: str, more: str) -> str:
    """test_charliecloud's probe ``base`` with ``more`` attempts before it prints what it found."""
    assert base.count(PRINT) == 1
    return base.replace(PRINT, more + PRINT)


# What the host's own root adds to test_charliecloud's lock-down probe.
LOCKDOWN_PROBE = probe(charliecloud.LOCKDOWN_PROBE, """\
def read(path):
    with open(path) as f:
        return f.read()
def abstract(name):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect("\\0" + name)
attempt("host tcp", lambda: connect("127.0.0.1", HOST_PORT))
attempt("host abstract socket", lambda: abstract(ABSTRACT))
for path in WRITE_TARGETS:
    attempt("write " + path, lambda: write(path))
for name, path in SECRETS.items():
    attempt("read " + name, lambda: read(path))
found["listings"] = {}
for folder in LISTED:
    try:
        found["listings"][folder] = sorted(os.listdir(folder))
    except OSError as exc:
        found["listings"][folder] = errno.errorcode.get(exc.errno, str(exc.errno))
found["entry"] = read("/entry/hello.txt")
found["entry owner"] = os.stat("/entry/hello.txt").st_uid
attempt("write /entry", lambda: write("/entry/hello.txt", "changed"))
attempt("add to /entry", lambda: write("/entry/new.txt"))
attempt("chmod /entry", lambda: os.chmod("/entry/run.sh", 0o777))
attempt("remove from /entry", lambda: os.unlink("/entry/run.sh"))
# The environment the container was given (Python's locale coercion adds LC_CTYPE to os.environ).
found["env"] = dict(entry.split("=", 1) for entry in read("/proc/self/environ").split("\\0") if entry)
def semaphore():
    import multiprocessing
    multiprocessing.Lock()  # sem_open: a file in /dev/shm (what a DataLoader's workers need)
attempt("semaphore", semaphore)
found["python"] = __import__("sys").executable
""")


@pytest.fixture(scope="module")
def host_files(places):
    """Files an entry must not see, in the host's /tmp, /var/tmp and /dev/shm, readable by anyone."""
    token = secrets.token_hex(4)
    made = [Path(folder) / f"host-test-{token}" for folder in ("/tmp", "/var/tmp", "/dev/shm")]
    for path in made:
        path.write_text("the host's")
        os.chmod(path, 0o644)
    yield made
    for path in made:
        path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def lockdown(host, image, places, host_files, tmp_path_factory):
    """One run of the lock-down probe, with a read-only and a writable mount, a secret in the
    runner's environment, files in the host's temporary folders and servers on its loopback."""
    ro = tmp_path_factory.mktemp("ro")
    rw = tmp_path_factory.mktemp("rw")
    (ro / "data.txt").write_text("read me")
    os.chmod(ro, 0o777)  # writable to anyone on the host: only the mount is read-only
    os.chmod(rw, 0o777)
    token = f"host-test-{secrets.token_hex(4)}"
    targets = ["/usr/" + token, "/etc/" + token, "/" + token, "/var/tmp/" + token, "/var/lib/" + token,
               str(REPO / token), str(places["home"] / token), "/entry/" + token]
    secrets_to_read = {name: str(places[name]) for name in ("key", "labels", "result")}
    secrets_to_read |= {f"host {path.parent}": str(path) for path in host_files}
    listed = [str(places["home"]), str(places["results"]), "/tmp", "/var/tmp", "/root", "/home", "/dev/shm"]
    listener = Listener()
    script = (f"HOME = {str(paths.home() / 'keys')!r}\nSTAGE = {str(STAGE_ROOT)!r}\nTOKEN = {token!r}\n"
              f"HOST_PORT = {listener.port}\nABSTRACT = {listener.abstract_name!r}\n"
              f"WRITE_TARGETS = {targets!r}\nSECRETS = {secrets_to_read!r}\nLISTED = {listed!r}\n" + LOCKDOWN_PROBE)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(SECRET_VAR, "the runner's secret")
            code, out, err = run(host, image, script, env={"GIVEN": "by the spec"},
                                 mounts=[Mount(ro, "/ro"), Mount(rw, "/rw", read_only=False)])
    finally:
        listener.close()
    assert code == 0, err
    shm = next(path for path in host_files if path.parent == Path("/dev/shm"))
    return json.loads(out.strip().splitlines()[-1]) | {"_rw": rw, "_token": token, "_targets": targets,
                                                         "_accepted": listener.accepted, "_shm": shm.name}


def test_only_loopback_and_no_server_of_the_hosts_loopback(lockdown):
    charliecloud.test_only_loopback_and_loopback_works(lockdown)
    assert lockdown["host tcp"] == "ECONNREFUSED"  # its own loopback, where nothing listens
    assert lockdown["host abstract socket"] == "ECONNREFUSED"  # abstract names are per network namespace
    assert lockdown["_accepted"] == 0


def test_the_container_user_is_1000_without_capabilities_in_the_runners_cgroups(lockdown, host, image):
    assert lockdown["uid"] == [1000, 1000, 1000, []]
    # Seen from the host: every process of the container but bwrap's own (root, waiting to kill
    # its child when the runner dies) is host uid 1000, with no capabilities.
    container = start(host, image, "import time; time.sleep(30)")
    try:
        group = cgroups.Cgroups(container.id)
        entry = wait_for(lambda: [pid for pid in group.pids() if Path(f"/proc/{pid}/comm").read_text().startswith("python")],
                         what="the entry's process")
        for pid in entry:
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            assert status["Uid"].split() == ["1000"] * 4 and status["Gid"].split() == ["1000"] * 4
            assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
            assert status["NoNewPrivs"].strip() == "1"
            memberships = Path(f"/proc/{pid}/cgroup").read_text()
            assert f"/runner/{container.id}" in memberships, memberships
    finally:
        container.stop()
        container.remove()


def test_the_root_is_read_only_and_nothing_is_written_to_the_host(lockdown):
    """/usr, /etc, /, /var/lib, the repository's checkout, the runner's home: read-only;
    /var/tmp is the sandbox's empty folder (root's), never the host's."""
    for path in lockdown["_targets"]:
        assert lockdown[f"write {path}"] in ("EROFS", "EACCES", "EPERM"), (path, lockdown[f"write {path}"])
        assert not Path(path).exists(), path
    assert lockdown["write /usr/" + lockdown["_token"]] == "EROFS"
    assert lockdown["write " + str(REPO / lockdown["_token"])] == "EROFS"


def test_tmp_scratch_and_shm_are_private_and_writable(lockdown, host_files):
    """Writable by the container's user as Docker's are (a semaphore lives in /dev/shm: a
    DataLoader with workers needs one), and none of them the host's."""
    charliecloud.test_the_root_is_read_only_and_tmp_scratch_shm_are_private_and_writable(lockdown)
    assert lockdown["semaphore"] == "ok"
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert lockdown["listings"][folder] in ([], [lockdown["_token"]]), (folder, lockdown["listings"][folder])
    for path in host_files:
        assert lockdown[f"read host {path.parent}"] == "ENOENT"


def test_the_runners_home_and_results_and_the_home_folders_are_hidden(lockdown, places, host):
    """The signing key, the staged evaluation labels and another run's result: readable by the
    container's uid on the host (the control), absent in the sandbox. In a hidden home folder
    only the way to the host Python's prefix is there (a pyenv Python under /root)."""
    charliecloud.test_the_runners_home_and_staging_are_not_reachable(lockdown)
    for name in ("key", "labels", "result"):
        assert as_uid_1000("cat", str(places[name])).returncode == 0, name
        assert lockdown[f"read {name}"] == "ENOENT", name
    prefixes = [Path(host.packages()[k]) for k in ("prefix", "base_prefix")]
    for folder in (places["home"], places["results"], Path("/root"), Path("/home")):
        on_the_way = {p.relative_to(folder).parts[0] for p in prefixes if p.is_relative_to(folder) and p != folder}
        listing = lockdown["listings"][str(folder)]
        assert listing == "ENOENT" or set(listing) <= on_the_way, (folder, listing)


def test_mounts_are_read_only_unless_the_spec_says(lockdown):
    charliecloud.test_mounts_are_read_only_unless_the_spec_says(lockdown)


def test_the_entrys_copy_cannot_be_changed_from_inside(lockdown):
    assert lockdown["entry"] == "hello from the entry\n"
    assert lockdown["entry owner"] == 0
    for attempt in ("write /entry", "add to /entry", "chmod /entry", "remove from /entry"):
        assert lockdown[attempt] in ("EROFS", "EACCES", "EPERM"), (attempt, lockdown[attempt])


def test_the_entrys_copy_cannot_be_changed_on_the_host_by_the_containers_uid(host, image):
    folder = Path(host._find(image.tag)["entry"])
    assert (folder / "hello.txt").read_text() == "hello from the entry\n"
    for path in [folder, *folder.rglob("*")]:
        mode = path.lstat().st_mode
        assert path.lstat().st_uid == 0 and not mode & 0o022, (path, oct(mode))
    assert as_uid_1000("sh", "-c", f"echo changed > {folder / 'hello.txt'}").returncode != 0
    assert as_uid_1000("sh", "-c", f"echo new > {folder / 'new.txt'}").returncode != 0
    assert as_uid_1000("chmod", "777", str(folder / "run.sh")).returncode != 0
    assert (folder / "hello.txt").read_text() == "hello from the entry\n" and not (folder / "new.txt").exists()


def test_only_the_containers_own_processes_are_visible(lockdown):
    charliecloud.test_only_the_containers_own_processes_are_visible(lockdown)


def test_the_environment_is_the_spec_and_the_engines_only(lockdown, host):
    env = lockdown["env"]
    assert SECRET_VAR not in env
    assert env["GIVEN"] == "by the spec"
    assert set(env) - {"GIVEN", "PWD"} == ENGINE_ENV, sorted(env)
    assert env.get("PWD", "/") == "/"  # bwrap's, after --chdir: the working folder
    assert env["HOME"] == "/tmp" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert lockdown["python"].startswith(str(host.packages()["prefix"]))  # the host's own Python


# --- the cgroup limits ------------------------------------------------------------------------

def test_memory_beyond_the_limit_is_oom_killed_without_swap(host, image):
    charliecloud.test_memory_beyond_the_limit_is_oom_killed_without_swap(host, image)


def test_the_pids_limit_holds(host, image):
    charliecloud.test_the_pids_limit_holds(host, image)  # bwrap's two processes count too


def test_the_cpuset_is_honoured(host, image):
    charliecloud.test_the_cpuset_is_honoured(host, image)


# --- freeze, stop, remove ----------------------------------------------------------------------

def cpu_time_ns(container) -> int:
    """The container's CPU time as its cgroup accounts it."""
    group = cgroups.Cgroups(container.id)
    if group.v2:
        stat = dict(line.split() for line in (group.dirs()["unified"] / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) * 1000
    return int((group.dirs()["cpuacct"] / "cpuacct.usage").read_text())


def test_freeze_stops_the_count_and_thaw_resumes_it(host, image, tmp_path):
    charliecloud.test_freeze_stops_the_count_and_thaw_resumes_it(host, image, tmp_path)


def test_a_busy_loop_gets_no_cpu_time_while_frozen(host, image):
    """What the cgroup accounts, not what the entry writes: a process that ignores the freeze
    (a loop that never makes a system call) gets no CPU time while frozen."""
    container = start(host, image, "while True:\n    pass\n")
    try:
        wait_for(lambda: cpu_time_ns(container) > 2e8, what="the busy loop")
        container.freeze()
        paused = container.state().status
        samples = []
        for _ in range(4):
            time.sleep(0.5)
            samples.append(cpu_time_ns(container))
        container.thaw()
        resumed = wait_for(lambda: cpu_time_ns(container) > samples[-1] + 2e8, seconds=10, what="the thawed loop")
    finally:
        container.stop()
        container.remove()
    assert paused == "paused" and resumed
    assert samples[-1] - samples[0] < 1e6, samples  # not a millisecond in 1.5 s


def test_stop_kills_and_remove_leaves_nothing_behind(host, image, tmp_path):
    charliecloud.test_stop_kills_and_remove_leaves_nothing_behind(host, image, tmp_path)


DAEMON = """\
    import os, time
    # {token}: names this container's processes on the host
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 3)
            beat = 0
            while True:
                beat += 1
                with open("/out/beat.tmp", "w") as out:
                    out.write(str(beat))
                os.replace("/out/beat.tmp", "/out/beat")
                time.sleep(0.02)
        os._exit(0)
    os.wait()
    while not os.path.exists("/out/beat"):
        time.sleep(0.02)
    print("detached", flush=True)
    time.sleep({linger})
"""


def _beat(folder: Path) -> int:
    try:
        return int((folder / "beat").read_text() or 0)
    except (OSError, ValueError):
        return 0


def _processes_with(token: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if token.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("linger", [0, 300], ids=["the entry exits", "the runner stops it"])
def test_a_double_forked_process_does_not_outlive_its_container(host, image, tmp_path, linger):
    os.chmod(tmp_path, 0o777)
    token = f"host-test-daemon-{secrets.token_hex(4)}"
    script = DAEMON.replace("{token}", token).replace("{linger}", str(linger))
    container = start(host, image, script, mounts=[Mount(tmp_path, "/out", read_only=False)])
    group = cgroups.Cgroups(container.id)
    try:
        wait_for(lambda: _beat(tmp_path) > 0, what="the detached process")
        if linger:
            container.stop()
        assert host.wait(container, 30) is not None
        wait_for(lambda: not group.pids(), seconds=10, what="the container's last process")
        last = _beat(tmp_path)
        time.sleep(0.5)
        assert _beat(tmp_path) == last
        assert _processes_with(token) == []
    finally:
        container.stop()
        container.remove()
    assert not group.exists() and _processes_with(token) == []
    assert not (host.containers_dir() / container.id).exists()
    assert not (STAGE_ROOT / container.id).exists()


def test_owned_lists_the_runners_containers_and_orphans_of_dead_owners_are_removed(host, image):
    charliecloud.test_owned_lists_the_runners_containers_and_orphans_of_dead_owners_are_removed(host, image)


RANK0 = """\
    import socket
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", PORT))
    server.listen(1)
    peer, _ = server.accept()
    peer.sendall(b"hello rank 1")
"""
RANK1 = """\
    import json, socket, time
    found = {"interfaces": sorted(name for _, name in socket.if_nameindex()), "heard": ""}
    try:
        with socket.create_connection(("127.0.0.1", HOST_PORT), timeout=3):
            found["host"] = "ok"
    except OSError as exc:
        found["host"] = type(exc).__name__
    for _ in range(TRIES):
        try:
            with socket.create_connection(("127.0.0.1", PORT), timeout=3) as c:
                found["heard"] = c.recv(64).decode()
                break
        except ConnectionRefusedError:
            time.sleep(0.1)
    print(json.dumps(found))
"""


def test_a_second_rank_joins_the_first_ranks_network_namespace_and_nothing_else(host, image):
    """Rank 1 reaches rank 0 on 127.0.0.1, has loopback only, and reaches no server of the host."""
    name = f"host-test-rank0-{secrets.token_hex(4)}"
    listener = Listener()
    port = listener.port + 1 if listener.port < 65000 else listener.port - 1
    client = RANK1.replace("HOST_PORT", str(listener.port)).replace("PORT", str(port))
    rank0 = start(host, image, RANK0.replace("PORT", str(port)), name=name)
    try:
        code, out, err = run(host, image, client.replace("TRIES", "100"), network_of=name)
        assert code == 0, err
        joined = json.loads(out.strip().splitlines()[-1])
        code, out, err = run(host, image, client.replace("TRIES", "3"))  # alone: nothing listens
        assert code == 0, err
        alone = json.loads(out.strip().splitlines()[-1])
    finally:
        listener.close()
        rank0.stop()
        rank0.remove()
    assert joined["interfaces"] == ["lo"], joined
    assert joined["host"] == "ConnectionRefusedError" and listener.accepted == 0, joined
    assert joined["heard"] == "hello rank 1", joined
    assert alone["heard"] == "" and alone["interfaces"] == ["lo"], alone


# --- escape attempts ------------------------------------------------------------------------------

# What the host's own root adds to test_charliecloud's escape probe (whose "thaw itself" finds
# only "/" in /proc/self/cgroup here: the container has a cgroup namespace of its own). The
# host's hierarchies are bound read-only at /sys/fs/cgroup: every container's group is named.
ESCAPES = probe(charliecloud.ESCAPES, """\
import glob
if os.path.exists("/sys/fs/cgroup/freezer"):
    root, state_file = "/sys/fs/cgroup/freezer", "freezer.state"
else:
    root, state_file = "/sys/fs/cgroup", "cgroup.freeze"
found["own group"] = open("/proc/self/cgroup").read()
states = glob.glob(root + "/runner/*/" + state_file)
found["groups seen"] = len(states)
for n, state in enumerate(states):
    attempt(f"thaw {n}", lambda: write(state, thawed))
found["userns thaw runner"] = sh(" ; ".join(f"unshare -r sh -c 'echo {thawed} > {s}'" for s in states) + " ; false")
found["userns remount usr"] = sh("unshare -r -m sh -c 'mount -o remount,rw /usr && touch /usr/escaped'")
found["escaped usr"] = os.path.exists("/usr/escaped")
found["ptrace runner"] = [libc.ptrace(16, HOST_PID, 0, 0), errno.errorcode.get(ctypes.get_errno(), "")]
attempt("socket containerd", lambda: docker("/run/containerd/containerd.sock"))
found["sudo"] = sh("sudo -n id -u")
found["mount tmpfs"] = sh("mkdir -p /tmp/m && mount -t tmpfs none /tmp/m")
""")


@pytest.fixture(scope="module")
def escapes(host, image, tmp_path_factory):
    """One run of the escape probe, beside a host process of the container's own uid (1000)
    and another container of the runner's (frozen: the probe tries to thaw it)."""
    ro = tmp_path_factory.mktemp("ro-escape")
    rw = tmp_path_factory.mktemp("rw-escape")
    os.chmod(ro, 0o777)
    os.chmod(rw, 0o777)
    victim = subprocess.Popen(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "sleep", "300"])
    other = start(host, image, "import time; time.sleep(300)")
    try:
        wait_for(lambda: len(cgroups.Cgroups(other.id).pids()) >= 2, what="the other container")
        other.freeze()
        script = f"HOST_PID = {os.getpid()}\nVICTIM = {victim.pid}\n" + ESCAPES
        code, out, err = run(host, image, script, mounts=[Mount(ro, "/ro"), Mount(rw, "/rw", read_only=False)])
        assert code == 0, err
        alive = victim.poll() is None
        other_frozen = other.state().status == "paused"
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        other.stop()
        other.remove()
    return json.loads(out.strip().splitlines()[-1]) | {"_victim_alive": alive, "_other_frozen": other_frozen,
                                                         "_ro": ro, "_rw": rw}


def test_a_container_cannot_thaw_a_container_or_leave_its_cgroup(escapes):
    # Its own cgroup namespace: it sees its groups as the root ones, and cannot name them.
    assert all(line.rsplit(":", 1)[1] == "/" for line in escapes["own group"].splitlines()), escapes["own group"]
    assert escapes["groups seen"] >= 1  # the frozen one's, at least: the attempt is a real one
    thaws = {k: v for k, v in escapes.items() if k.startswith("thaw ")}
    assert thaws and all(v in ("EACCES", "EPERM", "EROFS", "ENOENT") for v in thaws.values()), thaws
    assert escapes["leave its cgroup"] in ("EACCES", "EPERM", "EROFS"), escapes["leave its cgroup"]
    assert escapes["userns thaw"][0] != 0 and escapes["userns thaw runner"][0] != 0
    assert escapes["_other_frozen"]


def test_a_container_cannot_remount_its_root_writable(escapes):
    charliecloud.test_a_container_cannot_remount_its_root_writable(escapes)
    assert escapes["userns remount usr"][0] != 0 and not escapes["escaped usr"], escapes["userns remount usr"]
    assert not Path("/usr/escaped").exists() and not Path("/escaped").exists()


def test_a_container_cannot_reach_the_runner_or_the_hosts_processes(escapes):
    charliecloud.test_a_container_cannot_reach_the_hosts_processes(escapes)
    assert escapes["ptrace runner"] == [-1, "ESRCH"]


def test_a_container_cannot_reach_an_engine_socket(escapes):
    assert Path("/var/run/docker.sock").exists() or not shutil.which("dockerd")  # the target is real where Docker is
    charliecloud.test_a_container_cannot_reach_an_engine_socket(escapes)
    assert escapes["socket containerd"] in ("ENOENT", "EACCES", "ECONNREFUSED"), escapes["socket containerd"]


def test_no_host_device_but_the_ordinary_ones_is_in_the_container(escapes):
    """bwrap's minimal /dev (its "core" is a link to /proc/kcore, which uid 1000 cannot open)."""
    tried = {k: v for k, v in escapes.items() if k.startswith("device ")}
    assert len(tried) == 6
    assert all(v in ("ENOENT", "EPERM", "EACCES") for v in tried.values()), tried
    assert set(escapes["dev"]) <= {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
                                   "mqueue", "fd", "stdin", "stdout", "stderr", "core"}, escapes["dev"]
    assert {"null", "urandom", "shm", "pts"} <= set(escapes["dev"])


def test_a_read_only_bind_cannot_be_written(escapes):
    charliecloud.test_a_read_only_bind_cannot_be_written(escapes)


def test_no_setuid_root_file_and_no_privileges_to_gain(escapes):
    charliecloud.test_no_setuid_root_file_and_no_privileges_to_gain(escapes)
    assert escapes["sudo"][0] != 0 and escapes["mount tmpfs"][0] != 0, (escapes["sudo"], escapes["mount tmpfs"])


# --- without bubblewrap ----------------------------------------------------------------------------

def test_without_bubblewrap_the_engine_refuses_in_one_line(host, tmp_path, monkeypatch):
    from runner.engine.host import UNSANDBOXED_ENV, HostEngine
    from runner.engine.kinds import ENGINES

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap there
    monkeypatch.delenv(UNSANDBOXED_ENV, raising=False)
    with pytest.raises(UserError) as refused:
        HostEngine.open(ENGINES["host"])
    said = str(refused.value)
    assert "\n" not in said
    assert "bubblewrap" in said and "--unsandboxed" in said, said
    assert HostEngine(ENGINES["host"]).refusal() is not None


def test_unsandboxed_a_container_runs_and_sees_its_mounts_at_their_paths(host, image, tmp_path, monkeypatch):
    from runner.engine.host import UNSANDBOXED_ENV

    monkeypatch.setenv(UNSANDBOXED_ENV, "1")
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "data.txt").write_text("read me")
    os.chmod(ro, 0o777)
    os.chmod(rw, 0o777)
    script = """\
        import errno, json, os
        found = {"ro": open("/ro/data.txt").read(), "entry": open("/entry/hello.txt").read(), "uid": os.getuid()}
        try:
            open("/ro/escaped", "w")
            found["write ro"] = "ok"
        except OSError as exc:
            found["write ro"] = errno.errorcode[exc.errno]
        with open("/rw/written", "w") as out:
            out.write("from the container")
        print(json.dumps(found))
    """
    code, out, err = run(host, image, script, mounts=[Mount(ro, "/ro"), Mount(rw, "/rw", read_only=False)])
    assert code == 0, err
    found = json.loads(out.strip().splitlines()[-1])
    assert found == {"ro": "read me", "entry": "hello from the entry\n", "uid": 1000, "write ro": "EROFS"}
    assert (rw / "written").read_text() == "from the container"
    assert "unsandboxed" in host.isolation(image.tag)



# --- the repository's adversarial entries, under the host engine -----------------------------------

@pytest.fixture(scope="module")
def on_host(host):
    """The runner's commands on the host engine (``RUNNER_ENGINE``), the host's load lifted:
    two shared cores, and contention is not the subject."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNNER_ENGINE", "host")
        patch.setenv("RUNNER_MAX_OTHER_RUNNABLE", "1000")
        patch.setenv("RUNNER_MAX_STEAL", "1")
        yield host


def _threat_run(entry: str, tmp_path_factory, *options: str) -> dict:
    from tests import test_threat_model as threat

    result = threat._reproduce_smoke(threat.ENTRIES / entry, tmp_path_factory.mktemp("results"), *options)
    assert result["isolation"]["engine"] == "host" and result["isolation"]["isolated"] is False
    assert not result["conforming"]  # never counts, whatever the entry did
    return result


@pytest.fixture(scope="module")
def clock_run(on_host, tmp_path_factory):
    """cheat-clock: every clock trick (work before run_start, a declared evaluation window, fake
    timestamps, its own seed, an untrained final model)."""
    return _threat_run("cheat-clock", tmp_path_factory)


@pytest.fixture(scope="module")
def rewrite_run(on_host, tmp_path_factory):
    """cheat-rewrite-answers: the builder, in the evaluator's container, rewrites the answers it gave."""
    return _threat_run("cheat-rewrite-answers", tmp_path_factory, "--no-infer")


def test_the_clock_cheats_lose_on_the_host_engine_as_on_docker(clock_run):
    """tests/test_threat_model.py's assertions on the same entry, run by the host engine."""
    from tests import test_threat_model as threat

    threat.test_class1_work_before_run_start_is_on_the_clock(clock_run)
    threat.test_class2_an_evaluation_window_the_entry_declares_excludes_nothing(clock_run)
    threat.test_class5_the_final_model_is_gated_on_its_own(clock_run)
    threat.test_class6_the_runner_chooses_the_seed(clock_run)
    threat.test_class7_the_entrys_timestamps_are_ignored(clock_run)


def test_a_rewritten_answer_is_not_scored_on_the_host_engine(rewrite_run):
    from tests import test_threat_model as threat

    threat.test_class3_an_answer_rewritten_after_it_was_given_is_not_scored(rewrite_run)


def test_a_container_removed_before_its_launcher_joined_its_groups_leaves_nothing(host, image, monkeypatch):
    """The launcher joins the container's cgroups itself, a moment after start returns (one
    joined between the removal's look for processes and its rmdir kept a group busy and ran
    on in it: CI's flake in the orphans test). Removed before it joined (here: it sleeps
    first), the launcher is killed with its process group, not waited for: nothing of the
    container runs on and no group is left."""
    import textwrap

    from runner.engine.interface import ContainerSpec
    from runner.engine.labels import process_start

    engine_type = type(host)
    real = engine_type._launcher

    def slow(self, *args):
        lines = real(self, *args).split("\n")
        return "\n".join(lines[:1] + ["sleep 30"] + lines[1:])  # "set -eu", a pause, then the joins

    monkeypatch.setattr(engine_type, "_launcher", slow)
    spec = ContainerSpec(image.tag, ["python3", "-c", textwrap.dedent("import time; time.sleep(60)")], [],
                         workdir=None, label="ch-test")
    container = host.create(spec)
    container.start()
    launcher = int(json.loads((host.containers_dir() / container.id / "record.json").read_text())["pid"])
    groups = cgroups.Cgroups(container.id)
    try:
        assert launcher not in groups.pids()  # not joined yet
        started = time.monotonic()
        container.remove()
        assert time.monotonic() - started < 5  # killed, not waited for
        assert process_start(launcher) is None
        assert not groups.exists()
    finally:
        if process_start(launcher) is not None:
            os.killpg(launcher, signal.SIGKILL)
