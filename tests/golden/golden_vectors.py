"""Golden byte vectors: the catalogue's shape and the files they are stored in.

A vector is a known value, the bytes that encode it (one datagram or frame, or
several: the packets of a fragmented message) and the functions that go from one to
the other. The values and functions are in ``golden_cases.py``; the bytes are stored
in ``tests/golden/<layer>.txt``, one file per layer, written once by
``tests/golden/regenerate.py`` and then compared by ``test_golden.py``: encoding the
value must give the stored bytes, decoding the stored bytes must give the value.

File format (made to be read by people; docs/interfaces.md points here)::

    # comment to the end of the line
    [name]                      a vector starts
    # what it holds
    4d43 01                     hex digits, spaces ignored
    ...                         more hex lines
    --                          the next datagram of the same vector

Each hex line is one field of the datagram, with the field's name in a comment, so a
file reads as the wire format it documents.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

Fields = list[tuple[str, bytes]]


@dataclass(frozen=True)
class Vector:
    """One golden vector.

    ``encode(value)`` gives the datagrams; ``decode(datagrams)`` gives the value back
    (``None``: a one-way vector, such as a hash). ``fields(datagram)`` splits one
    datagram into named fields for the file; the default is one field.
    """

    layer: str
    name: str
    note: str
    value: Any
    encode: Callable[[Any], list[bytes]]
    decode: Callable[[list[bytes]], Any] | None
    fields: Callable[[bytes], Fields] = field(default=lambda d: [("bytes", d)])
    explain: Callable[[bytes], str | None] = field(default=lambda d: None)


def hex_lines(data: bytes, width: int = 16) -> list[str]:
    """``data`` as hex, ``width`` bytes per line, grouped in fours."""
    if not data:
        return [""]
    out = []
    for at in range(0, len(data), width):
        chunk = data[at:at + width].hex()
        out.append(" ".join(chunk[i:i + 8] for i in range(0, len(chunk), 8)))
    return out


def format_file(layer: str, header: str, vectors: Iterable[Vector]) -> str:
    lines = [f"# Golden vectors: {header}", "#",
             "# Written by tests/golden/regenerate.py (by hand); checked by",
             "# tests/golden/test_golden.py. Hex, spaces ignored; '#' starts a comment;",
             "# '--' separates the datagrams of one vector. docs/interfaces.md explains",
             "# every field.", ""]
    for vector in vectors:
        assert vector.layer == layer
        lines.append(f"[{vector.name}]")
        lines.extend(f"# {note_line}" for note_line in wrap(vector.note, 86))
        for i, datagram in enumerate(vector.encode(vector.value)):
            if i:
                lines.append("--")
            for name, part in vector.fields(datagram):
                if not part:
                    lines.append(f"{'':38}# {name}: empty")
                    continue
                for j, text in enumerate(hex_lines(part)):
                    lines.append(f"{text:<38}# {name}" if j == 0 else text)
            note = vector.explain(datagram)
            if note:
                lines.extend(f"#   {chunk}" for chunk in wrap(f"= {note}", 84))
        lines.append("")
    return "\n".join(lines)


def wrap(text: str, width: int) -> list[str]:
    """Cut ``text`` into lines of at most ``width`` characters, at spaces if possible."""
    out = []
    while len(text) > width:
        cut = text.rfind(" ", 0, width)
        cut = width if cut <= 0 else cut
        out.append(text[:cut])
        text = text[cut:].lstrip(" ")
    out.append(text)
    return out


def show(obj: Any) -> str:
    """A decoded msgpack value, written the way docs/group.md and docs/infra.md do:
    arrays ``[...]``, maps ``{k: v}``, strings ``"..."``, binary ``b"..."`` (or
    ``h'hex'`` when not printable), ``nil``, ``true``/``false``."""
    if obj is None:
        return "nil"
    if obj is True or obj is False:
        return "true" if obj else "false"
    if isinstance(obj, str):
        return '"' + obj.replace('"', '\\"') + '"'
    if isinstance(obj, bytes):
        if all(32 <= b < 127 for b in obj):
            return 'b"' + obj.decode() + '"'
        return f"h'{obj.hex()}'"
    if isinstance(obj, list | tuple):
        return "[" + ", ".join(show(x) for x in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in obj.items()) + "}"
    return repr(obj)


_NAME = re.compile(r"\[([A-Za-z0-9_.:+-]+)\]")


def parse_file(text: str) -> dict[str, list[bytes]]:
    """name -> datagrams, from a golden file. Raises ValueError on a malformed file."""
    out: dict[str, list[bytes]] = {}
    current: list[bytearray] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _NAME.fullmatch(line)
        if m:
            if m[1] in out:
                raise ValueError(f"line {number}: vector {m[1]} twice")
            current = [bytearray()]
            out[m[1]] = current  # type: ignore[assignment]
            continue
        if current is None:
            raise ValueError(f"line {number}: bytes before the first [name]")
        if line == "--":
            current.append(bytearray())
            continue
        digits = line.replace(" ", "")
        if not re.fullmatch(r"(?:[0-9a-fA-F]{2})+", digits):
            raise ValueError(f"line {number}: not hex: {raw!r}")
        current[-1] += bytes.fromhex(digits)
    return {name: [bytes(d) for d in datagrams] for name, datagrams in out.items()}


def load(layer: str) -> dict[str, list[bytes]]:
    path = HERE / f"{layer}.txt"
    return parse_file(path.read_text()) if path.exists() else {}
