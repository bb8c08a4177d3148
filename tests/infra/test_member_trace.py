"""A member's ``nack`` trace event names the gseqs it asks for (docs/infra.md "Trace
events"): what the pipeline's time to repair starts from."""

from __future__ import annotations

import json
import random

from m2mc.infra import messages as m
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import MemberId
from m2mc.infra.member import MemberCore
from m2mc.infra.state import pack_groups
from m2mc.trace.schema import ListSink

B = MemberId("B", 7)


def rec(g: int) -> m.Record:
    return m.Record(g, g, m.APP, B, g, g, 0, f"b{g}".encode(), "g")


def test_nack_event_names_the_gseqs_asked_for() -> None:
    sink = ListSink()
    core = MemberCore("A", InfraConfig(), random.Random(1), trace=sink, run_id="r", group="g")
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    mid = core.join(0.0)
    core.receive(m.Normals("G", (m.Record(1, 1, m.JOINED, mid, body=pack_groups(["g"])),)), 0.1)
    core.receive(m.Normals("G", (rec(5),)), 0.2)  # 2, 3 and 4 missing
    (nack,) = [e for e in sink.events if e.event == "nack"]
    assert nack.t == 0.2 and nack.mid is None and nack.group == "g" and nack.order == "total"
    assert nack.detail is not None
    assert json.loads(nack.detail) == {"s1": 1, "s2": 5, "gseq_ranges": [[2, 4]]}
    core.receive(m.Transfer("G", mid, (rec(2), rec(3), rec(4))), 0.5)
    got = [(e.event, e.gseq) for e in sink.events if e.t == 0.5]
    assert ("recv", 2) in got and ("deliver", 5) in got
