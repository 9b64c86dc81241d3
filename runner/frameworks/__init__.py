"""The deep-learning frameworks an entry may train with: PyTorch, TensorFlow 2 / Keras, MXNet.

Each framework is one package here, ``runner/frameworks/<name>/``, named as the manifest's
``framework.name``, whose ``__init__`` declares its ``FRAMEWORK`` (``runner.frameworks.base.
Framework``). The registry finds the packages; every per-framework table elsewhere (the
manifest schema's ``framework.name``, the wheels the SBOM names, the image's software probe,
``runner fingerprint``'s rows, MLPerf's system description, the evaluator's GPU device, the
roofline study's FLOP counter, the cross-seed weight layout) is derived from ``FRAMEWORKS``.

What runs inside the entry's image cannot import this package (the harness is mounted
alone): a framework's loader is ``runner/harness/frameworks/<name>.py`` and its native
backends are the backend table's rows naming it. Discovery refuses a framework without a
loader, so the manifest can name only frameworks the harness can read, and a backend row
naming a framework not declared here.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Iterable

from runner.errors import UserError
from runner.frameworks.base import LOADERS_PACKAGE, Framework
from runner.harness.backends import REGISTRY as BACKENDS

__all__ = ["FRAMEWORKS", "Framework", "LOADERS_PACKAGE", "discover", "get_framework"]


def discover(path: Iterable[str], prefix: str) -> dict[str, Framework]:
    """Every framework package under ``path`` (each must declare ``FRAMEWORK`` and have a
    loader), by name, in their ``listed`` order."""
    found: dict[str, Framework] = {}
    for info in pkgutil.iter_modules(list(path), prefix):
        if not info.ispkg:
            continue  # base: the registry's own module
        framework = getattr(importlib.import_module(info.name), "FRAMEWORK", None)
        if not isinstance(framework, Framework):
            raise ImportError(f"framework package {info.name} declares no FRAMEWORK (a runner.frameworks.base.Framework)")
        folder = info.name.rpartition(".")[2]
        if framework.name != folder:
            raise ImportError(f"framework package {info.name} declares {framework.name!r}: name its folder as the framework")
        if importlib.util.find_spec(framework.loader) is None:
            raise ImportError(f"framework {framework.name!r} has no loader: add {framework.loader.replace('.', '/')}.py, "
                              "which reads its saved model inside the entry's image")
        found[framework.name] = framework
    if unknown := sorted({spec.framework for spec in BACKENDS.values() if spec.framework} - set(found)):
        raise ImportError(f"the backend table names frameworks not declared under runner/frameworks: {', '.join(unknown)}")
    return dict(sorted(found.items(), key=lambda item: (item[1].listed, item[0])))


FRAMEWORKS: dict[str, Framework] = discover(__path__, f"{__name__}.")


def get_framework(name: str) -> Framework:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError(f"unknown framework '{name}'", f"use one of: {', '.join(FRAMEWORKS)}") from None
