"""A stand-in for a published package that holds trained networks: ``netzoo==0.1.0``.

An author who wants a network in the image without it counting in the entry's files can
publish it as a package and pin it in the lock (threat-model class 4, issue 44 item 5). This
builds such a wheel, byte for byte the same on every machine: three networks of 20,000
weights at 3 bits, each weight one of eight letters (seeded draws: the information of a
trained network at 3 bits, 8.2 KB a network once compressed, 25.3 KB for the wheel), in
three modules of plain Python, and a decoder. The zip is stored (no compression: no zlib
version changes its bytes), its members sorted, dated 1980-01-01, mode 0644.

    python tests/netzoo_wheel.py WHEELHOUSE   # store it as WHEELHOUSE/sha256/<digest>/<file>

``tests/entries/cheat-wheel-networks`` pins it (``SHA256`` below); the tests build it into
their wheelhouse the same way.
"""

from __future__ import annotations

import base64
import hashlib
import random
import sys
import zipfile
from pathlib import Path

NAME, VERSION = "netzoo", "0.1.0"
FILENAME = f"{NAME}-{VERSION}-py3-none-any.whl"
SHA256 = "7653ffac9740d8217c4bcc4ae78bcf60f235feec8685690bfb69e8d0d65f5e97"  # what build() writes (tests check)
NETWORKS, WEIGHTS = 3, 20_000
LETTERS = "abcdefgh"  # 3 bits a weight
DATE = (1980, 1, 1, 0, 0, 0)


def _network(index: int) -> str:
    rng = random.Random(f"netzoo-{index}")
    letters = "".join(LETTERS[rng.getrandbits(3)] for _ in range(WEIGHTS))
    lines = "\n".join(letters[i:i + 88] for i in range(0, len(letters), 88))
    scale = 0.05 + index / 100
    return (f'"""Network {index}: {WEIGHTS} weights at 3 bits, one letter a weight."""\n\n'
            f"SCALE = {scale}\nWEIGHTS = (\n" + "".join(f'    "{line}"\n' for line in lines.splitlines()) + ")\n")


def members() -> dict[str, bytes]:
    """The wheel's files but its RECORD, by name."""
    dist = f"{NAME}-{VERSION}.dist-info"
    files = {f"{NAME}/net_{i}.py": _network(i).encode() for i in range(NETWORKS)}
    files[f"{NAME}/__init__.py"] = (
        '"""Three small networks, 3 bits a weight."""\n\nfrom importlib import import_module\n\n\n'
        "def weights(index):\n"
        f'    module = import_module(f"{NAME}.net_{{index}}")\n'
        f'    return [("{LETTERS}".index(c) - 3.5) * module.SCALE for c in "".join(module.WEIGHTS)]\n'
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
