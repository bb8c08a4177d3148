"""The group layer end to end on the in-process network: create, discover, join,
send, S_b delivery, with and without loss."""

from __future__ import annotations

from m2mc.group.events import GroupDiscovered
from m2mc.ordering import MessageId

from .harness import Net, group_of_three


def test_create_discover_join_and_deliver_in_sb_order() -> None:
    net = Net(seed=3)
    for pid in ("a", "b", "c"):
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("chat", net.now)))
    assert gid == "a/1"
    net.run(0.5)
    seen = [e for e in net.nodes["b"].events() if isinstance(e, GroupDiscovered)]
    assert [e.info.gid for e in seen] == ["a/1"] or net.nodes["b"].group_info("a/1") is not None
    for pid in ("b", "c"):
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    assert net.nodes["a"].members(gid) == ["a", "b", "c"]
    assert net.nodes["c"].members(gid) == ["a", "b", "c"]
    q = net.send("a", gid, b"Did you visit Delhi?")
    q2 = net.send("a", gid, b"Did you visit Chennai?")
    net.send("b", gid, b"Yes", reply_to=q)
    net.send("c", gid, b"No", reply_to=q2)
    net.run(1.0)
    net.check_group(gid, ["a", "b", "c"])


def test_lossy_network_repairs_everything() -> None:
    net = Net(seed=5, loss=0.2)
    gid = group_of_three(net)
    last: dict[str, MessageId] = {}
    for i in range(60):
        sender = "abc"[i % 3]
        parent = last.get("abc"[(i + 1) % 3])
        last[sender] = net.send(sender, gid, f"m{i}".encode(), reply_to=parent)
        net.run(0.01)
    net.run(5.0)
    net.check_group(gid, ["a", "b", "c"])
    assert sum(n.group_stats(gid)["nacks_sent"] for n in net.nodes.values()) > 0


def test_late_joiner_catches_up_on_history() -> None:
    net = Net(seed=7)
    net.add("a")
    net.add("b")
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.3)
    net.do("b", lambda n: n.join_group(gid, net.now))
    net.run(0.5)
    prev = None
    for i in range(200):
        prev = net.send("a" if i % 2 else "b", gid, b"x" * 50, reply_to=prev)
    net.run(1.0)
    net.add("z")
    net.run(0.5)
    net.do("z", lambda n: n.join_group(gid, net.now))
    net.run(3.0)
    net.check_group(gid, ["a", "b", "z"])


def test_unanswered_sync_request_is_not_repeated_once_live_traffic_arrives() -> None:
    # b's catch-up request is lost; then a streams. Repeating the request now would
    # make a resend everything still in flight to b (seen as 16k duplicate records per
    # receiver in the throughput bench); a's status and data high-waters let gap
    # repair fetch what b really misses instead.
    net = Net(seed=11)
    net.add("a")
    net.add("b")
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.3)
    net.partition(["a"], ["b"])
    net.do("b", lambda n: n.join_group(gid, net.now))
    net.run(0.05)
    net.heal()
    prev = None
    for _ in range(300):
        prev = net.send("a", gid, b"x" * 50, reply_to=prev)
        net.run(0.005)
    net.run(3.0)
    net.check_group(gid, ["a", "b"])
    assert net.nodes["b"].group_stats(gid)["requests_sent"] == 1
    assert net.nodes["a"].group_stats(gid)["messages_sent"] == 0


def test_a_backlogged_sender_batches_four_packets_and_a_lossy_group_still_gets_all() -> None:
    from m2mc.wire.packet import decode

    from .harness import Sent

    net = Net(seed=13, loss=0.05)
    gid = group_of_three(net)
    fragments: list[int] = []
    net.counter = lambda d: fragments.append(decode(d).fragment + 1)
    prev = MessageId("", 0)
    for _ in range(400):  # faster than the network takes them: a backlog builds up
        mid = net.nodes["a"].send(gid, b"y" * 100, net.now, prev)
        net.sent.append(Sent(gid, mid, prev, net.now))
        prev = mid
    net.run(5.0)
    net.check_group(gid, ["a", "b", "c"])
    assert max(fragments) == 4  # bulk batches: four packets each
