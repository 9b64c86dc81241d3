"""A package's names loaded on first use (PEP 562), for packages whose ``__init__`` would
otherwise import every module they re-export: a reader of one small module of the package
(``runner ls`` reaching ``runner.verify.verdict``) then pays only for what it uses."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def exports(package: str, where: Mapping[str, str | tuple[str, str]]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: each name of ``where`` read from its module (or,
    for a ``(module, attribute)`` pair, that attribute) when first asked for, then kept."""
    def __getattr__(name: str) -> object:
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = found if isinstance(found, tuple) else (found, name)
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
