"""Where each task's data comes from, as the data commands look it up: derived from the
tasks' declarations (``Task.source``, a ``runner.tasks.base.DataSource``: its module, whether
it is prepared from a package registry or imported from the user's files, and the extra files
an import takes). The interface each source module keeps is ``DataSource``'s docstring.
"""

from __future__ import annotations

from runner.tasks import TASKS, DataSource

SOURCES: dict[str, DataSource] = {t.id: t.source for t in TASKS.values() if t.source is not None}


def data_packages(task: str) -> tuple[str, ...]:
    """The PyPI packages the runner takes ``task``'s data from (none for most tasks)."""
    source = SOURCES.get(task)
    return tuple(getattr(source.load(), "DATA_PACKAGES", ())) if source else ()


PREPARABLE = tuple(t for t, s in SOURCES.items() if not s.imported)
IMPORTABLE = tuple(t for t, s in SOURCES.items() if s.imported)
