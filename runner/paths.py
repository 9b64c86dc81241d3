"""Where the runner keeps things on the host.

Everything lives under one home (``RUNNER_HOME``, default ``~/.cache/runner``) so that
a user can see, move or wipe it at once. Results go to the repository's ``results/``
(or ``RUNNER_RESULTS``), because they are what a user publishes.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("RUNNER_HOME", Path.home() / ".cache" / "runner")).expanduser()


def data_dir() -> Path:
    """Staged data sets: ``<task>/train``, ``<task>/eval`` (inputs) and ``<task>/labels``."""
    return home() / "data"


def wheelhouse_dir() -> Path:
    """Content-addressed wheels, shared by every entry: ``sha256/<digest>/<file>``."""
    return home() / "wheelhouse"


def config_path() -> Path:
    """The user's settings (``runner config``), e.g. the MLPerf submitter fields."""
    return home() / "config.yaml"


def harness_site_dir() -> Path:
    """Packages the harness imports that entry images lack (LoadGen), unpacked from wheels."""
    return home() / "harness-site"


def keys_dir() -> Path:
    return home() / "keys"


def trusted_keys_dir() -> Path:
    """The trust store (runner.keys.trust): ``<keyid>.pub.json`` of each key you trust."""
    return home() / "trusted-keys"


# The signing key (runner.keys): its file under keys_dir(), and the variable naming another.
SIGNING_KEY_NAME = "signing.key"
SIGNING_KEY_ENV = "RUNNER_SIGNING_KEY"


def repo_root() -> Path:
    """The checkout this package runs from (entries/, images/, hardware_profiles/ live there)."""
    return Path(__file__).resolve().parent.parent


def results_dir() -> Path:
    return Path(os.environ.get("RUNNER_RESULTS", repo_root() / "results"))


def images_dir() -> Path:
    return repo_root() / "images"


def profiles_dir() -> Path:
    return repo_root() / "hardware_profiles"


def launcher_dir() -> Path:
    """The runner's launcher script, mounted read-only into training containers."""
    return Path(__file__).resolve().parent / "run" / "launcher"


def harness_dir() -> Path:
    """The container-side inference harness, mounted read-only into inference containers."""
    return Path(__file__).resolve().parent / "harness"
