"""Reading a YAML file an entry wrote: bounded in size, no aliases, finite numbers.

An alias bomb (a few lines of ``&a [*b, *b, ...]``) expands to gigabytes in memory, so
anchors and aliases are refused outright: a manifest never needs them. Numbers that are
not finite (``.nan``, ``.inf``) or absurdly large slip past JSON Schema's comparisons
(``nan > 0`` is false, so no ``minimum`` catches it) and are refused with the field named.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from runner.errors import UserError

MAX_MANIFEST_BYTES = 256 * 1024
MAX_NUMBER = 1e12  # beyond any timeout, threshold, count or claim a manifest holds


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases instead of expanding them."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, "YAML anchors and aliases are not allowed in a manifest", mark
            )
        return super().compose_node(parent, index)


def _field(path: list) -> str:
    return ".".join(map(str, path)) or "(top level)"


def check_numbers(data: object, source: str, path: list | None = None) -> None:
    """Refuse NaN, infinities and numbers beyond ``MAX_NUMBER``, naming the field."""
    path = path or []
    if isinstance(data, dict):
        for key, value in data.items():
            check_numbers(value, source, [*path, key])
    elif isinstance(data, list):
        for i, value in enumerate(data):
            check_numbers(value, source, [*path, i])
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        if isinstance(data, float) and not math.isfinite(data):
            raise UserError(f"{source}: field '{_field(path)}' is {data}, not a finite number",
                            f"give {_field(path)} an ordinary number")
        if abs(data) > MAX_NUMBER:
            raise UserError(f"{source}: field '{_field(path)}' is {data:.3g}, larger than {MAX_NUMBER:g}",
                            f"give {_field(path)} a realistic value")


def load_untrusted_yaml(path: Path, what: str = "entry.yaml") -> object:
    """The parsed file; UserError for a symlink, an oversized file, bad YAML, aliases or
    non-finite numbers. A symlink is refused before reading, so its target never shows."""
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link", f"make {what} a plain file inside the entry folder")
    if not path.is_file():
        raise UserError(f"{path} is not a regular file", f"make {what} a plain file")
    size = path.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise UserError(f"{path} is {size} bytes, over the {MAX_MANIFEST_BYTES // 1024} KiB limit for {what}",
                        f"keep {what} to the manifest's fields")
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text", f"save {what} as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or ""
        why = f": {problem}" if "alias" in problem else ""
        raise UserError(f"{path} is not valid YAML{at}{why}", "fix the YAML syntax") from None
    except RecursionError:
        raise UserError(f"{path} is nested too deeply", f"keep {what} to the manifest's fields") from None
    check_numbers(data, str(path))
    return data
