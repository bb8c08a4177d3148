"""An ad hoc group run with every group message kind, captured and decoded.

Four nodes, one per namespace, on the public API (group_node.py), in an S_b group and
a total-order group joined by name, plus a group created by ``a``. a, b and c have
display names from the start (one of several scripts); d has none until it renames
itself in step 2:

1. a creates a group (GRPS_INFO); a, b, c join both groups (JOIN), d advertises (ADV,
   answered by GRPS_INFO); a, b, c send, a also a 3000-byte message in each group
   (DATA over several M2MP packets); the total-order group is sequenced (ORDER, ACK);
   everyone sends statuses (STATUS).
2. c's port is taken off the switch; d joins both groups (JOIN, SYNC_REQ answered by
   SYNC_RESP) and a and b send more, a also a streamed message (its head a DATA
   record, its body in STREAM chunks); d takes a name (its next STATUS carries it);
   c comes back and NACKs what it missed, answered by REPAIR (and by DECIDED for log
   positions holding d's membership record); it asks for the streamed body it missed
   (STREAM_NACK), sent again by a member that holds it (STREAM).
3. a leaves the total-order group, whose sequencer it is (HANDOVER, then PREPARE,
   PROMISE and START of the successor), b leaves the S_b group (LEAVE); c sends again.
4. a and b, whose logs keep at most 12000 bytes a group (``retention_bytes``, in
   ``ids`` mode: an evicted message leaves its stub), send 24 messages of 1000 bytes
   in a third group; c discovers it and joins late: it gets the newest by SYNC_RESP, for the
   evicted ones GONE (ranges and stubs): it skips them (docs/group.md section 8).

The capture on the switch is decoded by tshark with the dissector: no fault, every
datagram decoded, and what it shows matches the nodes' traces (docs/trace.md): the
DATA records are exactly the messages the traces say were sent (identity, parent,
size) in the group the trace names (its tag); every JOIN, LEAVE, SYNC_REQ, SYNC_RESP
(requester, sync seqno, records, remaining), NACK (ranges), retransmitted record and
hand-over in a trace is a packet of that node, and the other way round; every
message the late joiner's trace says it skipped is one a GONE of the capture names,
each stub is a message its sender's trace sent (identity and parent, no payload).
The names decoded are the names the nodes were given: every JOIN and STATUS carries
its sender's (none for d before its rename, d's new one after it), and every name a
GRPS_INFO entry lists is that of a current member of the entry, the one it was given.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from capture import Capture, GroupNode, child_env, cut, detail, reconnect, trace_rows
from dissection import Field, Packet, dissect, needs_dumpcap, needs_tshark, undecoded_frames
from netns_lab import Lab

from m2mc.group import codec

pytestmark = [pytest.mark.netns, pytest.mark.slow, needs_tshark, needs_dumpcap]

GROUP, PORT = "239.255.93.2", 47621
SB, TOTAL, GONE = "ws-sb", "ws-total", "ws-gone"
RETENTION = ["--retention-bytes", "12000", "--retention-mode", "ids"]  # a and b
GONE_EACH, GONE_SIZE = 12, 1000
STREAM_SIZE = 40000  # three chunks of a streamed message (docs/group.md section 12)
NAMES = {"a": "Ada ✓", "b": "Bob", "c": "Çelik 李"}  # d: none, then RENAMED
RENAMED = "Dee"


def channel(address: str) -> str:
    return f"udp-multicast://{GROUP}:{PORT}?iface={address}&ttl=1"


def run_scenario(lab: Lab, tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    env = child_env(tmp_path)
    trace = tmp_path / "trace"
    trace.mkdir()
    pcap = tmp_path / "group.pcapng"
    facts: dict[str, Any] = {}
    with Capture(lab, pcap) as capture:
        nodes = {pid: GroupNode(lab, host, pid, channel(host.address), trace, env,
                                [*(RETENTION if pid in "ab" else ()),
                                 *(["--name", NAMES[pid]] if pid in NAMES else ())])
                 for pid, host in zip("abcd", lab.hosts, strict=True)}
        a, b, c, d = nodes.values()
        try:
            a.do("create demo")
            first = (a, b, c)
            for n in first:
                n.do(f"join {SB} sb")
                n.do(f"join {TOTAL} total")
            for n in first:
                n.do(f"members {SB} a,b,c")
                n.do(f"members {TOTAL} a,b,c")
            d.do("discover")
            for n in first:
                n.do(f"send {SB} 4 100")
                n.do(f"send {TOTAL} 4 100")
            a.do(f"send {SB} 1 3000")
            a.do(f"send {TOTAL} 1 3000")
            for n in first:
                n.do(f"wait {SB} 13")
                n.do(f"wait {TOTAL} 13")

            cut(lab, lab.hosts[2])
            facts["cut"] = [time.time(), 0.0]
            d.do(f"join {SB} sb")
            d.do(f"join {TOTAL} total")
            d.do(f"members {SB} a,b,d")
            d.do(f"members {TOTAL} a,b,d")
            for n in (a, b):
                n.do(f"send {SB} 4 100")
                n.do(f"send {TOTAL} 4 100")
            a.do(f"stream {SB} {STREAM_SIZE}")  # a head (DATA) and its body (STREAM)
            for n in (a, b):
                n.do(f"wait {SB} 22")
                n.do(f"wait {TOTAL} 21")
            d.do(f"wait {SB} 22")  # the history by SYNC_RESP, the rest live
            d.do(f"wait {TOTAL} 8")
            facts["renamed"] = [time.time(), 0.0]  # d's statuses before: unnamed
            d.do(f"rename {RENAMED}")
            facts["renamed"][1] = time.time()  # after: named
            reconnect(lab, lab.hosts[2])
            facts["cut"][1] = time.time()
            c.do(f"wait {SB} 22")
            c.do(f"wait {TOTAL} 21")
            for n in (b, c, d):  # c missed the stream: it asks for the body (STREAM_NACK)
                n.do(f"bodies {SB} 1")

            a.do(f"leave {TOTAL}")
            b.do(f"leave {SB}")
            before = {n.pid: n.count(TOTAL) for n in (b, c, d)}
            c.do(f"send {TOTAL} 3 100")
            for n in (b, c, d):
                n.do(f"wait {TOTAL} {before[n.pid] + 3}")

            for n in (a, b):
                n.do(f"join {GONE} sb")
            for n in (a, b):
                n.do(f"members {GONE} a,b")
            for n in (a, b):
                n.do(f"send {GONE} {GONE_EACH} {GONE_SIZE}")
            for n in (a, b):
                n.do(f"wait {GONE} {2 * GONE_EACH}")
            c.do("discover")  # ADV, answered by GRPS_INFO naming the new group
            c.do(f"join {GONE} sb")  # late: a and b evicted the oldest
            c.do(f"settle {GONE} {2 * GONE_EACH}")
            facts["late"] = {"delivered": c.count(GONE), "skipped": c.count(GONE, "skipped")}
        finally:
            for n in nodes.values():
                n.quit()
    facts["capture"] = capture.stats
    return pcap, trace, facts


# ------------------------------------------------------------------ reading the capture
def group_messages(packets: list[Packet]) -> list[dict[str, Any]]:
    """Every group message the dissector decoded (redundant copies left out)."""
    out = []
    for p in packets:
        for m2mp, decoded in p.m2mp_packets():
            if m2mp.first("m2mp.copy_of"):
                continue
            for proto in decoded:
                if proto.name == "m2mc":
                    out.append(message_facts(proto, p.tree.value("ip.src") or "",
                                             float(p.tree.value("frame.time_epoch") or 0)))
    return out


def message_facts(proto: Field, source: str, when: float = 0.0) -> dict[str, Any]:
    kind = codec.Kind(int(proto.value("m2mc.kind") or 0))
    body = proto.first("m2mc.body") or Field("")

    def one(name: str) -> str | None:
        found = body.direct(f"m2mc.{name}")
        return found[0].show if found else None

    records = [(r.value("m2mc.record.mid"), r.value("m2mc.record.parent"),
                int(r.value("m2mc.record.payload_len") or -1))
               for r in body.all("m2mc.record")]
    ranges = {p.show: [tuple(map(int, iv.split("-"))) for iv in p.values("m2mc.digest.interval")]
              for f in body.direct("m2mc.ranges") for p in f.direct("m2mc.digest.pid")}
    gseqs = [tuple(map(int, iv.split("-"))) for f in body.direct("m2mc.gseqs")
             for iv in f.values("m2mc.interval")]
    return {"kind": kind.name, "tag": (proto.value("m2mc.tag") or "").replace(":", ""),
            "sender": one("sender"), "records": records, "requester": one("requester"),
            "sync_seqno": one("sync_seqno"), "remaining": one("remaining"),
            "ranges": ranges, "gseqs": gseqs, "gids": body.values("m2mc.grp.gid"),
            "new_sequencer": one("sequencer.pid"), "source": source,
            "stubs": [(r.value("m2mc.record.mid"), r.value("m2mc.record.parent"),
                       int(r.value("m2mc.record.payload_len") or -1))
                      for f in body.direct("m2mc.stubs") for r in f.direct("m2mc.record")],
            "auth_sender": proto.value("m2mc_auth.sender"),
            "encrypted": proto.value("m2mc_auth.encrypted") == "1",
            "name": one("name"), "time": when,
            # GRPS_INFO: per entry, its group, names and current members
            "infos": [(g.value("m2mc.grp.gid"),
                       {n.show: n.value("m2mc.grp.names.name")
                        for n in g.all("m2mc.grp.names.pid")},
                       {m.value("m2mc.member.pid") for m in g.all("m2mc.member")
                        if m.value("m2mc.member.joined") == "1"},
                       g.value("m2mc.grp.keyed") == "1")
                      for g in body.all("m2mc.grp")]}


def tag(gid: str) -> str:
    return codec.group_tag(gid).hex()


# ------------------------------------------------------------------ the test
def test_every_group_kind_captured_decoded_and_matching_the_traces(lab: Lab,
                                                                  tmp_path: Path) -> None:
    pcap, trace, facts = run_scenario(lab, tmp_path)
    assert facts["capture"].get("dropped") == 0, facts["capture"]
    packets = dissect(pcap)
    assert [(p.number, p.problems) for p in packets if p.problems] == []
    assert undecoded_frames(packets) == []
    messages = group_messages(packets)
    kinds = Counter(m["kind"] for m in messages)
    print(json.dumps({"packets": len(packets), "messages": len(messages),
                      "multi_packet": sum(1 for p in packets for m2mp, _ in p.m2mp_packets()
                                          if m2mp.first("m2mp.fragments")),
                      "kinds": dict(sorted(kinds.items()))}))
    rows = trace_rows(trace)
    groups = {row["group"] for row in rows if row["group"]}
    cut_from, cut_to = facts["cut"]

    def seen(row: dict[str, Any]) -> bool:
        """Was the node on the switch when it wrote this row (c was cut off a while)?"""
        return not (row["node"] == "c" and cut_from - 0.2 <= row["t"] <= cut_to)

    # every kind of the codec is in the run
    assert set(kinds) == {k.name for k in codec.Kind}, set(k.name for k in codec.Kind) - set(kinds)
    # every message is tagged with a group of the traces (or the discovery tag)
    tags = {tag(g): g for g in groups}
    for m in messages:
        assert m["tag"] in tags or (m["tag"] == "00" * 8 and m["kind"] in ("ADV", "GRPS_INFO"))
        assert m["sender"] in "abcd"

    # DATA records are exactly the messages sent, with their parents and sizes
    sent = {(tag(r["group"]), r["mid"], r["parent"], r["bytes"]) for r in rows
            if r["event"] == "send"}
    data = {(m["tag"], mid, parent, size) for m in messages if m["kind"] == "DATA"
            for mid, parent, size in m["records"]}
    assert data == sent
    assert all(mid.startswith(f"{m['sender']}:") for m in messages if m["kind"] == "DATA"
               for mid, _, _ in m["records"])
    # retransmitted records: REPAIRs of the node that wrote retransmit, and no other
    retransmit = Counter((r["node"], tag(r["group"]), r["mid"]) for r in rows
                         if r["event"] == "retransmit" and seen(r))
    repaired = Counter((m["sender"], m["tag"], mid) for m in messages if m["kind"] == "REPAIR"
                       for mid, _, _ in m["records"])
    assert repaired == retransmit
    # joins and leaves
    joins = Counter((r["node"], tag(r["group"])) for r in rows if r["event"] == "join")
    assert Counter((m["sender"], m["tag"]) for m in messages if m["kind"] == "JOIN") == joins
    leaves = Counter((r["node"], tag(r["group"])) for r in rows if r["event"] == "leave")
    assert Counter((m["sender"], m["tag"]) for m in messages if m["kind"] == "LEAVE") == leaves
    # catch-up: requests, and responses with requester, seqno, size and what remains
    requests = Counter((r["node"], tag(r["group"]), detail(r)["sync_seqno"]) for r in rows
                       if r["event"] == "sync_req" and seen(r))
    assert Counter((m["sender"], m["tag"], int(m["sync_seqno"])) for m in messages
                   if m["kind"] == "SYNC_REQ") == requests
    responses = Counter((r["node"], tag(r["group"]), r["peer"], detail(r)["sync_seqno"],
                         detail(r)["messages"], detail(r)["remaining"]) for r in rows
                        if r["event"] == "sync_resp" and not detail(r).get("suppressed")
                        and seen(r))
    assert Counter((m["sender"], m["tag"], m["requester"], int(m["sync_seqno"]),
                    len(m["records"]), int(m["remaining"])) for m in messages
                   if m["kind"] == "SYNC_RESP") == responses
    # NACKs: who asked, in which group, for which seqnos and positions
    nacks = Counter((r["node"], tag(r["group"]),
                     json.dumps({p: [list(iv) for iv in ivs] for p, ivs in
                                 sorted(detail(r)["ranges"].items())}),
                     json.dumps([list(iv) for iv in detail(r)["gseq_ranges"]]))
                    for r in rows if r["event"] == "nack" and not detail(r).get("suppressed")
                    and seen(r))
    assert Counter((m["sender"], m["tag"],
                    json.dumps({p: [list(iv) for iv in ivs] for p, ivs in
                                sorted(m["ranges"].items())}),
                    json.dumps([list(iv) for iv in m["gseqs"]]))
                   for m in messages if m["kind"] == "NACK") == nacks
    # the hand-over: from the node whose trace says so, to the successor it names
    handovers = Counter((r["node"], tag(r["group"]), r["peer"]) for r in rows
                        if r["event"] == "elect" and detail(r).get("handover"))
    assert Counter((m["sender"], m["tag"], m["new_sequencer"]) for m in messages
                   if m["kind"] == "HANDOVER") == handovers
    # the groups announced are the trace's groups
    assert {gid for m in messages for gid in m["gids"]} == groups

    # the late joiner: what it skipped, a GONE named; each stub is a message sent, its
    # identity and parent, without its payload
    late = facts["late"]
    print(json.dumps({"late_joiner": late}))
    assert late["skipped"] > 0 and late["delivered"] + late["skipped"] == 2 * GONE_EACH, late
    gone = [m for m in messages if m["kind"] == "GONE"]
    assert gone and all(m["tag"] == tag(GONE) and m["sender"] in "ab" for m in gone), gone
    named = {f"{pid}:{seq}" for m in gone for pid, ivs in m["ranges"].items()
             for lo, hi in ivs for seq in range(lo, hi + 1)}
    skips = [r for r in rows if r["event"] == "skip" and r["group"] == GONE]
    assert {r["node"] for r in skips} == {"c"} and len(skips) == late["skipped"]
    assert {r["mid"] for r in skips} <= named
    parents = {r["mid"]: r["parent"] for r in rows if r["event"] == "send" and r["group"] == GONE}
    stubs = [stub for m in gone for stub in m["stubs"]]
    assert stubs and all(mid in named and parents[mid] == parent and size == 0
                         for mid, parent, size in stubs), stubs
    assert all(r["parent"] in (None, parents[r["mid"]]) for r in skips)

    # display names: each JOIN and STATUS carries its sender's own (d: none, then its
    # new one), each GRPS_INFO entry the given names of its current members
    renamed_from, renamed_to = facts["renamed"]
    for m in messages:
        if m["kind"] == "JOIN":
            assert m["name"] == NAMES.get(m["sender"]), m
        elif m["kind"] == "STATUS" and m["sender"] != "d":
            assert m["name"] == NAMES[m["sender"]], m
        elif m["kind"] == "STATUS" and not renamed_from <= m["time"] <= renamed_to:
            assert m["name"] == (RENAMED if m["time"] > renamed_to else None), m
    d_statuses = Counter(m["name"] for m in messages if m["kind"] == "STATUS"
                         and m["sender"] == "d")
    assert d_statuses[RENAMED], d_statuses  # (before the rename d may have sent none)
    given = {**NAMES, "d": RENAMED}
    listed = [(pid, name) for m in messages if m["kind"] == "GRPS_INFO"
              for _, names, current, _ in m["infos"] for pid, name in names.items()
              if pid in current and given[pid] == name]
    every = [(pid, name) for m in messages if m["kind"] == "GRPS_INFO"
             for _, names, _, _ in m["infos"] for pid, name in names.items()]
    assert every == listed  # only current members, by the names they were given
    assert set(NAMES.items()) <= set(listed), listed  # a, b and c were each announced
    print(json.dumps({"names": {"join": sum(1 for m in messages if m["kind"] == "JOIN"
                                            and m["name"]),
                                "status": sum(1 for m in messages if m["kind"] == "STATUS"
                                              and m["name"]),
                                "grps_info_names": len(every), "d": dict(d_statuses)}},
                     ensure_ascii=False))
