"""A stand-in for a published package that holds trained networks: ``netzoo==0.1.0``.

An author who wants a network in the image without it counting in the entry's files can
publish it as a package and pin it in the lock (threat-model class 4, issue 44 items 5 and 6).
This builds such a wheel, byte for byte the same on every machine: the three networks
cheat-seed-networks carries (12,722 parameters each, trained on the host from three random
initialisations: tests/entries/shipped-networks/make.py ``train``), in fp16 with every nibble
one word (codec.py's ``words``: prose to the blob scan), one module of plain Python a network,
with codec.py as ``netzoo.codec`` and ``netzoo.network(index)`` decoding one. Their source is
``shipped-networks/seed_networks.py`` (the fp16 bytes, base64). The zip is stored (no
compression: no zlib version changes its bytes), its members sorted, dated 1980-01-01, mode 0644.

    python tests/netzoo_wheel.py WHEELHOUSE   # store it as WHEELHOUSE/sha256/<digest>/<file>

``tests/entries/cheat-wheel-networks`` pins it (``SHA256`` below); the tests build it into
their wheelhouse the same way.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import sys
import zipfile
from pathlib import Path

NAME, VERSION = "netzoo", "0.1.0"
FILENAME = f"{NAME}-{VERSION}-py3-none-any.whl"
SHA256 = "19d2f585db900126092d2504bbbf9e6400061dd8d1e2dbd62961fb8715f79bba"  # what build() writes (tests check)
SHIPPED = Path(__file__).resolve().parent / "entries" / "shipped-networks"
NETWORKS = 3
DATE = (1980, 1, 1, 0, 0, 0)


def _shipped(name: str):
    spec = importlib.util.spec_from_file_location(f"netzoo_source_{name}", SHIPPED / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _network(index: int) -> str:
    """Network ``index`` as a module codec.decode reads: its fp16 bytes as words."""
    source, codec = _shipped("seed_networks"), _shipped("codec")
    import numpy as np

    blob = np.frombuffer(base64.b64decode(source.NETWORKS[index]), np.uint8)
    rows = "".join(f"    {[name, shape, None, None]!r},\n" for name, shape in source.LAYOUT)
    return (f'"""Network {index}: {len(blob) // 2} fp16 weights, one word a nibble.\n\n{codec.to_words(blob)}\n"""\n'
            f"KIND = 'words'\nLAYOUT = [\n{rows}]\n")


def members() -> dict[str, bytes]:
    """The wheel's files but its RECORD, by name."""
    dist = f"{NAME}-{VERSION}.dist-info"
    files = {f"{NAME}/net_{i}.py": _network(i).encode() for i in range(NETWORKS)}
    files[f"{NAME}/codec.py"] = (SHIPPED / "codec.py").read_bytes()
    files[f"{NAME}/__init__.py"] = (
        '"""Three small MNIST networks, fp16."""\n\nfrom importlib import import_module\n\n'
        f"from {NAME}.codec import decode\n\n\n"
        "def network(index):\n"
        f'    return decode(import_module(f"{NAME}.net_{{index}}"))\n'
    ).encode()
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests/netzoo_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist}/top_level.txt"] = f"{NAME}\n".encode()
    return files


def record_of(files: dict[str, bytes], dist_info: str = f"{NAME}-{VERSION}.dist-info") -> bytes:
    """A wheel's RECORD of its ``files``: each with its sha256 and size, then itself."""
    rows = []
    for name, data in sorted(files.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        rows.append(f"{name},sha256={digest},{len(data)}\n")
    rows.append(f"{dist_info}/RECORD,,\n")
    return "".join(rows).encode()


def build(folder: Path) -> Path:
    """Write the wheel into ``folder``; the same bytes every time."""
    files = members()
    files[f"{NAME}-{VERSION}.dist-info/RECORD"] = record_of(files)
    path = Path(folder) / FILENAME
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            z.writestr(info, files[name])
    return path


def into_wheelhouse(wheelhouse: Path) -> Path:
    """Build it at its content address in a runner wheelhouse (``<root>/sha256/<digest>/``)."""
    staging = Path(wheelhouse) / "sha256" / "netzoo-staging"
    staging.mkdir(parents=True, exist_ok=True)
    built = build(staging)
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    folder = Path(wheelhouse) / "sha256" / digest
    folder.mkdir(exist_ok=True)
    built.replace(folder / FILENAME)
    staging.rmdir()
    return folder / FILENAME


if __name__ == "__main__":
    print(into_wheelhouse(Path(sys.argv[1])))
