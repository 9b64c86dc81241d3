"""Hostile Dockerfiles: everything that would make the engine fetch is refused before the
build starts, naming the line; no image is built, no build context is left behind."""

from __future__ import annotations

from pathlib import Path

import docker.errors
import pytest
from hostile_helpers import PROBE, assert_one_line_error, probe_entry, run_cli

from runner import paths
from runner.entry_build import context as build_context
from runner.entry_build.dockerfile_policy import check_dockerfile
from runner.entry_build.entry_image import image_tag
from runner.errors import UserError

pytestmark = pytest.mark.docker

HEAD = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE} AS deps\nRUN true\n"  # lines 1-3


def with_dockerfile(tmp_path: Path, text: str) -> Path:
    entry = probe_entry(tmp_path, "sandbox")
    (entry / "Dockerfile").write_text(text)
    return entry


def contexts() -> set[str]:
    root = paths.home() / "build-contexts"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


REFUSED = [
    ("FROM alpine:3.19\n", 1, "FROM alpine:3.19"),
    ("ARG BASE_IMAGE\nFROM scratch\n", 2, "FROM scratch"),
    ("ARG BASE_IMAGE\nFROM ${OTHER_IMAGE}\n", 2, "${OTHER_IMAGE}"),
    ("ARG BASE_IMAGE\nfrom docker.io/library/busybox@sha256:" + "a" * 64 + "\n", 2, "busybox"),
    ("ARG BASE_IMAGE\nFROM --platform=linux/arm64 ${BASE_IMAGE}\n", 2, "--platform"),
    (HEAD + "ADD https://example.com/big.tar.gz /opt/\n", 4, "https://example.com/big.tar.gz"),
    (HEAD + "ADD http://10.0.0.1/x /x\n", 4, "http://10.0.0.1/x"),
    (HEAD + "ADD [\"https://example.com/a b\", \"/x\"]\n", 4, "https://example.com/a"),
    (HEAD + "ADD git@github.com:someone/repo.git /src\n", 4, "git@github.com"),
    (HEAD + "ADD --checksum=sha256:" + "0" * 64 + " big.bin /x\n", 4, "ADD"),
    (HEAD + "ADD \\\n    --chown=1000 \\\n    https://example.com/x \\\n    /x\n", 4, "https://example.com/x"),
    (HEAD + "COPY --from=busybox:latest /bin/sh /sh\n", 4, "--from=busybox:latest"),
    (HEAD + "COPY --from=builder /x /x\n", 4, "--from=builder"),
    (HEAD + "COPY --from=5 /x /x\n", 4, "--from=5"),
    (HEAD + "RUN --mount=type=bind,from=alpine,target=/m true\n", 4, "from=alpine"),
    (HEAD + "RUN --network=host pip download x\n", 4, "--network=host"),
    (HEAD + "ONBUILD RUN curl https://example.com\n", 4, "ONBUILD"),
    ("# syntax=docker/dockerfile:1.7\n" + HEAD, 1, "syntax"),
    ("RUN true\nARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n", 1, "before the first FROM"),
]


@pytest.mark.parametrize("text, line, needle", REFUSED, ids=[f"line{r[1]}-{i}" for i, r in enumerate(REFUSED)])
def test_fetching_dockerfiles_are_refused_before_the_build(engine, docker_client, tmp_path, capsys, text, line,
                                                           needle):
    entry = with_dockerfile(tmp_path, text)
    before = contexts()
    message = assert_one_line_error(*run_cli(capsys, "build", str(entry)), f"Dockerfile line {line}:", needle)
    assert "Dockerfile policy" in message
    assert contexts() == before  # nothing was sent to the engine
    key = build_context.content_key(entry, _base_id(engine), entry / "requirements.lock")
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(image_tag(entry.name, key))


def _base_id(engine) -> str:
    from runner.images import find_base

    found = find_base("python3.11-bookworm", engine)
    return found.id if found else "none"


@pytest.mark.parametrize("text", [
    (PROBE / "Dockerfile").read_text(),
    HEAD + "FROM ${BASE_IMAGE}\nCOPY --from=deps /opt /opt\nCOPY --from=0 /etc/hostname /h\n",
    "ARG BASE_IMAGE\nFROM $BASE_IMAGE\nADD entry/ /entry/\nRUN --mount=type=cache,target=/c true\n",
])
def test_hermetic_dockerfiles_pass_the_policy(tmp_path, text):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    check_dockerfile(path)


def test_policy_names_the_first_line_of_a_continued_instruction(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text(HEAD + "# a comment\n\nRUN echo a \\\n  # inside\n  && echo b\nADD \\\n https://x.org/a /a\n")
    with pytest.raises(UserError, match="line 9: ADD https://x.org/a"):
        check_dockerfile(path)


# --- build failures are explained by the step that failed ---------------------------------

def test_failing_run_curl_is_not_blamed_on_the_lock(docker_client, tmp_path, capsys):
    # The probe's own Dockerfile (a pip --require-hashes step first), then a download.
    text = (PROBE / "Dockerfile").read_text() + "RUN curl -sSf https://example.com/x -o /tmp/x\n"
    entry = with_dockerfile(tmp_path, text)
    line = assert_one_line_error(*run_cli(capsys, "build", str(entry)), "curl")
    assert "regenerate the lock" not in line and "pip refused" not in line


def test_build_verbose_prints_the_build_log_on_failure(docker_client, tmp_path, capsys):
    text = (PROBE / "Dockerfile").read_text() + "RUN echo hostile-marker-7 && false\n"
    code, out, err = run_cli(capsys, "build", "-v", str(with_dockerfile(tmp_path, text)))
    assert_one_line_error(code, out, err, "returned a non-zero code")
    assert "hostile-marker-7" in out and "Step " in out
