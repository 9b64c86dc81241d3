"""Charliecloud as the engine (issue 47), against the real ``ch-image`` and ``ch-run``: what the
runner promises of every engine, checked where a daemonless engine could lose it.

- **builds**: Docker's ``/tmp`` semantics kept (a ``COPY`` into ``/tmp`` is there for the next
  ``RUN``), a ``RUN`` has no network, sees neither the host's ``/tmp`` nor the runner's home,
  and runs as the unprivileged builder (host uid 2000), never root; the image id is the
  content's digest; ``image_files`` is the image without ch-image's own files;
- **containers**: the run contract's lock-down (loopback only, user 1000, read-only root,
  private ``/tmp``, ``/scratch`` and ``/dev/shm``, read-only mounts, its own PID namespace,
  nothing of the runner's environment or home), the cgroup limits (memory without swap, pids,
  cpuset), freeze and thaw, stop, a removal that leaves nothing behind, ownership and orphans,
  and a second rank in the first's network namespace;
- **escapes**: what a hostile entry would try from inside (thaw itself through the cgroup
  files, a user namespace to remount the root writable, the host's processes, the Docker
  socket, a device the devices cgroup refuses, a read-only bind, a setuid-root file), each of
  which must fail.

Runs as root (the engine's containers live in cgroups the runner creates); installs
Charliecloud through ``runner setup``'s code when it is missing, as tests/test_podman.py does
for Podman. The base image is the session's CPU base, built in Charliecloud's own storage.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from runner import paths
from runner.engine import cgroups
from runner.engine.charliecloud import storage_name
from runner.engine.containers import remove_orphans
from runner.engine.interface import BuildFailed, Confinement, ContainerSpec, Mount
from runner.engine.labels import LABEL_HOST, LABEL_PID, LABEL_PID_START, MANAGED_LABEL, me
from runner.engine.process import STAGE_ROOT

pytestmark = pytest.mark.docker
CPU_BASE = "python3.11-bookworm"
SECRET_VAR = "RUNNER_TEST_CH_SECRET"


@pytest.fixture(scope="module")
def ch():
    """The Charliecloud engine, whichever engine the session uses (installed when missing)."""
    from runner.engine.kinds import ENGINES, implementation
    from runner.errors import UserError

    if os.geteuid() != 0:
        pytest.skip("Charliecloud's containers run in cgroups the runner creates: these tests need root")
    kind = ENGINES["charliecloud"]
    try:
        engine = implementation(kind).setup(kind, install=True)
    except UserError as exc:
        pytest.skip(f"Charliecloud is not installed and could not be: {exc}")
    refusal = engine.refusal()
    assert refusal is None, refusal
    return engine


@pytest.fixture(scope="module")
def base(ch):
    from runner.images import ensure_base

    return ensure_base(CPU_BASE, ch)


def run(ch, base, script: str, *, mounts=(), timeout: float = 120, **options):
    """``python3 -c script`` in a locked-down container of the base image: (exit code, stdout, stderr)."""
    spec = ContainerSpec(base.tag, ["python3", "-c", textwrap.dedent(script)], list(mounts), workdir=None,
                         timeout_s=timeout, label="ch-test", **options)
    finished = ch.run(spec)
    return finished.exit_code, finished.stdout.decode(), finished.stderr.decode()


def start(ch, base, script: str, *, mounts=(), **options):
    spec = ContainerSpec(base.tag, ["python3", "-c", textwrap.dedent(script)], list(mounts), workdir=None,
                         label="ch-test", **options)
    container = ch.create(spec)
    container.start()
    return container


def wait_for(predicate, seconds: float = 30, what: str = "the container"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not get there within {seconds} s")


# --- builds ---------------------------------------------------------------------------------

PROBE_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY hello.txt /tmp/hello.txt
RUN cp /tmp/hello.txt /copied-from-tmp.txt
RUN python3 -c "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)" > /net.txt 2>&1; echo $? >> /net.txt
RUN id -u > /uid.txt; for f in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs; do if [ -e $f ]; then (echo $$ > $f) 2>/dev/null && echo wrote || echo refused; fi; done > /root-path.txt
RUN ls -a /tmp > /tmp-listing.txt; test -e {marker} && echo visible > /host-tmp.txt || echo hidden > /host-tmp.txt
RUN test -e {home} && echo visible > /home.txt || echo hidden > /home.txt
"""


def build(ch, base, folder: Path, tag: str, dockerfile: str, files: dict[str, str], *, no_cache: bool = False):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (folder / name).write_text(text)
    for _ in ch.build_image(folder, "Dockerfile", tag, build_args={"BASE_IMAGE": base.tag},
                            labels={"dev.runner.test": "charliecloud"}, no_cache=no_cache):
        pass
    return ch.image(tag)


@pytest.fixture(scope="module")
def host_tmp_marker():
    marker = Path("/tmp") / f"ch-test-host-tmp-{secrets.token_hex(4)}"
    marker.write_text("the host's /tmp")
    os.chmod(marker, 0o644)
    yield marker
    marker.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def probe_builds(ch, base, host_tmp_marker, tmp_path_factory):
    """The probe image, the same content built again without the cache, and a changed file."""
    suffix = secrets.token_hex(4)
    dockerfile = PROBE_DOCKERFILE.replace("{marker}", str(host_tmp_marker)).replace("{home}", str(paths.home() / "keys"))
    root = tmp_path_factory.mktemp("ch-builds")
    tags = [f"runner/test/ch-probe-{suffix}:{n}" for n in ("a", "b", "c")]
    try:
        first = build(ch, base, root / "a", tags[0], dockerfile, {"hello.txt": "hello from COPY\n"})
        again = build(ch, base, root / "b", tags[1], dockerfile, {"hello.txt": "hello from COPY\n"}, no_cache=True)
        changed = build(ch, base, root / "c", tags[2], dockerfile, {"hello.txt": "hello, changed\n"})
        yield {"first": first, "again": again, "changed": changed, "tag": tags[0]}
    finally:
        for tag in tags:
            if ch.find_image(tag):
                ch.remove_image(tag)


def image_text(ch, tag: str, name: str) -> str:
    return (ch.image_dir(tag) / name).read_text()


def test_a_copy_into_tmp_is_there_for_the_next_run_step(ch, probe_builds):
    assert image_text(ch, probe_builds["tag"], "copied-from-tmp.txt") == "hello from COPY\n"


def test_a_run_step_has_no_network(ch, probe_builds):
    text = image_text(ch, probe_builds["tag"], "net.txt")
    assert text.strip().splitlines()[-1] != "0", text  # the connection failed
    assert "unreachable" in text.lower(), text


def test_a_run_step_runs_as_the_unprivileged_builder(ch, probe_builds):
    # Root in ch-image's user namespace, host uid 2000 outside: what it writes is the builder's,
    # and a file only host root may write (the root cgroup's process list) refuses it.
    folder = ch.image_dir(probe_builds["tag"])
    assert (folder / "uid.txt").read_text() == "0\n"  # root as ch-image emulates it
    assert os.stat(folder / "uid.txt").st_uid == 2000
    assert (folder / "root-path.txt").read_text() == "refused\n"


def test_a_run_step_sees_neither_the_hosts_tmp_nor_the_runners_home(ch, probe_builds, host_tmp_marker):
    tag = probe_builds["tag"]
    assert (paths.home() / "keys").exists()  # the probe's target exists on the host
    assert image_text(ch, tag, "host-tmp.txt") == "hidden\n"
    assert host_tmp_marker.name not in image_text(ch, tag, "tmp-listing.txt")
    assert image_text(ch, tag, "home.txt") == "hidden\n"


def test_the_image_id_is_the_contents_digest(probe_builds):
    assert probe_builds["first"].id == probe_builds["again"].id  # rebuilt without the cache
    assert probe_builds["first"].id != probe_builds["changed"].id  # one file differs


def test_image_files_are_the_image_without_ch_images_own_files(ch, probe_builds):
    stream = ch.image_files(probe_builds["tag"])
    try:
        data = b"".join(stream)
    finally:
        stream.close()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        hello = tar.extractfile("copied-from-tmp.txt").read()
    tops = {name.split("/")[0] for name in names}
    assert hello == b"hello from COPY\n"
    assert {"bin", "etc", "usr", "tmp"} <= tops
    assert not tops & {"ch", ".git", ".gitignore"}, sorted(tops & {"ch", ".git", ".gitignore"})


def test_a_failing_run_step_is_a_build_failure(ch, base, tmp_path):
    tag = f"runner/test/ch-fails-{secrets.token_hex(4)}:a"
    dockerfile = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN python3 -c \"import urllib.request; urllib.request.urlopen('http://example.com', timeout=3)\"\n"
    try:
        with pytest.raises(BuildFailed):
            build(ch, base, tmp_path / "ctx", tag, dockerfile, {})
        assert ch.find_image(tag) is None
    finally:
        # ch-image leaves the failed image's folder, with no record of the runner's to remove it by.
        shutil.rmtree(ch.storage() / "img" / storage_name(tag), ignore_errors=True)


# --- containers: the lock-down ---------------------------------------------------------------

# The head of the probes run inside: ``attempt`` records "ok" or the errno's name.
PROBE_HEAD = """\
import ctypes, errno, json, os, socket, subprocess
found = {}
def attempt(name, action):
    try:
        action()
        found[name] = "ok"
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
def write(path, text="x"):
    with open(path, "w") as out:
        out.write(text)
"""
LOCKDOWN_PROBE = PROBE_HEAD + """\
def connect(host, port):
    with socket.create_connection((host, port), timeout=3):
        pass
def loopback():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=3)
    peer, _ = server.accept()
    client.sendall(b"ping")
    assert peer.recv(4) == b"ping"
found["interfaces"] = sorted(name for _, name in socket.if_nameindex())
attempt("outside", lambda: connect("1.1.1.1", 53))
attempt("loopback", loopback)
found["uid"] = [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]
for path in ("/etc/runner-test", "/usr/runner-test", "/runner-test"):
    attempt("write " + path, lambda: write(path))
for folder in ("/tmp", "/scratch", "/dev/shm", "/ro", "/rw"):
    attempt("write " + folder, lambda: write(folder + "/" + TOKEN))
found["tmp"] = sorted(os.listdir("/tmp"))
found["shm"] = sorted(os.listdir("/dev/shm"))
found["nosuid"] = {p: bool(os.statvfs(p).f_flag & os.ST_NOSUID) for p in ("/tmp", "/scratch", "/dev/shm", "/rw")}
found["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
found["env"] = dict(os.environ)
found["home visible"] = os.path.exists(HOME)
found["stage visible"] = os.path.exists(STAGE)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def lockdown(ch, base, tmp_path_factory):
    """One run of the lock-down probe, with a read-only and a writable mount, a secret in the
    runner's environment and a file in the host's /dev/shm."""
    ro = tmp_path_factory.mktemp("ro")
    rw = tmp_path_factory.mktemp("rw")
    (ro / "data.txt").write_text("read me")
    os.chmod(ro, 0o777)  # writable to anyone on the host: only the mount is read-only
    os.chmod(rw, 0o777)
    shm = Path("/dev/shm") / f"ch-test-{secrets.token_hex(4)}"
    shm.write_text("the host's shared memory")
    token = f"ch-test-{secrets.token_hex(4)}"
    script = f"HOME = {str(paths.home() / 'keys')!r}\nSTAGE = {str(STAGE_ROOT)!r}\nTOKEN = {token!r}\n" + LOCKDOWN_PROBE
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_VAR, "the runner's secret")
        try:
            code, out, err = run(ch, base, script, env={"GIVEN": "by the spec"},
                                 mounts=[Mount(ro, "/ro"), Mount(rw, "/rw", read_only=False)])
        finally:
            shm.unlink(missing_ok=True)
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1]) | {"_shm": shm.name, "_rw": rw, "_token": token}


def test_only_loopback_and_loopback_works(lockdown):
    assert lockdown["interfaces"] == ["lo"]
    assert lockdown["outside"] == "ENETUNREACH"
    assert lockdown["loopback"] == "ok"


def test_the_container_user_is_1000_not_root(lockdown, ch, base):
    assert lockdown["uid"] == [1000, 1000, 1000, []]
    # Seen from the host: every process of the container but the launcher (root, in the host's
    # user namespace, waiting to kill its child) is host uid 1000, with no capabilities.
    container = start(ch, base, "import time; time.sleep(30)")
    try:
        host_userns = os.readlink("/proc/self/ns/user")
        entry = wait_for(lambda: [pid for pid in cgroups.Cgroups(container.id).pids()
                                  if os.readlink(f"/proc/{pid}/ns/user") != host_userns], what="the entry's process")
        for pid in entry:
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            assert status["Uid"].split() == ["1000"] * 4 and status["Gid"].split() == ["1000"] * 4
            assert int(status["CapEff"], 16) == 0 and status["NoNewPrivs"].strip() == "1"
            assert Path(f"/proc/{pid}/uid_map").read_text().split() == ["1000", "1000", "1"]
    finally:
        container.stop()
        container.remove()


def test_the_root_is_read_only_and_tmp_scratch_shm_are_private_and_writable(lockdown):
    for path in ("/etc/runner-test", "/usr/runner-test", "/runner-test"):
        assert lockdown[f"write {path}"] == "EROFS", path
    for path in ("/tmp", "/scratch", "/dev/shm"):
        assert lockdown[f"write {path}"] == "ok", path
        assert lockdown["nosuid"][path], path
    assert not any(name.startswith("ch-test-host-tmp-") for name in lockdown["tmp"])
    assert lockdown["_shm"] not in lockdown["shm"]  # the host's /dev/shm is not the container's
    assert not (Path("/dev/shm") / lockdown["_token"]).exists()


def test_mounts_are_read_only_unless_the_spec_says(lockdown):
    assert lockdown["write /ro"] == "EROFS"
    assert lockdown["write /rw"] == "ok"
    written = lockdown["_rw"] / lockdown["_token"]
    assert written.read_text() == "x" and written.stat().st_uid == 1000
    assert lockdown["nosuid"]["/rw"]


def test_only_the_containers_own_processes_are_visible(lockdown):
    assert len(lockdown["pids"]) <= 3 and 1 in lockdown["pids"], lockdown["pids"]
    assert os.getpid() not in lockdown["pids"] or os.getpid() < 4


def test_the_runners_home_and_staging_are_not_reachable(lockdown):
    assert (paths.home() / "keys").exists()
    assert lockdown["home visible"] is False
    assert lockdown["stage visible"] is False


def test_the_environment_is_the_spec_and_the_images_only(lockdown, ch, base):
    env = lockdown["env"]
    image_env = ch._find(base.tag).get("env") or {}
    assert SECRET_VAR not in env
    assert env["GIVEN"] == "by the spec"
    extra = set(env) - set(image_env) - {"GIVEN"} - {"CH_RUNNING"}  # ch-run's own marker
    assert extra == set(), extra


# --- containers: the cgroup limits -------------------------------------------------------

def test_memory_beyond_the_limit_is_oom_killed_without_swap(ch, base):
    script = """\
        import sys
        blocks = []
        for _ in range(40):
            blocks.append(bytearray(8 << 20))  # 320 MiB in all, each page touched
            for i in range(0, len(blocks[-1]), 4096):
                blocks[-1][i] = 1
        print("allocated", flush=True)
    """
    container = start(ch, base, script, memory="96m")
    try:
        group = cgroups.Cgroups(container.id)
        if group.v2:
            memory = group.dirs()["unified"]
            assert int((memory / "memory.max").read_text()) == 96 << 20
            assert (memory / "memory.swap.max").read_text().strip() == "0"
        else:
            memory = group.dirs()["memory"]
            assert int((memory / "memory.limit_in_bytes").read_text()) == 96 << 20
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                assert int(swap.read_text()) == 96 << 20
            else:
                assert (memory / "memory.swappiness").read_text().strip() == "0"
        code = ch.wait(container, 60)
        oom = (memory / ("memory.events" if group.v2 else "memory.oom_control")).read_text()
        out, _ = ch.logs(container)
    finally:
        container.remove()
    assert code != 0 and b"allocated" not in out
    assert "oom_kill 0" not in oom, oom


def test_the_pids_limit_holds(ch, base):
    script = """\
        import os, time
        made = 0
        for _ in range(60):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(5)
                os._exit(0)
            made += 1
        print(made)
    """
    code, out, err = run(ch, base, script, confinement=Confinement(pids_limit=16))
    assert code == 0, err
    assert 5 < int(out.split()[-1]) < 16


def test_the_cpuset_is_honoured(ch, base):
    core = (os.cpu_count() or 1) - 1
    code, out, err = run(ch, base, "import os; print(sorted(os.sched_getaffinity(0)))", core=core)
    assert code == 0, err
    assert json.loads(out) == [core]


# --- containers: freeze, stop, remove -----------------------------------------------------

COUNTER = """\
    import time
    count = 0
    while True:
        count += 1
        if count % 20000 == 0:
            with open("/out/count.tmp", "w") as out:
                out.write(str(count))
            import os
            os.replace("/out/count.tmp", "/out/count")
"""


def _count(folder: Path) -> int:
    try:
        return int((folder / "count").read_text() or 0)
    except (OSError, ValueError):
        return 0


def test_freeze_stops_the_count_and_thaw_resumes_it(ch, base, tmp_path):
    os.chmod(tmp_path, 0o777)
    container = start(ch, base, COUNTER, mounts=[Mount(tmp_path, "/out", read_only=False)])
    try:
        wait_for(lambda: _count(tmp_path) > 0, what="the counter")
        container.freeze()
        assert container.state().status == "paused"
        frozen = _count(tmp_path)
        time.sleep(1.5)
        assert _count(tmp_path) == frozen
        container.thaw()
        assert container.state().status == "running"
        wait_for(lambda: _count(tmp_path) > frozen, seconds=10, what="the thawed counter")
    finally:
        container.stop()
        container.remove()


def test_stop_kills_and_remove_leaves_nothing_behind(ch, base, tmp_path):
    os.chmod(tmp_path, 0o777)
    container = start(ch, base, COUNTER, mounts=[Mount(tmp_path, "/out", read_only=False)])
    wait_for(lambda: _count(tmp_path) > 0, what="the counter")
    group = cgroups.Cgroups(container.id)
    assert group.pids()
    started = time.monotonic()
    container.stop()
    code = ch.wait(container, 10)
    assert code != 0 and time.monotonic() - started < 10
    assert container.state().status == "exited"
    stopped = _count(tmp_path)
    time.sleep(0.5)
    assert _count(tmp_path) == stopped
    container.remove()
    left = [str(d) for d in group.dirs().values() if d.exists()]
    assert left == []
    assert not (ch.containers_dir() / container.id).exists()
    assert not (STAGE_ROOT / container.id).exists()


# --- ownership --------------------------------------------------------------------------

def test_owned_lists_the_runners_containers_and_orphans_of_dead_owners_are_removed(ch, base):
    proc = subprocess.Popen(["true"])
    from runner.engine.labels import process_start

    dead_start = process_start(proc.pid) or "1"
    proc.wait()
    live = start(ch, base, "import time; time.sleep(60)")
    orphan = start(ch, base, "import time; time.sleep(60)")
    try:
        owned = {c.id: c for c in ch.owned()}
        assert {live.id, orphan.id} <= set(owned)
        assert owned[live.id].labels[MANAGED_LABEL] == "ch-test"
        assert owned[live.id].labels[LABEL_PID] == str(os.getpid())
        record_path = ch.containers_dir() / orphan.id / "record.json"
        record = json.loads(record_path.read_text())
        record["labels"] |= {LABEL_PID: str(proc.pid), LABEL_PID_START: dead_start, LABEL_HOST: me().host}
        record_path.write_text(json.dumps(record))
        remove_orphans(ch)
        ids = {c.id for c in ch.owned()}
        assert live.id in ids and orphan.id not in ids
        assert not cgroups.Cgroups(orphan.id).exists()
    finally:
        for container in (live, orphan):
            if (ch.containers_dir() / container.id).exists():
                container.stop()
                container.remove()


def test_a_second_rank_joins_the_first_ranks_network_namespace(ch, base):
    name = f"ch-test-rank0-{secrets.token_hex(4)}"
    server = """\
        import socket
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 29500))
        server.listen(1)
        print("listening", flush=True)
        peer, _ = server.accept()
        peer.sendall(b"hello rank 1")
    """
    client = """\
        import socket, time
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", 29500), timeout=3) as c:
                    print(c.recv(64).decode())
                    break
            except ConnectionRefusedError:
                time.sleep(0.1)
    """
    rank0 = ch.create(ContainerSpec(base.tag, ["python3", "-c", textwrap.dedent(server)], [], workdir=None,
                                    name=name, label="ch-test"))
    try:
        rank0.start()
        code, out, err = run(ch, base, client, network_of=name)
        assert code == 0, err
        assert out.strip() == "hello rank 1"
        assert ch.wait(rank0, 30) == 0
        code, out, _ = run(ch, base, client.replace("range(100)", "range(3)"))  # alone: nothing listens
        assert out.strip() == ""
    finally:
        rank0.stop()
        rank0.remove()


# --- escape attempts ---------------------------------------------------------------------

ESCAPES = PROBE_HEAD + """\
groups = [line.split(":", 2) for line in open("/proc/self/cgroup").read().splitlines()]
v1 = [path for _, controller, path in groups if controller == "freezer"]
if v1:  # cgroup v1: the freezer hierarchy
    freezer, root, thawed = v1[0], "/sys/fs/cgroup/freezer", "THAWED"
    state = root + freezer + "/freezer.state"
else:  # cgroup v2: the unified hierarchy's cgroup.freeze
    freezer, root, thawed = [path for hierarchy, _, path in groups if hierarchy == "0"][0], "/sys/fs/cgroup", "0"
    state = root + freezer + "/cgroup.freeze"
found["freezer"] = freezer
attempt("thaw itself", lambda: write(state, thawed))
attempt("leave its cgroup", lambda: write(root + "/cgroup.procs", str(os.getpid())))
def sh(command):
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    return [done.returncode, done.stdout + done.stderr]
found["userns thaw"] = sh(f"unshare -r sh -c 'echo {thawed} > {state}'")
found["userns remount"] = sh("unshare -r -m sh -c 'mount -o remount,rw / && touch /escaped'")
found["remount"] = sh("mount -o remount,rw /")
found["escaped file"] = os.path.exists("/escaped")
attempt("host environ", lambda: open(f"/proc/{HOST_PID}/environ").read())
attempt("kill host", lambda: os.kill(VICTIM, 9))
attempt("signal host", lambda: os.kill(HOST_PID, 0))
libc = ctypes.CDLL(None, use_errno=True)
found["ptrace"] = libc.ptrace(16, VICTIM, 0, 0)  # PTRACE_ATTACH
found["ptrace errno"] = errno.errorcode.get(ctypes.get_errno(), "")
def docker(path):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock"):
    attempt("socket " + path, lambda: docker(path))
for path in ("/dev/net/tun", "/dev/fuse", "/dev/vda", "/dev/kvm", "/dev/kmsg", "/dev/mem"):
    attempt("device " + path, lambda: os.close(os.open(path, os.O_RDWR)))
found["dev"] = sorted(os.listdir("/dev"))
attempt("read-only bind", lambda: write("/ro/escaped"))
def setuid_root():
    write("/rw/suid")
    os.chown("/rw/suid", 0, 0)
attempt("setuid root", setuid_root)
def setuid_own():
    write("/tmp/suid")
    os.chmod("/tmp/suid", 0o4755)
attempt("setuid own file", setuid_own)
found["no_new_privs"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("NoNewPrivs")][0]
found["capabilities"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff")][0]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def escapes(ch, base, tmp_path_factory):
    """One run of the escape probe, beside a host process of the container's own uid (1000)."""
    ro = tmp_path_factory.mktemp("ro-escape")
    rw = tmp_path_factory.mktemp("rw-escape")
    os.chmod(ro, 0o777)
    os.chmod(rw, 0o777)
    victim = subprocess.Popen(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "sleep", "300"])
    try:
        script = f"HOST_PID = {os.getpid()}\nVICTIM = {victim.pid}\n" + ESCAPES
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(SECRET_VAR, "the runner's secret")
            code, out, err = run(ch, base, script, mounts=[Mount(ro, "/ro"), Mount(rw, "/rw", read_only=False)])
        assert code == 0, err
        alive = victim.poll() is None
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    return json.loads(out.strip().splitlines()[-1]) | {"_victim_alive": alive, "_ro": ro, "_rw": rw}


def test_a_container_cannot_thaw_itself_or_leave_its_cgroup(escapes):
    assert escapes["freezer"].startswith("/runner/")  # it is in the runner's group
    assert escapes["thaw itself"] in ("EACCES", "EPERM", "EROFS"), escapes["thaw itself"]
    assert escapes["leave its cgroup"] in ("EACCES", "EPERM", "EROFS"), escapes["leave its cgroup"]
    assert escapes["userns thaw"][0] != 0, escapes["userns thaw"]


def test_a_container_cannot_remount_its_root_writable(escapes):
    assert escapes["userns remount"][0] != 0, escapes["userns remount"]
    assert escapes["remount"][0] != 0, escapes["remount"]
    assert escapes["escaped file"] is False


def test_a_container_cannot_reach_the_hosts_processes(escapes):
    assert escapes["host environ"] != "ok"
    assert escapes["kill host"] == "ESRCH" and escapes["signal host"] == "ESRCH"
    assert escapes["ptrace"] == -1 and escapes["ptrace errno"] in ("ESRCH", "EPERM")
    assert escapes["_victim_alive"]


def test_a_container_cannot_reach_an_engine_socket(escapes):
    for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock"):
        assert escapes[f"socket {path}"] in ("ENOENT", "EACCES", "ECONNREFUSED"), (path, escapes[f"socket {path}"])


def test_no_host_device_but_the_ordinary_ones_is_in_the_container(escapes):
    """A minimal /dev, as Docker's: the host's /dev/net/tun and /dev/fuse (open to anyone on
    the host), its disk, kvm, kmsg and mem are not even there (on cgroup v1 the devices
    cgroup would refuse them besides)."""
    tried = {k: v for k, v in escapes.items() if k.startswith("device ")}
    assert len(tried) == 6
    assert all(v in ("ENOENT", "EPERM", "EACCES") for v in tried.values()), tried
    assert set(escapes["dev"]) <= {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
                                   "mqueue", "fd", "stdin", "stdout", "stderr"}, escapes["dev"]
    assert {"null", "urandom", "shm", "pts"} <= set(escapes["dev"])


def test_a_read_only_bind_cannot_be_written(escapes):
    assert escapes["read-only bind"] == "EROFS"
    assert not (escapes["_ro"] / "escaped").exists()


def test_no_setuid_root_file_and_no_privileges_to_gain(escapes):
    assert escapes["setuid root"] in ("EPERM", "EINVAL")  # EINVAL: uid 0 is not even mapped
    assert os.stat(escapes["_rw"] / "suid").st_uid == 1000
    assert escapes["no_new_privs"] == "1"
    assert int(escapes["capabilities"], 16) == 0
