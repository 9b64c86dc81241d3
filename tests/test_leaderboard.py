"""``runner leaderboard`` on synthetic reproductions and the real DAWNBench fixtures: the
tables pair claims with signed reproductions, and the static site opens in a real headless
Chromium (Debian's ``chromium``) with no console error and every plot rendered."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from securesystemslib.signer import CryptoSigner
from synthetic_result import edit_result as _edit_result, make_result_folder, stage_mnist_stand_in

from runner.bundle import make_bundle
from runner.cli import main
from runner.dawnbench import export_dawnbench, import_dawnbench, save_claim
from runner.dawnbench.exporter import file_name
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.keys import load_trusted_keys, public_key_dict
from runner.leaderboard import build, formats
from runner.manifest import load_entry

FIXTURES = Path(__file__).parent / "data" / "dawnbench"
CHROMIUM = "/usr/bin/chromium"
AUTHOR = "Jane Doe"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """results/: fixture claims, a verified run paired with its own exported claim, a signed
    non-conforming run of another entry, and a tampered copy of the verified run."""
    root = tmp_path_factory.mktemp("board")
    results, home = root / "results", root / "home"
    signer = CryptoSigner.generate_ed25519()
    keys = root / "trusted.pub.json"
    keys.write_text(json.dumps(public_key_dict(signer.public_key)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        host = capture_host()
        verified = make_result_folder(results / "mnist-cnn-cpu" / "20261122T010203Z-s0-aaaaaa", staged, host)
        names = [file_name(AUTHOR, "small-bn-cnn", "cpu-2core-x86", fw) for fw in ("pytorch 2.13.0+cpu", "torch")]
        _edit_result(verified, conforming=True, nonconforming_reasons=[],
                     entry__claimed={"tta_seconds": 5.3, "dawnbench": names})
        make_bundle(verified, signer)
        other = make_result_folder(results / "mnist-other" / "20261122T020000Z-s1-bbbbbb", staged, host, seed=1)
        _edit_result(other, conforming=False, nonconforming_reasons=["hardware mismatch: cpu model"],
                     entry__name="mnist-other")
        make_bundle(other, signer)
    tampered = results / "mnist-cnn-cpu" / "20261122T030000Z-s0-cccccc"
    shutil.copytree(verified, tampered)
    # Edited after signing: its digests no longer match what was signed.
    _edit_result(tampered, run_id=tampered.name, training__tta_seconds=1.0)

    export_dawnbench(verified, root / "export", AUTHOR)
    for source in (FIXTURES, root / "export"):
        report = import_dawnbench(source)
        assert not report.failures
        for claim in report.claims:
            save_claim(results, claim)
    return results, keys


def table(lb, table_id):
    (found,) = [t for t in lb.tables if t.id == table_id]
    return found


def test_tables_pair_claims_with_verified_reproductions(board):
    results, keys = board
    lb = build(results, load_trusted_keys(keys))
    verdicts = {r.record.run_id: r.verdict for r in lb.reproductions}
    assert verdicts == {
        "20261122T010203Z-s0-aaaaaa": "verified",
        "20261122T020000Z-s1-bbbbbb": "non-conforming",
        "20261122T030000Z-s0-cccccc": "signature check file-digests fails",
    }

    mnist = table(lb, "mnist-train-time")
    paired, unpaired = mnist.rows
    assert paired.claim is not None and paired.claim.team == AUTHOR and paired.reproduction.verified
    assert paired.reproduction.record.run_id == "20261122T010203Z-s0-aaaaaa"  # verified beats the newer tampered run
    assert paired.ratio == pytest.approx(1.0, abs=1e-3)  # its own exported curve, hours to 6 decimals
    assert unpaired.claim is None and unpaired.team == "mnist-other" and not unpaired.reproduction.verified
    latency = table(lb, "mnist-inference-latency")
    assert latency.rows[0].claim.kind == "inference" and latency.rows[0].reproduction.verified
    assert latency.rows[0].ratio == 1.0  # the exported latency is the result's mean, exactly

    cifar = table(lb, "cifar10-train-time")
    assert len(cifar.rows) == 6 and [r.rank for r in cifar.rows] == [1, 2, 3, 4, 5, 6]
    assert cifar.show(cifar.rows[0].claimed) == "0:00:10" and cifar.rows[0].claim.name == "apple_resnet9_8v100_pytorch"
    cost = table(lb, "cifar10-train-cost")
    page = next(r for r in cost.rows if r.claim.name == "davidcpage_resnet9_1v100-ec2_pytorch")
    assert cost.show(page.claimed) == "$0.06" and table(lb, "cifar10-train-time").show(page.claim.tta_seconds) == "0:01:15"
    priced = [f for f in (FIXTURES / "CIFAR10" / "train").glob("*.json")
              if isinstance(json.loads(f.read_text(encoding="utf-8-sig")).get("costPerHour"), float)]
    assert len(cost.rows) == len(priced) < len(cifar.rows)  # files without costPerHour rank on time only
    imagenet = table(lb, "imagenet-train-time")
    # As dawn.cs.stanford.edu/benchmark showed them: rounded up to the second.
    assert [imagenet.show(r.claimed) for r in imagenet.rows[:1]] == ["0:02:38"]
    assert imagenet.column == "Time to 93% Accuracy"
    latency = table(lb, "cifar10-inference-latency")
    assert latency.show(latency.rows[0].claimed) == "0.1345" and latency.column == "1-example Latency (milliseconds)"
    assert len(table(lb, "cifar10-inference-cost").rows) == 2  # two of four CIFAR10 inference files give a cost


def test_qanet_squad_row_shows_as_the_site_did(board):
    """Issue 26 item 6: dawn.cs.stanford.edu showed QANet's SQuAD training time as 0:45:56.
    Its TSV's crossing is 0.765277777778 h, 2755.0000000008 s: the site took the ceiling of that
    float, with no tolerance, so a formatter that forgives float noise would show 0:45:55."""
    results, keys = board
    lb = build(results, load_trusted_keys(keys))
    squad = table(lb, "squad-v1.1-train-time")
    (first,) = [r for r in squad.rows if r.claim is not None and r.claim.name == "dawn_qanet_1tpu"]
    assert first.claim.tta_hours == 0.765277777778
    assert squad.show(first.claimed) == "0:45:56"
    assert first.claim.tta_seconds == 2755.0000000008  # the float the site rounded up
    assert formats.duration(2755.0) == "0:45:55"  # a whole second stays itself


def test_qanet_row_in_the_printed_and_html_tables(board, tmp_path, capsys):
    results, keys = board
    site = tmp_path / "site"
    assert main(["leaderboard", "--results", str(results), "--trusted-keys", str(keys), "--html", str(site)]) == 0
    printed = capsys.readouterr().out
    assert "0:45:56" in printed and "0:45:55" not in printed
    index = (site / "index.html").read_text()
    assert "0:45:56" in index and "0:45:55" not in index


@pytest.mark.parametrize("figure, shown", [
    # TTA of the published ImageNet top 4 (from their TSVs) and how the leaderboard showed them.
    (formats.duration(157.5500004), "0:02:38"),
    (formats.duration(162.3364488), "0:02:43"),
    (formats.duration(561.1788), "0:09:22"),
    (formats.duration(1085.1813971996307), "0:18:06"),
    (formats.duration(0.0026191027585688666 * 3600), "0:00:10"),
    (formats.duration(0.765277777778 * 3600), "0:45:56"),  # QANet, SQuAD: the site's figure
    (formats.duration(10 * 86400 + 10 * 3600 + 42 * 60), "10 days, 10:42:00"),
    (formats.dollars(7.4305), "$7.43"),
    (formats.dollars(1112.64), "$1,112.64"),
    (formats.dollars(2.078e-07 * 10_000), "$0.0021"),
    (formats.milliseconds(0.0739278), "0.0739"),
    (formats.milliseconds(43.45), "43.45"),
    (formats.month("2019-7-22"), "2019-7-22"),
    (formats.month("2020-03-20"), "Mar 2020"),
])
def test_figures_are_written_as_dawnbench_wrote_them(figure, shown):
    assert figure == shown


def test_cli_prints_the_tables(board, capsys):
    results, keys = board
    assert main(["leaderboard", "--results", str(results), "--trusted-keys", str(keys), "--task", "mnist"]) == 0
    out = capsys.readouterr().out
    assert "MNIST Training Time" in out and "1.00×" in out and "✓" in out and "non-conforming" in out
    assert "CIFAR10" not in out


class _Page(HTMLParser):
    """Body rows per leaderboard table and each plot's natural width, from the dumped DOM."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, int] = {}
        self.widths: list[int] = []
        self.loaded = False
        self._table: str | None = None
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "data-table" in a:
            self._table = a["data-table"]
            self.rows[self._table] = 0
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._table and self._in_body:
            self.rows[self._table] += 1
        elif tag == "img" and "plot" in (a.get("class") or ""):
            self.widths.append(int(a.get("data-natural-width", "0")))
        elif tag == "body":
            self.loaded = a.get("data-loaded") == "1"

    def handle_endtag(self, tag):
        if tag == "table":
            self._table, self._in_body = None, False


PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) img.setAttribute("data-natural-width", img.naturalWidth);
  document.body.setAttribute("data-loaded", "1");
  console.log("probe: loaded");
});
</script>"""


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium; installed here when missing (CI starts with nothing)."""
    if not Path(CHROMIUM).exists():
        if os.geteuid() != 0:
            pytest.fail("chromium is missing and installing it needs root: apt-get install -y chromium")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env, capture_output=True)
    return CHROMIUM


def _chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
         "--window-size=1280,2400", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )


def test_site_opens_in_headless_chromium(board, chromium, tmp_path):
    results, keys = board
    site = tmp_path / "site"
    assert main(["leaderboard", "--results", str(results), "--trusted-keys", str(keys), "--html", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert "<script" not in index and "http://" not in index.split("</style>")[0]  # no script, nothing fetched
    # A copy with a probe script beside the page: same folder, so the same relative plot paths.
    probe = site / "probe.html"
    probe.write_text(index.replace("</body>", PROBE + "</body>"))

    dumped = _chromium(chromium, tmp_path / "profile", "--dump-dom", probe.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    console = [line for line in dumped.stderr.splitlines() if ":CONSOLE" in line]
    assert len(console) == 1 and '"probe: loaded"' in console[0], console  # the probe's line, no error

    page = _Page()
    page.feed(dumped.stdout)
    assert page.loaded
    assert page.rows["mnist-train-time"] == 2 and page.rows["cifar10-train-time"] == 6
    assert page.rows["imagenet-train-time"] == 9 and page.rows["squad-v1.1-inference-latency"] == 3
    assert len(page.widths) == 6 and all(w > 0 for w in page.widths), page.widths  # 3 runs x (curve, latency)

    shot = tmp_path / "leaderboard.png"
    taken = _chromium(chromium, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1280,9000",
                      (site / "index.html").as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


@pytest.mark.parametrize("names, ok", [
    ("davidcpage_resnet9_1v100-ec2_pytorch", True),
    (["davidcpage_resnet9_1v100-ec2_pytorch", "laurentmazare_resnet9_1p100_pytorch"], True),
    ("CIFAR10/train/davidcpage_resnet9_1v100-ec2_pytorch", False),  # a stem, not a path
    ([], False),
])
def test_an_entry_names_the_submissions_it_reproduces(tmp_path, names, ok):
    folder = tmp_path / "mnist-cnn-cpu"
    shutil.copytree(Path(__file__).parent.parent / "entries" / "mnist-cnn-cpu", folder)
    data = yaml.safe_load((folder / "entry.yaml").read_text())
    data["claimed"]["dawnbench"] = names
    (folder / "entry.yaml").write_text(yaml.safe_dump(data))
    if ok:
        assert load_entry(folder).claimed["dawnbench"] == names
    else:
        with pytest.raises(UserError, match="claimed.dawnbench"):
            load_entry(folder)


def test_an_unreadable_result_is_skipped_with_the_reason(board, tmp_path, capsys):
    results, keys = board
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    broken = copy / "mnist-broken" / "20261122T040000Z-s0-dddddd"
    broken.mkdir(parents=True)
    (broken / "result.json").write_text('{"run_id": ')
    assert main(["leaderboard", "--results", str(copy), "--trusted-keys", str(keys), "--task", "mnist"]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert f"skipped: {broken / 'result.json'}: not a readable result" in out
    assert "MNIST Training Time" in out
