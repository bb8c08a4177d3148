"""m2mc.lua and cell frames cut into pieces (m2mc.infra.pieces; docs/interfaces.md
section 9): the pieces of a frame, in any order and with duplicates, are put together
and the frame decoded in the last one; the others point at it; pieces that never
complete are labelled, not flagged; mutated pieces never break the script."""

from __future__ import annotations

import random
from pathlib import Path

from dissection import dissect, info_columns, needs_tshark
from pcapgen import PcapWriter
from samples import infra_message
from test_fuzz import mutate

from m2mc.infra import codec as infra_codec
from m2mc.infra import messages as im
from m2mc.infra.pieces import cut

pytestmark = needs_tshark

HOST = ("10.77.0.1", 47301)
CELL = ("239.255.91.1", 47101)
OPTIONS = ["m2mc_infra.udp_ports:47101"]


def normals() -> bytes:
    sample = infra_message(2)
    assert isinstance(sample, im.Normals)
    record = sample.records[0]
    records = tuple(im.Record(g, g, im.APP, record.mid, g, g, 0, bytes([g]) * 1000, "chat", g)
                    for g in range(1, 6))
    return infra_codec.encode(im.Normals("H0", records))


def test_pieces_in_any_order_are_put_together_and_the_frame_decoded(tmp_path: Path) -> None:
    frame = normals()
    pieces = cut(frame, 0x1234, 1472)
    assert len(pieces) == 4
    order = [2, 0, 2, 3, 1]  # a duplicate, and out of order
    lone = cut(frame, 0x99, 1472)[:2]  # a frame whose other pieces were lost
    path = tmp_path / "pieces.pcap"
    with PcapWriter(path) as pcap:
        numbers = [pcap.udp(HOST, CELL, pieces[i]) for i in order]
        lost = [pcap.udp(HOST, CELL, p) for p in lone]
        plain = pcap.udp(HOST, CELL, infra_codec.encode(infra_message(4)))
    frames = {p.number: p for p in dissect(path, options=OPTIONS)}
    assert [(n, p.problems) for n, p in frames.items() if p.problems] == []
    last = frames[numbers[-1]]
    gseqs = last.tree.values("m2mc_infra.record.gseq")
    assert gseqs == ["1", "2", "3", "4", "5"]
    assert last.tree.values("m2mc_infra.piece.part") == [str(numbers[i]) for i in (1, 4, 0, 3)]
    for n in numbers[:-1]:
        assert frames[n].tree.value("m2mc_infra.piece.put_together_in") == str(numbers[-1])
    info = info_columns(path, options=OPTIONS)
    assert "Normals" in info[numbers[-1]] and "[4 pieces]" in info[numbers[-1]]
    assert all("not complete" in info[n] for n in lost)
    assert "Ack" in info[plain]


def test_mutated_pieces_never_break_the_script(tmp_path: Path) -> None:
    rng = random.Random(7)
    path = tmp_path / "fuzz.pcap"
    with PcapWriter(path) as pcap:
        for i in range(300):
            for piece in cut(normals(), i, rng.choice([600, 1472, 4000])):
                pcap.udp(HOST, CELL, mutate(piece, rng) if rng.random() < 0.5 else piece)
    packets = dissect(path, options=OPTIONS)
    faults = [(p.number, f.showname) for p in packets for f in p.tree.walk()
              if f.name == "_ws.lua.error" or "dissector fault" in f.showname]
    assert faults == [] and len(packets) > 600
