"""Display names and a newer version's elements, decoded exactly as the codec decodes
them (docs/group.md section 2, docs/wireshark.md).

JOIN and STATUS carry the sender's name as an optional trailing element and GRPS_INFO
entries the names of their current members: absent is normal, present is shown (in the
Info column after the sender, on each named member). JOIN, STATUS and GRPS_INFO entries
take up to 16 elements, a newer version's beyond the ones this version knows: shown,
noted (``m2mc.newer``, a note), not malformed; one more and the codec refuses the
message, so the dissector flags it malformed. Every other kind keeps its exact length.
A name is at most 128 bytes of UTF-8. Each case is handed to the codec too: the
dissector flags a message malformed exactly when ``decode_body`` refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest
from dissection import Packet, dissect, info_columns, needs_tshark
from pcapgen import PcapWriter
from samples import NAME

from m2mc.errors import DecodeError
from m2mc.group import codec

pytestmark = needs_tshark

TAG = codec.group_tag("named-group")
SRC, DST = ("10.77.0.1", 40001), ("239.255.77.1", 47017)
MEMBERS = [["alice", 1, True], ["bob", 2, True], ["carol", 3, False]]
STATUS = ["alice", 3, {"bob": 2}, MEMBERS, None, 0]
LONGEST = "é" * (codec.MAX_NAME // 2)  # 128 bytes of UTF-8
BAD_UTF8 = "\u2603@@"  # replaced by bytes that are not UTF-8 after packing


@dataclass
class Case:
    what: str
    kind: codec.Kind
    wire: list[Any]
    newer: int = 0  # elements of a newer version the dissector shows as ignored
    info: str | None = None  # a piece of the Info column
    names: dict[str, str] = field(default_factory=dict)  # GRPS_INFO: pid -> name shown
    keyed_names: bool = False  # the warning for names in a keyed group's entry

    def frame(self) -> bytes:
        tag = codec.DISCOVERY_TAG if self.kind == codec.Kind.GRPS_INFO else TAG
        body: bytes = msgpack.packb(self.wire, use_bin_type=True)
        body = body.replace("\u2603@@".encode(), b"\xff\xfe\xfd\xfc\xfb")  # same length
        return codec.HEADER.pack(codec.MAGIC, codec.VERSION, tag, int(self.kind), 0) + body

    def codec_accepts(self) -> bool:
        frame = codec.split_frame(self.frame())
        try:
            codec.decode_body(frame.kind, frame.body)
        except DecodeError:
            return False
        return True


def _entry(gid: str, *rest: Any) -> list[Any]:
    return [gid, "", "sb", MEMBERS, *rest]


def _info(entries: list[list[Any]]) -> list[Any]:
    return ["alice", entries]


EXTRA = [7, "x", [1, [2]], {"k": None}, None, False, b"\x01", 2.5, 9, 10, 11]
JOIN, KIND_STATUS, GRPS = codec.Kind.JOIN, codec.Kind.STATUS, codec.Kind.GRPS_INFO
CASES = [
    # names present and absent
    Case("JOIN named", JOIN, ["alice", 1, "sb", "d", NAME], info=f"from alice ({NAME}) version=1"),
    Case("JOIN unnamed", JOIN, ["alice", 1, "sb", "d"], info="from alice version=1"),
    Case("STATUS named", KIND_STATUS, [*STATUS, "Bob"], info="from alice (Bob) own_hw=3"),
    Case("STATUS unnamed", KIND_STATUS, STATUS, info="from alice own_hw=3"),
    Case("JOIN, the longest name", JOIN, ["alice", 1, "sb", "d", LONGEST],
         info=f"from alice ({LONGEST})"),
    Case("GRPS_INFO named", GRPS, _info([_entry("g", False, {"alice": "Ålice", "bob": "Bob"}),
                                         _entry("k", True), _entry("o")]),
         names={"alice": "Ålice", "bob": "Bob"}, info="groups=[g k o]"),
    Case("GRPS_INFO, a keyed entry with names", GRPS, _info([_entry("k", True, {"bob": "B"})]),
         names={"bob": "B"}, keyed_names=True),
    # a newer version's elements, up to 16 in all
    Case("JOIN of a newer version", JOIN, ["alice", 1, "sb", "d", "N", *EXTRA[:3]], newer=3,
         info="from alice (N) version=1"),
    Case("JOIN of a newer version, no name", JOIN, ["alice", 1, "sb", "d", "", 7], newer=1,
         info="from alice version=1"),
    Case("STATUS of 16 elements", KIND_STATUS, [*STATUS, "Bob", *EXTRA[:9]], newer=9),
    Case("GRPS_INFO entries of a newer version", GRPS, _info([
        _entry("g", False, {"carol": "C"}, *EXTRA[:1]),
        _entry("h", False, {}, *EXTRA[:10])]), newer=11, names={"carol": "C"}),
    # malformed, as the codec says
    Case("JOIN of 17 elements", JOIN, ["alice", 1, "sb", "d", "N", *EXTRA[:11], 1]),
    Case("STATUS of 17 elements", KIND_STATUS, [*STATUS, "Bob", *EXTRA[:10]]),
    Case("GRPS_INFO entry of 17", GRPS, _info([_entry("g", False, {}, *EXTRA[:11])])),
    Case("JOIN of 3 elements", JOIN, ["alice", 1, "sb"]),
    Case("STATUS of 5 elements", KIND_STATUS, STATUS[:5]),
    Case("LEAVE with one more", codec.Kind.LEAVE, ["alice", 1, "newer"]),
    Case("ADV with one more", codec.Kind.ADV, ["alice", 1]),
    Case("JOIN, a name of 129 bytes", JOIN, ["alice", 1, "sb", "d", LONGEST + "x"]),
    Case("STATUS, a name not UTF-8", KIND_STATUS, [*STATUS, BAD_UTF8]),
    Case("JOIN, a name not a string", JOIN, ["alice", 1, "sb", "d", None]),
    Case("GRPS_INFO, a name of 129 bytes", GRPS, _info([_entry("g", False,
                                                               {"a": LONGEST + "x"})])),
    Case("GRPS_INFO, names not a map", GRPS, _info([_entry("g", False, [["a", "A"]])])),
    Case("GRPS_INFO, a keyed flag not a boolean", GRPS, _info([_entry("g", 1)])),
]


@pytest.fixture(scope="module")
def decoded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Packet], dict[str, str]]:
    path = tmp_path_factory.mktemp("names") / "names.pcap"
    frames = {}
    with PcapWriter(path) as pcap:
        for i, case in enumerate(CASES):
            frame = case.frame()
            assert len(frame) <= 500, case.what  # one M2MP packet
            packet = (0x4E000000 + i).to_bytes(4, "big") + (1 << 31).to_bytes(4, "big") + frame
            frames[case.what] = pcap.udp(SRC, DST, packet)
    by_number = {p.number: p for p in dissect(path)}
    infos = info_columns(path)
    return ({what: by_number[n] for what, n in frames.items()},
            {what: infos[n] for what, n in frames.items()})


def _malformed(packet: Packet) -> list[str]:
    return [p for p in packet.problems if "Malformed" in p]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.what)
def test_malformed_exactly_when_the_codec_refuses(
        case: Case, decoded: tuple[dict[str, Packet], dict[str, str]]) -> None:
    packet = decoded[0][case.what]
    assert packet.protos("m2mc"), "not decoded as a group message"
    assert bool(_malformed(packet)) != case.codec_accepts(), packet.problems
    faults = [f.showname for f in packet.tree.walk() if "dissector fault" in f.showname]
    assert faults == []


@pytest.mark.parametrize("case", [c for c in CASES if c.codec_accepts()], ids=lambda c: c.what)
def test_names_and_newer_elements_shown_as_the_codec_reads_them(
        case: Case, decoded: tuple[dict[str, Packet], dict[str, str]]) -> None:
    packets, infos = decoded
    packet = packets[case.what]
    [proto] = packet.protos("m2mc")
    frame = codec.split_frame(case.frame())
    body = codec.decode_body(frame.kind, frame.body)
    if isinstance(body, codec.Join | codec.Status):  # the sender's own name, when it has one
        at = 6 if case.kind == KIND_STATUS else 4  # the name's place on the wire
        assert proto.values("m2mc.name") == case.wire[at:at + 1]
        assert (f"({body.name})" in infos[case.what]) == bool(body.name)
    else:  # GRPS_INFO: the names of each entry, each named member's line too
        assert isinstance(body, codec.GrpsInfo)
        shown = {p.show: p.value("m2mc.grp.names.name") for p in proto.all("m2mc.grp.names.pid")}
        assert shown == case.names == {p: n for g in body.groups for p, n in g.names}
        members = [m.showname for m in proto.all("m2mc.member")]
        for pid, name in case.names.items():
            assert any(m.startswith(f"Member {pid} ") and m.endswith(f" ({name})")
                       for m in members), (pid, members)
    if case.info is not None:
        assert case.info in infos[case.what], infos[case.what]
    # a newer version's elements: shown one by one, one note, nothing malformed
    assert len(proto.all("m2mc.ignored")) == case.newer
    notes = [f.showname for f in proto.walk() if f.name == "_ws.expert"
             and f.showname.startswith("Expert Info (Note/Undecoded)")]
    entries_with_newer = sum(1 for e in case.wire[1] if len(e) > 6) if case.kind == GRPS else (
        1 if case.newer else 0)
    assert len(notes) == entries_with_newer, notes
    keyed = [p for p in packet.problems if "keyed group's entry" in p]
    assert bool(keyed) == case.keyed_names
    assert packet.problems == keyed  # no other error or warning
