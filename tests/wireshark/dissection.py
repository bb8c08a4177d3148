"""Run tshark with the m2mc dissector over a capture and read what it decoded (PDML).

``dissect(pcap)`` returns one :class:`Packet` per frame: its protocols and every field
as a tree (name, ``show`` value, children), plus ``problems``: malformed-packet marks,
Lua errors, and error or warning expert infos of the m2mc protocols.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from m2mc.wireshark import dissector_path

TSHARK = shutil.which("tshark")
DUMPCAP = shutil.which("dumpcap")
needs_tshark = pytest.mark.skipif(
    TSHARK is None, reason="tshark is not installed (apt-get install tshark): the dissector "
                           "tests run it over captures")

needs_dumpcap = pytest.mark.skipif(
    DUMPCAP is None, reason="dumpcap is not installed (it comes with tshark: apt-get install "
                            "tshark): the capture tests record a real run with it")

OURS = ("m2mp", "m2mc", "m2mc_auth", "m2mc_infra", "m2mc_backbone")


@dataclass
class Field:
    name: str
    show: str = ""
    showname: str = ""
    value_hex: str = ""
    children: list[Field] = field(default_factory=list)

    def walk(self) -> Iterator[Field]:
        for child in self.children:
            yield child
            yield from child.walk()

    def all(self, name: str) -> list[Field]:
        """Every field ``name`` below this one, in document order."""
        return [f for f in self.walk() if f.name == name]

    def first(self, name: str) -> Field | None:
        return next((f for f in self.walk() if f.name == name), None)

    def values(self, name: str) -> list[str]:
        return [f.show for f in self.all(name)]

    def value(self, name: str) -> str | None:
        found = self.first(name)
        return None if found is None else found.show

    def direct(self, name: str) -> list[Field]:
        return [f for f in self.children if f.name == name]


@dataclass
class Packet:
    number: int
    protocols: list[str]
    tree: Field
    problems: list[str]

    def protos(self, name: str) -> list[Field]:
        return self.tree.direct(name)

    def m2mp_packets(self) -> list[tuple[Field, list[Field]]]:
        """Each M2MP packet of the frame with our protocols decoded from it, in order: a
        frame the sender's kernel had not cut yet (UDP segmentation offload) holds
        several packets back to back (m2mc.lua, dissect_m2mp)."""
        out: list[tuple[Field, list[Field]]] = []
        for child in self.tree.children:
            if child.name == "m2mp":
                out.append((child, []))
            elif out and child.name in OURS:
                out[-1][1].append(child)
        return out


def _field(element: ET.Element) -> Field:
    node = Field(element.get("name", ""), element.get("show", ""),
                 element.get("showname", ""), element.get("value", ""))
    node.children = [_field(child) for child in element]
    return node


def _problems(tree: Field) -> list[str]:
    out = []
    for f in tree.walk():
        if f.name in ("_ws.malformed", "_ws.lua.error") or "Lua Error" in f.show + f.showname:
            out.append(f.showname or f.show or f.name)
        elif (f.name == "_ws.expert"
              and f.showname.startswith(("Expert Info (Error", "Expert Info (Warning"))
              and any(c.name.startswith(OURS) for c in f.children)):
            out.append(f.showname)
    return out


def dissect(pcap: Path, *, options: Sequence[str] = (), two_pass: bool = True) -> list[Packet]:
    """Every frame of ``pcap`` as tshark with the m2mc dissector decodes it."""
    assert TSHARK is not None
    argv = [TSHARK, "-n", "-X", f"lua_script:{dissector_path()}", "-r", str(pcap), "-T", "pdml"]
    if two_pass:
        argv.append("-2")
    for option in options:
        argv += ["-o", option]
    done = subprocess.run(argv, capture_output=True, timeout=600, check=False)
    errors = [line for line in done.stderr.decode(errors="replace").splitlines()
              if line.strip() and "Running as user" not in line]
    assert done.returncode == 0 and not errors, errors
    # tshark writes strings from the wire as they are; XML 1.0 forbids control characters
    pdml = re.sub(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", b"?", done.stdout)
    packets = []
    for element in ET.fromstring(pdml).iter("packet"):
        tree = Field("packet", children=[_field(proto) for proto in element])
        frame = next(p for p in tree.children if p.name == "frame")
        packets.append(Packet(int(frame.value("frame.number") or 0),
                              (frame.value("frame.protocols") or "").split(":"), tree,
                              _problems(tree)))
    return packets


def info_columns(pcap: Path, *, options: Sequence[str] = ()) -> dict[int, str]:
    """frame number -> the Info column tshark shows with the dissector (two passes)."""
    assert TSHARK is not None
    argv = [TSHARK, "-n", "-2", "-X", f"lua_script:{dissector_path()}", "-r", str(pcap),
            "-T", "fields", "-E", "separator=/t", "-e", "frame.number", "-e", "_ws.col.Info"]
    for option in options:
        argv += ["-o", option]
    done = subprocess.run(argv, capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    out = {}
    for line in done.stdout.decode(errors="replace").splitlines():
        number, _, info = line.partition("\t")
        out[int(number)] = info
    return out


def which(packets: list[Packet], proto: str) -> list[Packet]:
    """The packets with a ``proto`` layer (our protocols show in the tree, not always in
    frame.protocols)."""
    return [p for p in packets if p.protos(proto)]


def ours(packet: Packet) -> bool:
    return any(packet.protos(proto) for proto in ("m2mp", "m2mc_infra", "m2mc_backbone"))


def _retransmitted(packet: Packet) -> bool:
    """A TCP segment sent again: Wireshark decoded its bytes where they first came."""
    return any(packet.tree.first(name) is not None for name in (
        "tcp.analysis.retransmission", "tcp.analysis.spurious_retransmission",
        "tcp.analysis.fast_retransmission"))


def undecoded_frames(packets: list[Packet]) -> list[int]:
    """Frames carrying UDP or TCP payload that no m2mc protocol decoded (a TCP segment in
    the middle of a frame counts as decoded when the frame it belongs to is, a TCP
    retransmission when the original is)."""
    by_number = {p.number: p for p in packets}
    out = []
    for p in packets:
        if ours(p):
            continue
        if "udp" in p.protocols:
            out.append(p.number)
        elif p.tree.first("tcp.payload") is not None and not _retransmitted(p):
            into = p.tree.value("tcp.reassembled_in")
            if into is None or not ours(by_number.get(int(into), p)):
                out.append(p.number)
    return out
