"""Answers kept per image id: a damaged or unwritable cache means computing again, never a crash."""

import pytest

from runner import image_cache

IMAGE = "sha256:" + "ab" * 32


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path))
    return tmp_path


def test_an_answer_is_kept_per_image_id_and_variant(home):
    image_cache.store("image-audits", IMAGE, {"a": 1}, suffix="-none")
    image_cache.store("image-audits", IMAGE, {"a": 2}, prefix="base-")
    assert image_cache.load("image-audits", IMAGE, suffix="-none") == {"a": 1}
    assert image_cache.load("image-audits", IMAGE, prefix="base-") == {"a": 2}
    assert image_cache.load("image-audits", IMAGE) is None
    assert (home / "image-audits" / f"base-{'ab' * 32}.json").is_file()


@pytest.mark.parametrize("content", ["{truncated", "[1, 2]", "\xff\xfe"])
def test_a_damaged_answer_reads_as_none(home, content):
    path = home / "image-software" / f"{'ab' * 32}.json"
    path.parent.mkdir()
    path.write_text(content, encoding="latin-1")
    assert image_cache.load("image-software", IMAGE) is None


def test_an_unwritable_home_is_not_an_error(tmp_path, monkeypatch):
    # A file where the home should be: every write fails, as on a read-only or full disk.
    (tmp_path / "home").write_text("not a folder")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    image_cache.store("image-software", IMAGE, {"python": "3.11"})
    assert image_cache.load("image-software", IMAGE) is None
