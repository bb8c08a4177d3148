"""``send_room`` (m2mc.group.backlog): the sends it counts are sure to pass the
back-pressure check, so the API may skip the check for them and a sender waits
exactly when it waited before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.group.backlog import RECORD_OVERHEAD, must_wait, send_room
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.ordering import ROOT
from m2mc.wire.packet import HEADER_SIZE

from .harness import Net, group_of_three

_burst = st.tuples(st.integers(1, 3000), st.lists(st.floats(0.0, 1.0), min_size=1,
                                                   max_size=60), st.booleans())
_steps = st.lists(st.one_of(_burst, st.sampled_from([0.0005, 0.003, 0.05])),
                  min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(steps=_steps, backlog=st.integers(2, 64), backlog_bytes=st.integers(500, 40_000),
       window=st.integers(0, 30_000), loss=st.sampled_from([0.0, 0.1]))
def test_every_send_counted_by_send_room_passes_the_check(
        steps: list[object], backlog: int, backlog_bytes: int, window: int,
        loss: float) -> None:
    net = Net(seed=backlog, tracing=False, config=lambda: GroupConfig(
        send_backlog=backlog, send_backlog_bytes=backlog_bytes, send_window_bytes=window))
    _check_bursts(net, group_of_three(net, "room"), loss, steps)


@settings(max_examples=40, deadline=None)
@given(steps=_steps, backlog=st.integers(2, 256), uncommitted=st.integers(1, 8),
       window=st.sampled_from([0, 30_000]), loss=st.sampled_from([0.0, 0.1]))
def test_in_total_order_the_pacing_by_the_order_is_counted_too(
        steps: list[object], backlog: int, uncommitted: int, window: int,
        loss: float) -> None:
    # A total-order sender waits while 4 * max_uncommitted of its messages are not
    # delivered to itself (docs/group.md section 11): bursts of up to 60 reach that.
    net = Net(seed=backlog, tracing=False, config=lambda: GroupConfig(
        send_backlog=backlog, max_uncommitted=uncommitted, send_window_bytes=window))
    gid = group_of_three(net, "room", order="total")
    node = net.nodes["a"]
    assert node.groups[gid].mop.order == "total"
    _check_bursts(net, gid, loss, steps)


def _check_bursts(net: Net, gid: str, loss: float, steps: list[object]) -> None:
    """Bursts of sends by a, each as long as ``send_room`` says (none while the check
    says wait), with time passing between them; every send counted must pass the
    check, and the group ends with every message delivered everywhere."""
    net.loss = loss  # (after the joins, which this test is not about)
    for step in steps:
        if isinstance(step, float):
            net.run(step)
            continue
        assert isinstance(step, tuple)
        size, fractions, reply = step

        def burst(node: GroupNode, size: int = size, fractions: list[float] = fractions,
                  reply: bool = reply) -> int:
            if must_wait(node, size):
                return 0  # the API would wait here
            room = send_room(node, size)
            theirs = [m for m in net.delivered["a"].get(gid, []) if m.pid != "a"]
            parent = theirs[-1] if reply and theirs else ROOT
            sent = 0
            for fraction in fractions[:room]:
                payload = b"p" * int(size * fraction)
                assert not must_wait(node, len(payload)), (room, sent)
                node.send(gid, payload, net.now, parent)
                sent += 1
            return sent

        net.do("a", burst)
    net.run(5.0)
    net.check_group(gid, ["a", "b", "c"])


def test_an_idle_node_has_room_for_a_whole_backlog_of_small_messages() -> None:
    net = Net(seed=1, tracing=False)
    gid = group_of_three(net, "room")
    node = net.nodes["a"]
    config = node.config
    assert not must_wait(node, 100)
    by_bytes = (config.send_backlog_bytes - 100 - HEADER_SIZE) // (100 + RECORD_OVERHEAD) + 1
    assert send_room(node, 100) == min(config.send_backlog, by_bytes)
    # Each send counts it down; any other step of the node sets it to 0.
    node.send_room, node.send_room_size = 10, 100
    node.send(gid, b"x", net.now, ROOT)
    assert node.send_room == 9
    node.events()
    assert node.send_room == 0


def test_a_total_order_sender_has_room_up_to_its_pacing_limit() -> None:
    net = Net(seed=4, tracing=False, config=lambda: GroupConfig(max_uncommitted=4))
    gid = group_of_three(net, "room", order="total")
    node = net.nodes["a"]
    strategy = node.groups[gid].ordering
    assert strategy.send_room() == 4 * 4 - 1  # nothing of ours undelivered
    assert send_room(node, 100) <= 15
    for _ in range(15):  # sent, none delivered here yet
        assert not must_wait(node, 100)
        node.send(gid, b"x" * 100, net.now, ROOT)
    assert strategy.send_room() == 0
    net.run(1.0)  # ordered and delivered: room again
    assert strategy.send_room() == 15


def test_a_node_in_a_group_of_another_order_checks_every_send() -> None:
    net = Net(seed=2, tracing=False)
    for pid in ("a", "b"):
        net.add(pid)
    net.do("a", lambda n: n.create_group("causal", net.now, order="causal"))
    net.run(0.5)
    assert send_room(net.nodes["a"], 100) == 0


def test_a_tracing_node_counts_its_room_down_too() -> None:
    # A tracing node takes each send in at once; its room still counts down by one,
    # so the API does not work it out again for every send.
    net = Net(seed=3, tracing=True)
    gid = group_of_three(net, "room")
    node = net.nodes["a"]
    node.send_room, node.send_room_size = 10, 100
    node.send(gid, b"x", net.now, ROOT)
    assert node.send_room == 9
