"""What the application hears besides messages (members leaving, catch-up
progress), M2MP filters that keep other groups' traffic out of a process, and
NACK suppression under loss, on the deterministic in-process network."""

from __future__ import annotations

import random

from m2mc.group.events import CatchUpProgress, MemberJoined, MemberLeft
from m2mc.group.manager import GroupNode
from m2mc.ordering import MessageId

from .harness import Net


def _group(net: Net, pids: str, name: str = "room") -> str:
    for pid in pids:
        if pid not in net.nodes:
            net.add(pid)
        net.do(pid, lambda n: n.join_group(name, net.now, order="sb"))
    net.run(1.0)
    return name


def _events(net: Net, pid: str, kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in net.events.get(pid, []) if isinstance(e, kind)]


def test_members_hear_a_leave_and_a_rejoin() -> None:
    net = Net(seed=11)
    gid = _group(net, "abc")
    net.events.clear()
    net.do("c", lambda n: n.leave_group(gid, net.now))
    net.run(1.0)
    for pid in "ab":
        assert [(e.gid, e.pid) for e in _events(net, pid, MemberLeft)] == [(gid, "c")]
        assert net.nodes[pid].members(gid) == ["a", "b"]
    net.do("c", lambda n: n.join_group(gid, net.now, order="sb"))
    net.run(1.0)
    for pid in "ab":
        assert [(e.gid, e.pid) for e in _events(net, pid, MemberJoined)] == [(gid, "c")]


def test_catch_up_progress_counts_up_to_everything_missed() -> None:
    net = Net(seed=12)
    gid = _group(net, "ab")
    prev: MessageId | None = None
    for i in range(600):
        prev = net.send("ab"[i % 2], gid, b"x" * 40, reply_to=prev if i % 3 else None)
    net.run(1.0)
    net.add("z")
    net.do("z", lambda n: n.join_group(gid, net.now, order="sb"))
    net.run(5.0)
    net.check_group(gid, ["a", "b", "z"])
    progress = _events(net, "z", CatchUpProgress)
    assert progress and all(e.gid == gid for e in progress)
    recovered = [e.recovered for e in progress]
    assert recovered == sorted(recovered)  # it only ever counts up
    assert progress[-1].done and progress[-1].remaining == 0
    assert progress[-1].recovered == 600
    assert not any(e.done for e in progress[:-1])


def test_a_process_gets_only_the_groups_it_joined() -> None:
    net = Net(seed=13)
    gid = _group(net, "ab")
    other = _group(net, "c", "elsewhere")
    net.run(0.5)
    c = net.nodes["c"]
    filtered, unknown = c.m2mp.stats.filtered_out, c.stats.unknown_group
    for i in range(50):
        net.send("a", gid, f"m{i}".encode())
        net.run(0.02)  # one data message each (no batching)
    net.run(1.0)
    # M2MP drops the room's traffic by prefix before the group layer parses it.
    assert c.m2mp.stats.filtered_out >= filtered + 50
    assert c.stats.unknown_group == unknown
    assert gid not in net.delivered["c"] and other in c.groups
    # After leaving (and lingering), b's filter for the room is gone too.
    net.do("b", lambda n: n.leave_group(gid, net.now))
    net.run(net.nodes["b"].config.leave_linger + 1.0)
    b = net.nodes["b"]
    delivered, filtered = len(net.delivered["b"][gid]), b.m2mp.stats.filtered_out
    for i in range(20):
        net.send("a", gid, f"late{i}".encode())
        net.run(0.02)
    net.run(1.0)
    assert len(net.delivered["b"][gid]) == delivered
    assert b.m2mp.stats.filtered_out >= filtered + 20


def test_nacks_and_repairs_are_suppressed_under_loss() -> None:
    net = Net(seed=14, loss=0.25)
    members = "abcdefgh"
    gid = _group(net, members)
    prev: MessageId | None = None
    for i in range(200):
        prev = net.send(members[i % len(members)], gid, f"m{i}".encode(),
                        reply_to=prev if i % 2 else None)
        net.run(0.01)
    net.run(10.0)
    net.check_group(gid, list(members))
    stats = [net.nodes[pid].group_stats(gid) for pid in members]
    sent = sum(s["nacks_sent"] for s in stats)
    suppressed = sum(s["nacks_suppressed"] for s in stats)
    # Eight receivers miss the same packets: hearing another's NACK first keeps most
    # of them quiet, and one answer keeps the other holders from answering too.
    assert sent > 0 and suppressed > 0
    assert sum(s["repairs_suppressed"] for s in stats) > 0


def _lossy_run(tracing: bool, batch: bool) -> tuple[dict[str, dict[str, list[MessageId]]],
                                                    dict[str, list[object]]]:
    """Three groups (S_b, causal, total) under loss, with a late joiner and a restart."""
    net = Net(seed=31, loss=0.15, tracing=tracing, batch_deliveries=batch)
    for pid in "abc":
        net.add(pid)
    for gid, order in (("sb", "sb"), ("causal", "causal"), ("total", "total")):
        for pid in "abc":
            net.do(pid, lambda n, g=gid, o=order: n.join_group(g, net.now, order=o))
    net.run(1.0)
    prev: dict[str, MessageId | None] = {}
    for i in range(300):
        gid = ("sb", "causal", "total")[i % 3]
        sender = "abc"[i % 3 if i % 7 else 0]
        prev[gid] = net.send(sender, gid, b"m%d" % i, reply_to=prev.get(gid) if i % 5 else None)
        if i % 40 == 39:
            net.run(0.05)
        if i == 150:
            net.add("d")
            for gid in ("sb", "causal", "total"):
                net.do("d", lambda n, g=gid: n.join_group(g, net.now, order=g))
    net.run(10.0)
    for gid in ("sb", "causal", "total"):
        net.check_group(gid, ["a", "b", "c", "d"])
    assert net.trace.events if tracing else not net.trace.events
    return net.delivered, net.events


def test_deliveries_are_the_same_traced_untraced_and_batched() -> None:
    """The untraced receive path hands a whole body's deliveries over at once, and a
    node with ``batch_deliveries`` coalesces them into DeliveredBatch events: the
    same messages in the same order at every node as message by message."""
    assert GroupNode("x", rng=random.Random(1)).batch_deliveries is False  # by default
    traced = _lossy_run(True, False)
    assert _lossy_run(False, False) == traced
    assert _lossy_run(False, True) == traced
    assert _lossy_run(True, True) == traced
