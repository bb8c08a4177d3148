"""Retention in a running group (docs/group.md section 8): what a late joiner, a
member cut off for longer than the retention, and a restarted node get when part
of the history was evicted: no hang, the gone messages skipped, counted, traced
and reported, everything still held delivered in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from m2mc.group.config import GroupConfig
from m2mc.group.events import MessagesSkipped
from m2mc.ordering import MessageId
from m2mc.store.sqlite import SqliteStore

from .harness import Net
from .tracecheck import check

G = "g"


def aged(**extra: object) -> GroupConfig:
    return GroupConfig.from_mapping({"retention_age": 5.0, **extra})


def chat(net: Net, senders: str, count: int, prefix: str, threaded: bool,
         start: MessageId | None = None) -> MessageId | None:
    """``count`` messages, round robin; ``threaded``: each answers the one before."""
    last = start
    for i in range(count):
        last = net.send(senders[i % len(senders)], G, f"{prefix} {i}".encode(),
                        reply_to=last if threaded else None)
        net.run(0.05)
    return last


def skipped(net: Net, pid: str) -> list[MessagesSkipped]:
    return [e for e in net.events.get(pid, []) if isinstance(e, MessagesSkipped)]


def skipped_ranges(events: list[MessagesSkipped]) -> dict[str, list[tuple[int, int]]]:
    """The seqnos given up per sender, over every event, as runs (one event or several:
    a reply can make a node give up its parent before the rest of its sender's run)."""
    seqnos: dict[str, set[int]] = {}
    for e in events:
        for pid, runs in e.ranges.items():
            seqnos.setdefault(pid, set()).update(s for a, b in runs for s in range(a, b + 1))
    out: dict[str, list[tuple[int, int]]] = {}
    for pid, got in sorted(seqnos.items()):
        for s in sorted(got):
            runs = out.setdefault(pid, [])
            if runs and runs[-1][1] == s - 1:
                runs[-1] = (runs[-1][0], s)
            else:
                runs.append((s, s))
    return out


def trace_rows(net: Net) -> list[dict[str, object]]:
    return [dict(json.loads(e.to_json()), pos=i) for i, e in enumerate(net.trace.events)]


@pytest.mark.parametrize("order", ["sb", "fifo", "causal", "total"])
def test_a_late_joiner_skips_what_every_member_evicted_and_goes_on(order: str) -> None:
    net = Net(seed=3, config=aged)
    net.add("a")
    net.add("b")
    net.do("a", lambda n: n.create_group("x", net.now, order, gid=G))
    net.do("b", lambda n: n.join_group(G, net.now, order=order))
    net.run(1.0)
    threaded = order == "sb"
    last = chat(net, "ab", 50, "old", threaded)  # 2.5 s of history ...
    net.run(10.0)  # ... evicted everywhere 5 s after it was stored
    assert net.nodes["a"].store.gone(G).ids == {"a": [(1, 25)], "b": [(1, 25)]}
    last = chat(net, "a", 20, "new", threaded, last)  # a thread going on from the old one
    net.add("c")
    net.do("c", lambda n: n.join_group(G, net.now, order=order))
    net.run(6.0)
    # No hang: c delivered the 20 messages still held, in order (replies to evicted
    # messages included), and gave up the 50 others, once.
    got = net.delivered["c"][G]
    assert got == net.delivered["a"][G][-20:]
    events = skipped(net, "c")
    assert sum(e.count for e in events) == 50
    assert skipped_ranges(events) == {"a": [(1, 25)], "b": [(1, 25)]}
    stats = net.nodes["c"].group_stats(G)
    assert stats["skipped"] == 50 and stats["held"] == 0
    if order == "total":
        assert stats["skipped_positions"] == 50
        # Skipped positions keep their numbers: c numbers messages as a and b do.
        numbers = [e.gseq for e in net.trace.events if e.event == "deliver" and e.node == "c"]
        assert numbers == list(range(51, 71))
    # It stops asking: no NACK after the skips.
    nacks = stats["nacks_sent"]
    chat(net, "b", 5, "more", threaded, last)
    net.run(5.0)
    assert net.nodes["c"].group_stats(G)["nacks_sent"] == nacks
    assert net.delivered["c"][G][-5:] == net.delivered["a"][G][-5:]
    # The trace says so: a skip per message; the checks count a skipped parent as
    # its place (the reply after it is in order); c was no member then: nothing lost.
    rows = trace_rows(net)
    assert sum(1 for r in rows if r["event"] == "skip" and r["node"] == "c" and r["mid"]) == 50
    assert {k: v for k, v in check(rows).items() if v} == {}



def test_a_member_that_still_holds_them_serves_them_and_nothing_is_skipped() -> None:
    net = Net(seed=5, config=aged)
    net.add("a")
    net.config = GroupConfig  # b keeps everything
    net.add("b")
    net.config = aged
    net.do("a", lambda n: n.create_group("x", net.now, "sb", gid=G))
    net.do("b", lambda n: n.join_group(G, net.now, order="sb"))
    net.run(1.0)
    chat(net, "ab", 40, "old", True)
    net.run(10.0)
    assert net.nodes["a"].store.gone(G).ids and not net.nodes["b"].store.gone(G).ids
    net.add("c")
    net.do("c", lambda n: n.join_group(G, net.now, order="sb"))
    net.run(6.0)
    assert net.delivered["c"][G] == net.delivered["b"][G]
    assert skipped(net, "c") == []
    assert net.nodes["c"].group_stats(G)["skipped"] == 0


def test_a_member_cut_off_longer_than_the_retention_reports_what_it_lost() -> None:
    net = Net(seed=7, config=aged)
    for pid in "abc":
        net.add(pid)
    net.do("a", lambda n: n.create_group("x", net.now, "sb", gid=G))
    for pid in "bc":
        net.do(pid, lambda n: n.join_group(G, net.now, order="sb"))
    net.run(1.0)
    chat(net, "abc", 6, "before", False)
    net.run(1.0)
    net.partition(["a", "b"], ["c"])
    chat(net, "ab", 30, "during", False)  # c does not hear these ...
    net.run(12.0)  # ... and a and b evict them before the partition heals
    net.heal()
    chat(net, "ab", 4, "after", False)
    net.run(8.0)
    during = 30
    events = skipped(net, "c")
    assert sum(e.count for e in events) == during
    assert len(net.delivered["c"][G]) == 6 + 4
    rows = trace_rows(net)
    found = check(rows)
    # A skip is a loss for a member (docs/interfaces.md §5): the checks see each one.
    assert len(found["lost"]) == during and all(line.startswith("c ") for line in found["lost"])
    assert not any(found[k] for k in ("duplicated", "unexpected", "sb_order"))


@pytest.mark.parametrize("mode", ["full", "ids"])
def test_a_restarted_node_redelivers_nothing_and_holds_nothing_after_eviction(
        tmp_path: Path, mode: str) -> None:
    net = Net(seed=9, config=lambda: aged(retention_mode=mode))
    net.add("a")
    net.add("b", SqliteStore(tmp_path / "b.db"))
    net.do("a", lambda n: n.create_group("x", net.now, "causal", gid=G))
    net.do("b", lambda n: n.join_group(G, net.now, order="causal"))
    net.run(1.0)
    chat(net, "ab", 30, "old", False)
    net.run(10.0)  # evicted at b
    assert net.stores["b"].gone(G).ids or net.stores["b"].load_stubs(G)
    before = list(net.delivered["b"][G])
    net.stores["b"].close()
    net.crash("b")
    net.stores["b"] = SqliteStore(tmp_path / "b.db")
    net.restart("b")
    net.run(3.0)
    chat(net, "ab", 10, "new", False)
    net.run(3.0)
    got = net.delivered["b"][G]
    assert len(got) == len(set(got)) == 40 and got[:30] == before
    assert net.nodes["b"].group_stats(G)["held"] == 0
    # b's own seqnos go on from its evicted ones: none is reused.
    own = [m for m in got if m.pid == "b"]
    assert [m.seq for m in own] == list(range(1, len(own) + 1))
    net.stores["b"].close()


def test_ids_mode_joiner_learns_parents_and_keeps_the_stubs() -> None:
    net = Net(seed=11, config=lambda: aged(retention_mode="ids"))
    net.add("a")
    net.add("b")
    net.do("a", lambda n: n.create_group("x", net.now, "sb", gid=G))
    net.do("b", lambda n: n.join_group(G, net.now, order="sb"))
    net.run(1.0)
    last = chat(net, "ab", 20, "old", True)
    net.run(10.0)
    assert len(net.nodes["a"].store.load_stubs(G)) == 20
    chat(net, "a", 5, "new", True, last)
    net.add("c")
    net.do("c", lambda n: n.join_group(G, net.now, order="sb"))
    net.run(6.0)
    assert net.delivered["c"][G] == net.delivered["a"][G][-5:]
    # The skip events name each message's parent (from its stub), and c keeps the stubs:
    # it can answer for them in turn.
    skips = [r for r in trace_rows(net) if r["event"] == "skip" and r["node"] == "c"]
    assert len(skips) == 20 and all(r["parent"] is not None for r in skips)
    kept = {str(m.mid): str(m.parent) for m in net.nodes["c"].store.load_stubs(G)}
    assert all(kept[str(r["mid"])] == r["parent"] for r in skips)


def test_a_total_order_joiner_jumps_a_long_gone_prefix_and_numbers_on() -> None:
    net = Net(seed=13, config=aged)
    net.add("a")
    net.add("b")
    net.do("a", lambda n: n.create_group("x", net.now, "total", gid=G))
    net.do("b", lambda n: n.join_group(G, net.now, order="total"))
    net.run(1.0)
    for i in range(300):  # a long run of positions, evicted everywhere
        net.send("ab"[i % 2], G, b"old %d" % i)
        if i % 10 == 9:
            net.run(0.05)
    net.run(10.0)
    chat(net, "ab", 10, "new", False)
    net.add("c")
    net.do("c", lambda n: n.join_group(G, net.now, order="total"))
    net.run(6.0)
    assert net.delivered["c"][G] == net.delivered["a"][G][-10:]
    numbers = [e.gseq for e in net.trace.events if e.event == "deliver" and e.node == "c"]
    assert numbers == list(range(301, 311))
    stats = net.nodes["c"].group_stats(G)
    assert stats["skipped_positions"] == 300 and stats["held"] == 0
