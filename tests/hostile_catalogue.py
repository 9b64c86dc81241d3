"""Issue 46's catalogue of hostile folders, files and sockets, run against one checkout of the
runner as a user runs it (a fresh process each, an empty HOME), with before/after in mind:

    python tests/hostile_catalogue.py [--checkout PATH] [--timeout 20]

Each case builds its hostile input in a temporary folder, runs one command and prints: the
exit code (``hang`` when it was still running at the time-out and was killed), the seconds, the
first line it printed on stderr (or stdout), and for the cases about data loss whether the
user's files are all still there byte for byte. The synthetic run every case starts from is
made by this checkout's tests (``tests/synthetic_result.py``), signed by a fresh key.
Nothing is written outside the temporary folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
MAKER = r'''
import os, sys
from pathlib import Path
repo, root = sys.argv[1], Path(sys.argv[2])
sys.path[:0] = [f"{repo}/tests", repo]
os.environ["RUNNER_HOME"] = str(root / "home")
from synthetic_result import make_result_folder, new_signer, stage_mnist_stand_in, edit_result
from runner.bundle import make_bundle
from runner.fingerprint import capture_host
signer, keys = new_signer(root)
staged, host = stage_mnist_stand_in(root / "home"), capture_host()
f = make_result_folder(root / "results" / "mnist-cnn-cpu" / "20261110T000203Z-s1-00a0a1", staged, host, seed=1)
edit_result(f, conforming=True, nonconforming_reasons=[])
make_bundle(f, signer)
print(keys)
'''
RUN = "mnist-cnn-cpu/20261110T000203Z-s1-00a0a1"


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


class Case:
    def __init__(self, name: str, argv: list[str], env: dict | None = None, keep: Path | None = None):
        self.name, self.argv, self.env, self.keep = name, argv, env or {}, keep
        self.before = _tree(keep) if keep else None


def _listening_socket(path: Path) -> socket.socket:
    """A Unix socket that accepts and never answers."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    held: list = []

    def accept():
        while True:
            try:
                held.append(server.accept())
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server


def _entry_copy(parent: Path) -> Path:
    """A copy of the default entry (its folder named as the entry, as the manifest asks)."""
    return Path(shutil.copytree(HERE / "entries" / "mnist-cnn-cpu", parent / "mnist-cnn-cpu"))


def _nested_result(folder: Path) -> None:
    (folder / "result.json").write_text("[" * 200_000 + "]" * 200_000)


def cases(root: Path, base: Path) -> list[Case]:
    """Each case in a copy of ``base`` (results/ and home/ holding one signed run)."""
    made = []

    def fresh(name: str) -> Path:
        target = root / name
        shutil.copytree(base, target, symlinks=True)
        return target

    def results_env(at: Path) -> dict:
        return {"RUNNER_HOME": str(at / "home"), "RUNNER_RESULTS": str(at / "results")}

    # -- data loss ---------------------------------------------------------------------------
    at = fresh("site-over-user-files")
    site = at / "mysite"
    for rel, text in {"keys/colleague.pub.json": "{}", "plots/mine.png": "png", "tasks/notes.txt": "mine",
                      "index.html": "<p>my page</p>"}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    made.append(Case("leaderboard --html DIR holding the user's files",
                     ["leaderboard", "--html", str(site)], results_env(at), keep=site))
    at = fresh("site-over-archive")
    archive = at / "results" / "archive"
    (archive / "keys").mkdir(parents=True)
    for i in range(4):
        (archive / "keys" / f"k{i}.pub.json").write_text(json.dumps({"k": i}))
    (archive / "some-run.tar.gz").write_bytes(b"not really a bundle")
    made.append(Case("leaderboard --html results/archive", ["leaderboard", "--html", str(archive)],
                     results_env(at), keep=archive))
    # -- hangs -------------------------------------------------------------------------------
    at = fresh("fifo-result")
    (at / "results" / "mnist-cnn-cpu" / "20261111T000203Z-s2-00b0b1").mkdir()
    os.mkfifo(at / "results" / "mnist-cnn-cpu" / "20261111T000203Z-s2-00b0b1" / "result.json")
    made.append(Case("FIFO result.json: ls", ["ls"], results_env(at)))
    made.append(Case("FIFO result.json: leaderboard", ["leaderboard"], results_env(at)))
    at = fresh("fifo-signing-key")
    keys = at / "home" / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    for p in keys.glob("signing.key*"):
        p.unlink()
    os.mkfifo(keys / "signing.key", 0o600)
    made.append(Case("FIFO signing.key: bundle sign", ["bundle", "sign", str(at / "results" / RUN)], results_env(at)))
    at = fresh("fifo-trusted-key")
    os.mkfifo(at / "fifo.pub.json")
    made.append(Case("FIFO among --trusted-keys: verify",
                     ["verify", str(at / "results" / RUN), "--trusted-keys", str(at / "fifo.pub.json")], results_env(at)))
    at = fresh("fifo-archive-key")
    (at / "results" / "archive" / "keys").mkdir(parents=True)
    os.mkfifo(at / "results" / "archive" / "keys" / "k.pub.json")
    made.append(Case("FIFO in results/archive/keys: ls --trusted-keys it", ["ls", "--trusted-keys",
                     str(at / "results" / "archive" / "keys")], results_env(at)))
    sock = root / "silent.sock"
    _listening_socket(sock)
    entry = _entry_copy(root / "entry-copy")
    made.append(Case("DOCKER_HOST that accepts and never answers: build", ["build", str(entry)],
                     {"DOCKER_HOST": f"unix://{sock}"}))
    # -- tracebacks --------------------------------------------------------------------------
    for command in (["ls"], ["show", RUN], ["leaderboard"]):
        at = fresh(f"nested-{command[0]}")
        _nested_result(at / "results" / RUN)
        made.append(Case(f"result.json nested 200,000 deep: {command[0]}", command, results_env(at)))
    at = fresh("study-tables-5")
    study = at / "results" / "mnist-cnn-cpu" / "studies" / "lesion-20261124T230000Z"
    study.mkdir(parents=True)
    (study / "report.json").write_text(json.dumps({
        "schema_version": 1, "kind": "lesion", "entry": "mnist-cnn-cpu", "written_at": "2026-11-24T23:00:00Z",
        "tables": 5, "plots": [], "notes": [], "runs": []}))
    made.append(Case('study report.json with "tables": 5: leaderboard', ["leaderboard"], results_env(at)))
    at = fresh("truncated-from-runs")
    text = (at / "results" / RUN / "result.json").read_text()
    (at / "results" / RUN / "result.json").write_text(text[: len(text) // 2])
    made.append(Case("truncated result.json: study stability --from-runs",
                     ["study", "stability", str(HERE / "entries" / "mnist-cnn-cpu"), "--from-runs", str(at / "results" / RUN)], results_env(at)))
    entry = _entry_copy(root / "entry-bad-name")
    (entry / os.fsdecode(b"caf\xe9.py")).write_text("x = 1\n")
    made.append(Case("entry file with a non-UTF-8 name: build", ["build", str(entry)]))
    entry = _entry_copy(root / "entry-fifo")
    os.mkfifo(entry / "pipe.py")
    made.append(Case("FIFO in an entry: information check", ["-m", "runner.entry_build.information", str(entry)]))
    entry = _entry_copy(root / "entry-unreadable")
    (entry / "secret.py").write_text("X = 1\n")
    os.chmod(entry / "secret.py", 0)
    made.append(Case("unreadable entry file: information check", ["-m", "runner.entry_build.information", str(entry)]))
    # -- the terminal ------------------------------------------------------------------------
    for command in (["ls"], ["show", RUN]):
        at = fresh(f"escapes-{command[0]}")
        path = at / "results" / RUN / "result.json"
        doc = json.loads(path.read_text())
        doc["entry"]["name"] = "\x1b]0;owned\x07\x1b[2J\x1b[31mall clear\x1b[0m \u202eevil"
        doc["entry"]["model"] = "[red]markup[/red] \x1b[5mblink"
        path.write_text(json.dumps(doc))
        made.append(Case(f"escape sequences in result.json: {command[0]}", command, results_env(at)))
    at = fresh("nan-json")
    path = at / "results" / RUN / "result.json"
    doc = json.loads(path.read_text())
    doc["training"]["tta_seconds"] = float("nan")
    path.write_text(json.dumps(doc))
    made.append(Case("NaN in result.json: ls --json", ["ls", "--json"], results_env(at)))
    # -- resources ---------------------------------------------------------------------------
    entry = _entry_copy(root / "entry-sparse")
    with open(entry / "blob.bin", "wb") as fh:
        fh.truncate(4 << 30)
    made.append(Case("4 GiB sparse entry file: information check", ["-m", "runner.entry_build.information", str(entry)]))
    entry = _entry_copy(root / "entry-16mb")
    text = "".join(f"{i:08d} {hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(16_000_000 // 74 + 1))
    (entry / "big.py").write_text(text[:16_000_000])  # 16 MB, under the 16 MiB an entry file may hold
    made.append(Case("16 MB text entry file: information check", ["-m", "runner.entry_build.information", str(entry)]))
    entry = _entry_copy(root / "entry-20000")
    (entry / "many").mkdir()
    for i in range(20_000):
        (entry / "many" / f"f{i}.py").write_text(f"X = {i}\n")
    made.append(Case("20,000 small entry files: information check", ["-m", "runner.entry_build.information", str(entry)]))
    at = fresh("sparse-events")
    with open(at / "results" / RUN / "events.jsonl", "r+b") as fh:
        fh.truncate(8 << 30)
    made.append(Case("8 GiB sparse events.jsonl: ls", ["ls"], results_env(at)))
    # -- advice ------------------------------------------------------------------------------
    made.append(Case("DOCKER_HOST=foo://bar: build", ["build", str(HERE / "entries" / "mnist-cnn-cpu")],
                     {"DOCKER_HOST": "foo://bar"}))
    at = fresh("key-folder-as-key")
    (at / "keyfolder").mkdir()
    made.append(Case("RUNNER_SIGNING_KEY=a folder: bundle sign", ["bundle", "sign", str(at / "results" / RUN)],
                     {**results_env(at), "RUNNER_SIGNING_KEY": str(at / "keyfolder")}))
    return made


def run_case(case: Case, checkout: Path, cwd: Path, timeout: float) -> tuple[str, float, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "RUNNER_HOME", "RUNNER_RESULTS")}
    env.update({"PYTHONPATH": str(checkout), "HOME": str(cwd / "empty-home"), "COLUMNS": "100", **case.env})
    argv = [sys.executable, *case.argv] if case.argv[0] == "-m" else [sys.executable, "-m", "runner", *case.argv]
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, env=env, capture_output=True, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
        code, out, err = str(done.returncode), done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        code, out, err = "hang", (exc.stdout or b"").decode(errors="replace"), (exc.stderr or b"").decode(errors="replace")
    seconds = time.perf_counter() - start
    lines = [line for line in (err or out).splitlines() if line.strip() and not line.startswith(("<frozen runpy>", "  warn("))]
    said = "Traceback (…) " + lines[-1] if "Traceback" in err and lines else (lines[0] if lines else "")
    if "\x1b" in out + err or "\u202e" in out + err:
        said = "[ESC/bidi reached the terminal] " + said
    if "--json" in case.argv and code == "0":
        try:
            json.loads(out, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
            said = "valid JSON"
        except ValueError as exc:
            said = f"NOT JSON ({exc})"
    intact = ""
    if case.keep is not None:
        after = _tree(case.keep) if case.keep.exists() else {}
        lost = [k for k, v in case.before.items() if after.get(k) != v]
        intact = "all kept" if not lost else f"LOST {len(lost)}: {', '.join(lost[:3])}"
    return code, seconds, said, intact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=HERE)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--only", help="run the cases whose name holds this text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        root = Path(tmp)
        base = root / "base"
        base.mkdir()
        subprocess.run([sys.executable, "-c", MAKER, str(HERE), str(base)], check=True, capture_output=True, cwd=root)
        (root / "empty-home").mkdir()
        print(f"checkout: {args.checkout.resolve()}")
        print(f"{'case':<55} {'exit':>4} {'s':>6}  first line / files")
        for case in cases(root, base):
            if args.only and args.only not in case.name:
                continue
            code, seconds, said, intact = run_case(case, args.checkout.resolve(), root, args.timeout)
            print(f"{case.name:<55} {code:>4} {seconds:6.1f}  {intact + ' | ' if intact else ''}{said[:160]}", flush=True)
        for p in root.rglob("*"):  # a FIFO left behind must not block the clean-up
            if p.is_fifo():
                p.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
