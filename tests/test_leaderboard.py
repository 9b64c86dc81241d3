"""``runner leaderboard`` on synthetic reproductions and the real DAWNBench fixtures: the
tables pair claims with signed reproductions, and the site (``--html``) is a folder you can
publish: copied elsewhere, its index, task and reproduction pages open in a real headless
Chromium (Debian's ``chromium``) with no console error, every plot rendered and every link
resolving inside the folder, and no file names a path of the host."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from securesystemslib.signer import CryptoSigner
from synthetic_result import edit_result as _edit_result, make_result_folder, stage_mnist_stand_in

from runner import paths
from runner.bundle import Limits, make_bundle, open_bundle, pack
from runner.cli import main
from runner.dawnbench import export_dawnbench, import_dawnbench, save_claim
from runner.dawnbench.claims import load_claims
from runner.dawnbench.tasks import format_task
from runner.dawnbench.exporter import file_name
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.keys import public_key_dict
from runner.keys.trust import trusted_keys
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

        export_dawnbench(verified, root / "export", AUTHOR, trusted_keys=[signer.public_key])
        for source in (FIXTURES, root / "export"):
            report = import_dawnbench(source)
            assert not report.failures
            for claim in report.claims:
                save_claim(results, claim)
        yield results, keys  # RUNNER_HOME stays the board's: its data is what verify recomputes with


def table(lb, table_id):
    (found,) = [t for t in lb.tables if t.id == table_id]
    return found


def test_tables_pair_claims_with_verified_reproductions(board):
    results, keys = board
    lb = build(results, trusted_keys(keys))
    verdicts = {r.record.run_id: (r.verdict.word, r.reason.split(":")[0]) for r in lb.reproductions}
    assert verdicts == {
        "20261122T010203Z-s0-aaaaaa": ("counts", "counts"),
        "20261122T020000Z-s1-bbbbbb": ("verified, does not count", "non-conforming"),
        "20261122T030000Z-s0-cccccc": ("not verified", "not verified"),
    }
    assert "file-digests" in lb.reproductions[-1].reason or any(
        "file-digests" in r.reason for r in lb.reproductions)

    mnist = table(lb, "mnist-train-time")
    paired, unpaired = mnist.rows
    assert paired.claim is not None and paired.claim.team == AUTHOR and paired.reproduction.counts
    assert paired.reproduction.record.run_id == "20261122T010203Z-s0-aaaaaa"  # a counting run beats the newer tampered one
    assert paired.ratio == pytest.approx(1.0, abs=1e-3)  # its own exported curve, hours to 6 decimals
    assert unpaired.claim is None and unpaired.team == "mnist-other" and not unpaired.reproduction.counts
    latency = table(lb, "mnist-inference-latency")
    assert latency.rows[0].claim.kind == "inference" and latency.rows[0].reproduction.counts
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
    lb = build(results, trusted_keys(keys))
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
    page = (site / "tasks" / "squad-v1.1.html").read_text()
    assert "0:45:56" in page and "0:45:55" not in page


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


# -- the site you can publish -------------------------------------------------------------------

SITE_RUNS = {  # the extra verified runs of the site's board: pace of the epochs
    "20261122T040000Z-s2-eeeeee": 0.8,
    "20261122T050000Z-s3-ffffff": 1.3,  # this one only as an archived bundle
}
ARCHIVED = "20261122T050000Z-s3-ffffff"
HOSTILE_TEAM = "<script>alert('team')</script>"


@pytest.fixture(scope="module")
def site_board(board, tmp_path_factory):
    """The board's results plus two more verified runs of mnist-cnn-cpu at other paces (three
    verified runs: a median with a spread), one of them only as a signed bundle in archive/,
    and a claim whose team is markup."""
    results, keys = board
    root = tmp_path_factory.mktemp("site-board")
    copy = root / "results"
    shutil.copytree(results, copy)
    signer = CryptoSigner.generate_ed25519()
    all_keys = root / "keys"
    all_keys.mkdir()
    shutil.copyfile(keys, all_keys / "first.pub.json")
    (all_keys / "second.pub.json").write_text(json.dumps(public_key_dict(signer.public_key)))
    verified = results / "mnist-cnn-cpu" / "20261122T010203Z-s0-aaaaaa"
    claimed = json.loads((verified / "result.json").read_text())["entry"]["claimed"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(root / "home"))
        staged, host = stage_mnist_stand_in(root / "home"), capture_host()
        for run_id, pace in SITE_RUNS.items():
            folder = make_result_folder(copy / "mnist-cnn-cpu" / run_id, staged, host, seed=int(run_id[18]), pace=pace)
            _edit_result(folder, conforming=True, nonconforming_reasons=[], entry__claimed=claimed)
            make_bundle(folder, signer)
    (copy / "archive").mkdir()
    archived = pack(copy / "mnist-cnn-cpu" / ARCHIVED, copy / "archive" / f"mnist-cnn-cpu-{ARCHIVED}.tar.gz")
    shutil.rmtree(copy / "mnist-cnn-cpu" / ARCHIVED)
    (claim,) = [c for c in load_claims(copy) if c.name == "apple_resnet9_8v100_pytorch"]
    save_claim(copy, dataclasses.replace(claim, team=HOSTILE_TEAM))
    return copy, all_keys, archived


def _build_site(site_board, out: Path) -> Path:
    results, keys, _ = site_board
    assert main(["leaderboard", "--results", str(results), "--trusted-keys", str(keys), "--html", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def published(site_board, tmp_path_factory):
    """The site, built in one folder and copied to another (as a publisher would upload it);
    the build folder is removed so that nothing can still point into it."""
    root = tmp_path_factory.mktemp("site")
    built = _build_site(site_board, root / "built")
    target = root / "elsewhere" / "published"
    shutil.copytree(built, target)
    shutil.rmtree(built)
    return target


def _host_paths(site_board) -> list[str]:
    results, keys, _ = site_board
    paths_ = {str(results), str(results.parent), str(keys), str(paths.repo_root()), os.environ.get("HOME", "")}
    return sorted(p for p in paths_ if len(p) > 1)


def test_the_site_is_a_folder_of_pages_bundles_and_curves(site_board, published):
    results, _, archived = site_board
    for page in ("index.html", "style.css", "tasks/mnist.html", "tasks/cifar10.html", "tasks/squad-v1.1.html",
                 "reproductions/mnist-cnn-cpu.html", "reproductions/mnist-other.html",
                 "reproductions/mnist-cnn-cpu/curve.png", "reproductions/mnist-cnn-cpu/latency-torch.png"):
        assert (published / page).is_file(), page
    bundles = sorted(p.name for p in (published / "bundles").iterdir())
    assert bundles == sorted(f"{entry}-{run}.tar.gz" for entry, run in (
        ("mnist-cnn-cpu", "20261122T010203Z-s0-aaaaaa"), ("mnist-cnn-cpu", "20261122T030000Z-s0-cccccc"),
        ("mnist-cnn-cpu", "20261122T040000Z-s2-eeeeee"), ("mnist-cnn-cpu", ARCHIVED),
        ("mnist-other", "20261122T020000Z-s1-bbbbbb")))
    # The archived bundle is copied as it is; a result folder is packed as `runner bundle pack` packs it.
    assert (published / "bundles" / archived.name).read_bytes() == archived.read_bytes()
    packed = pack(results / "mnist-cnn-cpu" / "20261122T040000Z-s2-eeeeee", published.parent / "again.tar.gz")
    assert (published / "bundles" / "mnist-cnn-cpu-20261122T040000Z-s2-eeeeee.tar.gz").read_bytes() == packed.read_bytes()
    curve = published / "reproductions" / "mnist-cnn-cpu" / ARCHIVED / "curve.tsv"
    with open_bundle(archived, Limits()) as opened:
        assert curve.read_bytes() == (opened.root / "curve.tsv").read_bytes()


def test_no_file_of_the_site_names_a_path_of_the_host(site_board, published):
    """The results folder, HOME and the checkout appear nowhere: not in a page, a plot, a curve or a key."""
    needles = [p.encode() for p in _host_paths(site_board)]
    files = [p for p in published.rglob("*") if p.is_file()]
    assert len(files) > 20
    found = [(str(f.relative_to(published)), n.decode()) for f in files for n in needles if n in f.read_bytes()]
    assert found == []


def test_the_reproduction_page_has_the_runs_median_spread_and_verify_commands(published):
    page = (published / "reproductions" / "mnist-cnn-cpu.html").read_text()
    assert "median of 3 runs" in page and "CoV" in page  # three verified runs, one of them archived
    assert page.count('<article class="run"') == 4  # and the tampered copy, shown with why it does not count
    assert "not verified: file-digests" in page
    for run in ("20261122T010203Z-s0-aaaaaa", "20261122T040000Z-s2-eeeeee", ARCHIVED):
        command = f"runner verify bundles/mnist-cnn-cpu-{run}.tar.gz --trusted-keys keys/"
        assert command in page, command
    keys = sorted(p.name for p in (published / "keys").iterdir())
    assert len(keys) == 2 and all(k.endswith(".pub.json") for k in keys)


def test_the_task_page_puts_reproduced_rows_first_and_escapes_what_it_shows(published):
    page = (published / "tasks" / "cifar10.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(" in page  # autoescaped, never markup
    assert '<details class="not-reproduced">' in page and "No reproduction yet." in page
    mnist = (published / "tasks" / "mnist.html").read_text()
    reproduced, folded = mnist.index('data-table="mnist-train-time"'), mnist.find('data-table="mnist-train-time-not')
    assert reproduced > 0 and folded == -1  # every MNIST row is reproduced


def test_the_curve_fits_the_runs_that_count_and_shows_every_run(site_board):
    from runner.leaderboard import plots  # lazy: heavy (matplotlib, only this test)
    from runner.plotting import pyplot  # lazy: heavy (matplotlib, only this test)

    results, keys, _ = site_board
    lb = build(results, trusted_keys(keys))
    runs = [r for r in lb.reproductions if r.record.entry == "mnist-cnn-cpu"]
    curves = [plots.RunCurve(r.record.run_id[17:], r.curve, r.counts) for r in runs]
    fig = plots.curve_figure(format_task("mnist"), curves)
    try:
        (ax,) = fig.axes
        (low, high), (left, right) = ax.get_ylim(), ax.get_xlim()
        counted = [p for r in runs if r.counts for p in r.curve]
        assert 0 < low <= min(p.scores["top1Accuracy"] for p in counted) and high >= 99.3  # zoomed, not from zero
        assert left == 0 and right >= max(p.hours for p in counted) * 3600  # seconds
        labels = ax.get_legend_handles_labels()[1]
        assert ax.get_title() == "Time to accuracy"
        assert len([label for label in labels if label.startswith("s")]) == len(runs) == 4
    finally:
        pyplot().close(fig)


# -- the site in a real browser ------------------------------------------------------------------

PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) img.setAttribute("data-natural-width", img.naturalWidth);
  document.body.setAttribute("data-loaded", "1");
  console.log("probe: loaded");
});
</script>"""


class _Page(HTMLParser):
    """What a test checks of a rendered DOM: tables and their body rows, plots and their
    natural widths, every link and source, the ids, the verify commands."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, int] = {}
        self.widths: dict[str, int] = {}
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.loaded = False
        self.verify: list[str] = []
        self._table: str | None = None
        self._in_body = self._in_verify = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for name in ("href", "src"):
            if a.get(name) is not None:
                self.links.append(a[name])
        if tag == "table" and "data-table" in a:
            self._table = a["data-table"]
            self.rows[self._table] = 0
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._table and self._in_body:
            self.rows[self._table] += 1
        elif tag == "img" and "plot" in (a.get("class") or ""):
            self.widths[a["src"]] = int(a.get("data-natural-width", "0"))
        elif tag == "pre" and "verify" in (a.get("class") or ""):
            self._in_verify = True
            self.verify.append("")
        elif tag == "body":
            self.loaded = a.get("data-loaded") == "1"

    def handle_endtag(self, tag):
        if tag == "table":
            self._table, self._in_body = None, False
        elif tag == "pre":
            self._in_verify = False

    def handle_data(self, data):
        if self._in_verify:
            self.verify[-1] += data


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium; installed here when missing and this is root (CI starts with nothing)."""
    if not Path(CHROMIUM).exists() and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=False, env=env, capture_output=True)
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no headless browser: {CHROMIUM} is absent (apt-get install chromium); the site's pages "
                    "are not opened")
    return CHROMIUM


def _chromium(binary: str, profile: Path, *args: str, size: str = "1280,2400") -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
         f"--window-size={size}", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )


def _open(chromium: str, page: Path, profile: Path) -> _Page:
    """The page's DOM after load, through a copy beside it with a probe script (the same folder,
    so the same relative links); no console message but the probe's."""
    probe = page.with_name(f"probe-{page.name}")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    try:
        dumped = _chromium(chromium, profile, "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    console = [line for line in dumped.stderr.splitlines() if ":CONSOLE" in line]
    assert len(console) == 1 and '"probe: loaded"' in console[0], console
    parsed = _Page()
    parsed.feed(dumped.stdout)
    assert parsed.loaded
    return parsed


def _links_resolve(site: Path, page: Path, parsed: _Page) -> int:
    """Every href and src is relative and names a file inside the site (and an anchor that exists)."""
    checked = 0
    for link in parsed.links:
        split = urlsplit(link)
        assert not split.scheme and not split.netloc and not split.path.startswith("/"), link
        target = (page.parent / unquote(split.path)).resolve() if split.path else page.resolve()
        assert target.is_relative_to(site.resolve()) and target.is_file(), (page.name, link)
        if split.fragment:
            ids = parsed.ids if target == page.resolve() else _ids_of(target)
            assert split.fragment in ids, (page.name, link)
        checked += 1
    return checked


def _ids_of(path: Path) -> set[str]:
    parsed = _Page()
    parsed.feed(path.read_text())
    return parsed.ids


def _screenshot(chromium: str, page: Path, shot: Path, profile: Path, height: int) -> Path:
    taken = _chromium(chromium, profile, f"--screenshot={shot}", page.as_uri(), size=f"1280,{height}")
    assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr[-2000:]
    keep = os.environ.get("RUNNER_SITE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(keep) / shot.name)
    print(f"screenshot: {shot}" + (f" (kept in {keep})" if keep else ""))
    return shot


def test_the_published_site_opens_in_headless_chromium(published, chromium, tmp_path):
    """Index, a task page and a reproduction page, opened from the copied folder: their tables,
    plots and verify commands render, every link resolves inside the folder, and each page is
    photographed (RUNNER_SITE_SCREENSHOTS=DIR keeps the screenshots)."""
    index = _open(chromium, published / "index.html", tmp_path / "p1")
    assert index.rows["tasks"] == 5 and index.rows["reproductions"] == 2
    assert _links_resolve(published, published / "index.html", index) >= 8

    task = _open(chromium, published / "tasks" / "mnist.html", tmp_path / "p2")
    assert task.rows["mnist-train-time"] == 2 and task.rows["mnist-inference-latency"] == 2
    cifar = _open(chromium, published / "tasks" / "cifar10.html", tmp_path / "p3")
    assert cifar.rows["cifar10-train-time-not-reproduced"] == 6 and "cifar10-train-time" not in cifar.rows
    assert _links_resolve(published, published / "tasks" / "mnist.html", task) >= 8

    page = published / "reproductions" / "mnist-cnn-cpu.html"
    repro = _open(chromium, page, tmp_path / "p4")
    assert repro.rows["runs"] == 4 and repro.rows["summary"] == 4
    assert set(repro.widths) == {"mnist-cnn-cpu/curve.png", "mnist-cnn-cpu/latency-torch.png"}
    assert all(w > 0 for w in repro.widths.values()), repro.widths  # the plots load from the copied folder
    assert len(repro.verify) == 4 and all(v.startswith("runner verify bundles/mnist-cnn-cpu-") for v in repro.verify)
    links = _links_resolve(published, page, repro)
    assert links >= 15 and sum(link.endswith(".tar.gz") for link in repro.links) >= 8  # table and article
    assert sum(link.endswith("curve.tsv") for link in repro.links) >= 8

    shots = tmp_path / "screenshots"
    shots.mkdir()
    _screenshot(chromium, published / "index.html", shots / "site-index.png", tmp_path / "s1", 900)
    _screenshot(chromium, published / "tasks" / "mnist.html", shots / "site-task.png", tmp_path / "s2", 1400)
    _screenshot(chromium, page, shots / "site-reproduction.png", tmp_path / "s3", 2200)


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


def test_an_unreadable_result_is_skipped_with_the_reason(board, tmp_path, capsys, monkeypatch):
    results, keys = board
    monkeypatch.setenv("COLUMNS", "400")  # the path whole on one line, whatever the temporary folder's length
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    broken = copy / "mnist-broken" / "20261122T040000Z-s0-dddddd"
    broken.mkdir(parents=True)
    (broken / "result.json").write_text('{"run_id": ')
    assert main(["leaderboard", "--results", str(copy), "--trusted-keys", str(keys), "--task", "mnist"]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert f"skipped: {broken / 'result.json'}: is not JSON" in out  # the file and why (runner.safe_read)
    assert "MNIST Training Time" in out
