"""A process that left a group and comes back is counted in again at once, even
when it lost the version of its leave: its JOIN carries a version above every one
of its own that the others know (kept in the store, learned from discovery), and
news of an old leave of its own is answered by joining again above it. Until it
is counted in, the members refuse its catch-up request (MSP answers members only)."""

from __future__ import annotations

from m2mc.group.config import GroupConfig
from m2mc.group.events import CatchUpProgress
from m2mc.ordering import MessageId
from m2mc.store import MemoryStore

from .harness import Net


def _left_then_missed(net: Net, missed: int) -> None:
    for pid in "abc":
        net.add(pid)
    for pid in "abc":
        net.do(pid, lambda n: n.join_group("g", net.now, order="sb"))
    net.run(1.0)
    net.do("c", lambda n: n.leave_group("g", net.now))
    net.run(4.0)
    prev: MessageId | None = None
    for _ in range(missed):
        prev = net.send("a", "g", b"x" * 50, reply_to=prev)
    net.run(1.0)
    net.crash("c")


def _rejoin(net: Net) -> None:
    net.run(0.1)
    net.events.clear()
    net.do("c", lambda n: n.join_group("g", net.now, order="sb"))
    net.run(3.0)


def test_a_restarted_leaver_is_counted_in_and_caught_up_by_msp() -> None:
    net = Net(seed=1)
    _left_then_missed(net, 500)
    net.restart("c")  # its log; the GIIT forgot the left group when it advertised
    _rejoin(net)
    for pid in "abc":
        assert net.nodes[pid].members("g") == ["a", "b", "c"]
    net.check_group("g", ["a", "b", "c"])
    progress = [e for e in net.events["c"] if isinstance(e, CatchUpProgress)]
    assert progress and progress[-1].done and progress[-1].recovered == 500
    assert net.nodes["c"].group_stats("g")["nacks_sent"] == 0  # MSP did it, not repair


def test_a_leaver_back_without_its_log_joins_again_above_its_old_leave() -> None:
    # No advertisement on start: c cannot learn its old version from discovery.
    net = Net(seed=2, config=lambda: GroupConfig(advertise_on_start=False))
    _left_then_missed(net, 200)
    net.add("c", store=MemoryStore())  # same pid, nothing remembered
    _rejoin(net)
    c = net.nodes["c"]
    assert c.node_stats()["refuted"] >= 1  # heard of its old leave, joined above it
    for pid in "abc":
        assert net.nodes[pid].members("g") == ["a", "b", "c"]
    net.check_group("g", ["a", "b", "c"])
