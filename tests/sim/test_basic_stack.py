"""The basic stack (tests/sim/basic_stack.py): real M2MP + ordering cores in the
simulator, and the trace it writes."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.sim import load_scenario, run_scenario
from m2mc.trace.schema import TraceEvent
from m2mc.trace.writer import read_jsonl


def scenario(**domain: Any) -> dict[str, Any]:
    return {
        "run": {"chaos": 20.0, "heal": 5.0},
        "stack": {"kind": "basic"},
        "nodes": {"count": 5},
        "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.02},
                            **domain}},
        "groups": [
            {"name": "chat", "order": "sb", "rate": 10.0, "messages": 120, "reply": 0.7,
             "size": {"dist": "uniform", "low": 10, "high": 1400}},  # up to 3 packets
            {"name": "ops", "order": "causal", "members": ["n0", "n1", "n2"], "rate": 5.0,
             "messages": 60},
            {"name": "log", "order": "fifo", "rate": 5.0, "messages": 60},
        ],
    }


def trace(out: Path) -> list[TraceEvent]:
    rows: list[TraceEvent] = []
    for path in sorted((out / "trace").glob("*.jsonl")):
        rows.extend(read_jsonl(path))
    return rows


def delivered(rows: list[TraceEvent]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in rows:
        if r.event == "deliver":
            assert r.group is not None and r.mid is not None
            out[(r.node, r.group)].append(r.mid)
    return out


def test_clean_network_every_member_delivers_every_message_once(tmp_path: Path) -> None:
    result = run_scenario(scenario(), 1, tmp_path)
    rows = trace(tmp_path)
    sends = [r for r in rows if r.event == "send"]
    assert len(sends) == sum(result.sent.values()) == 240
    got = delivered(rows)
    members = {"chat": [f"n{i}" for i in range(5)], "ops": ["n0", "n1", "n2"],
               "log": [f"n{i}" for i in range(5)]}
    for group, nodes in members.items():
        mids = sorted(r.mid for r in sends if r.group == group)  # type: ignore[type-var]
        for node in nodes:
            assert sorted(got[(node, group)]) == mids, (node, group)
    assert not [r for r in rows if r.event == "dup"]


def test_trace_columns_follow_the_contract(tmp_path: Path) -> None:
    run_scenario(scenario(), 2, tmp_path)
    rows = trace(tmp_path)
    for r in rows:
        assert r.run == "scenario-2"
        if r.event in ("send", "recv", "deliver"):
            assert r.mid is not None and ":" in r.mid
            assert r.parent == "" or ":" in (r.parent or "")
            assert r.order == {"chat": "sb", "ops": "causal", "log": "fifo"}[r.group or ""]
            assert r.bytes is not None
        if r.event in ("recv", "deliver"):
            assert r.peer == r.mid.rpartition(":")[0]  # type: ignore[union-attr]
        if r.order == "causal" and r.event in ("send", "recv", "deliver"):
            vclock = json.loads(r.detail or "{}")["vclock"]
            pid, _, seq = (r.mid or "").rpartition(":")
            assert vclock[pid] == int(seq)
    roots = [r for r in rows if r.event == "send" and r.parent == ""]
    replies = [r for r in rows if r.event == "send" and r.parent]
    assert roots and replies


def test_sb_order_holds_at_every_node_even_with_loss(tmp_path: Path) -> None:
    run_scenario(scenario(loss=0.2, duplicate=0.1, reorder=0.3), 3, tmp_path)
    rows = trace(tmp_path)
    parent_of = {(r.group, r.mid): r.parent for r in rows if r.event == "send"}
    for (_, group), mids in delivered(rows).items():
        assert len(mids) == len(set(mids))  # never twice
        if group == "log":
            continue  # FIFO orders each sender's messages only: a reply may pass its parent
        seen = {""}
        for mid in mids:
            assert parent_of[(group, mid)] in seen  # child never before its parent
            seen.add(mid)
    sends = sum(1 for r in rows if r.event == "send")
    delivered_count = sum(1 for r in rows if r.event == "deliver")
    lost = sends * 4 - delivered_count  # no repair: losses show
    assert lost > 0
    assert [r for r in rows if r.event == "dup"]  # duplicated packets are seen and counted


def test_restart_keeps_identities_and_memberships(tmp_path: Path) -> None:
    spec = scenario()
    spec["faults"] = {"crash": [{"node": "n1", "at": 6.0, "restart": 8.0}]}
    spec["schedule"] = [{"at": 3.0, "node": "n1", "action": "leave", "group": "log"}]
    run_scenario(spec, 4, tmp_path)
    rows = [r for r in read_jsonl(tmp_path / "trace" / "n1.jsonl")]
    mids = [(r.group, r.mid) for r in rows if r.event == "send"]
    assert len(mids) == len(set(mids))  # no identity reused across the restart
    restart = next(i for i, r in enumerate(rows) if r.event == "restart")
    rejoined = {r.group for r in rows[restart:] if r.event == "join"}
    assert rejoined == {"chat", "ops"}  # "log" was left before the crash: stays left
    assert not [r for r in rows[restart:] if r.group == "log" and r.event == "deliver"]
    seqs = [int(m.rpartition(":")[2]) for g, m in mids if g == "chat" and m]
    assert seqs == list(range(1, len(seqs) + 1))  # per-group counter continues


def test_join_is_written_before_any_delivery_of_the_group(tmp_path: Path) -> None:
    spec = scenario()
    spec["groups"][1]["members"] = ["n0", "n1"]
    spec["schedule"] = [{"at": 5.0, "node": "n4", "action": "join", "group": "ops"}]
    run_scenario(spec, 5, tmp_path)
    rows = list(read_jsonl(tmp_path / "trace" / "n4.jsonl"))
    ops = [r for r in rows if r.group == "ops"]
    assert ops[0].event == "join" and ops[0].t == 5.0
    assert any(r.event == "deliver" for r in ops)


def test_total_order_is_refused_by_the_basic_stack() -> None:
    spec = scenario()
    spec["groups"][0]["order"] = "total"
    with pytest.raises(ConfigError, match="total"):
        load_scenario(spec)


def test_unknown_stack_parameter_is_named() -> None:
    spec = scenario()
    spec["stack"]["redundancy"] = 0
    with pytest.raises(ConfigError, match=r"^stack\.redundancy: must be >= 1"):
        load_scenario(spec)
    spec["stack"] = {"kind": "basic", "redundnacy": 2}
    with pytest.raises(ConfigError, match=r"^stack\.redundnacy: unknown key"):
        load_scenario(spec)


def _stack(tmp_path: Path) -> Any:
    import random

    from basic_stack import BasicStack

    from m2mc.sim.node import GroupSpec, NodeContext
    from m2mc.trace.schema import ListSink

    ctx = NodeContext(node_id="A", rng=random.Random(1), trace=ListSink(), run_id="r",
                      durable_dir=tmp_path, groups=(GroupSpec("g", "causal"),),
                      params={"kind": "basic"})
    stack = BasicStack(ctx)
    stack.start(0.0)
    return stack


@given(st.binary(max_size=60))
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_malformed_group_messages_are_counted_never_raised(tmp_path: Path, tail: bytes) -> None:
    import msgpack
    from basic_stack import group_prefix

    from m2mc.wire.packet import fragments

    stack = _stack(tmp_path)
    bad = [group_prefix("g") + tail,
           msgpack.packb(["g", "B", 1, "", 0, {"B": "x"}, None, b"p"]),
           msgpack.packb(["g", "B", 0, "", 0, None, None, b"p"]),
           msgpack.packb(["g", ["B"], 1, "", 0, None, None, b"p"]),
           msgpack.packb(["g", "B", 1, "", 0, None, "7", b"p"])]
    for i, message in enumerate(bad):
        for datagram in fragments(1000 + i, message):
            stack.receive_datagram(datagram, 1.0)
    assert stack.delivered_mids("g") in ([], ["B:1"])  # only a well-formed one can pass
    assert stack.malformed >= 4


def test_a_well_formed_message_from_a_peer_is_delivered(tmp_path: Path) -> None:
    import msgpack

    from m2mc.wire.packet import fragments

    stack = _stack(tmp_path)
    message = msgpack.packb(["g", "B", 1, "", 0, {"B": 1}, None, b"hi"])
    for datagram in fragments(77, message):
        stack.receive_datagram(datagram, 1.0)
        stack.receive_datagram(datagram, 1.1)  # a copy: counted as dup, not delivered twice
    assert list(stack.delivered_mids("g")) == ["B:1"]
    events = [e.event for e in stack.ctx.trace.events]
    assert events == ["join", "recv", "deliver", "dup"]
