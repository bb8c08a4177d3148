"""A total-order sender is paced by the order (group/backlog.py, docs/group.md
section 11), sans-IO.

A sender and two members on a perfect virtual network (m2mc.sim.testing, no delay,
no loss), the sender driven as ``Group.send`` drives it (it sends only while
``backlog.must_wait`` allows). It never gets more than four times
``max_uncommitted`` of its messages ahead of their delivery to itself, every
message is delivered everywhere in one order; and cut off from the majority (its
deliveries stop), it is held for ``send_window_wait`` only, then goes on sending
into the unstamped backlog as before.
"""

from __future__ import annotations

import random

from m2mc.group import backlog
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.group.total.strategy import ORDER_PACE
from m2mc.kinds import Order
from m2mc.ordering import MessageId
from m2mc.wire.m2mp import M2MPConfig

from .medium import Medium

GID = "paced"
UNCOMMITTED = 8
LIMIT = ORDER_PACE * UNCOMMITTED
SIZE = 100
WAIT = 0.5


def make(pid: str) -> GroupNode:
    node = GroupNode(pid, rng=random.Random(pid),
                     config=GroupConfig(max_uncommitted=UNCOMMITTED, send_window_wait=WAIT),
                     m2mp_config=M2MPConfig(redundancy=1, flow_control=False))
    node.output.record_delivered = True
    return node


def delivered(node: GroupNode) -> list[MessageId]:
    return node.output.delivered_ids.get(GID, [])


def own_delivered(node: GroupNode) -> int:
    return max((m.seq for m in delivered(node) if m.pid == node.pid), default=0)


def joined() -> tuple[Medium, GroupNode, GroupNode, GroupNode]:
    s, a, b = make("s"), make("a"), make("b")
    medium = Medium([s, a, b])
    medium.call(s, lambda n, now: n.join_group(GID, now, order=Order.TOTAL))
    for node in (a, b):
        medium.call(node, lambda n, now: n.join_group(GID, now, order=Order.TOTAL))
    # The log is founded (a group joined by name: after sequencer_timeout), and a first
    # message of the sender's is ordered, as an application would wait for.
    medium.call(s, lambda n, now: n.send(GID, b"ready", now))
    for _ in range(400):
        medium.step(0.05)
        if all(len(delivered(n)) == 1 for n in medium.nodes):
            break
    assert all(len(delivered(n)) == 1 for n in medium.nodes)
    return medium, s, a, b


def send_while_allowed(medium: Medium, s: GroupNode, count: int, paced: bool = True) -> int:
    """Send up to ``count`` messages as Group.send would (``paced``: never past the
    order's pace); returns how many were sent (the others wait)."""
    sent = 0
    while sent < count and not backlog.must_wait(s, SIZE):
        medium.call(s, lambda n, now: n.send(GID, bytes(SIZE), now))
        sent += 1
        assert not paced or s.groups[GID].mop.own_seq - own_delivered(s) <= LIMIT
    return sent


def test_the_sender_stays_a_pace_ahead_of_its_deliveries_and_all_is_delivered() -> None:
    medium, s, a, b = joined()
    total = 10 * LIMIT
    sent = 0
    blocked = 0
    for _ in range(20_000):
        if sent == total:
            break
        n = send_while_allowed(medium, s, total - sent)
        sent += n
        if sent < total:
            blocked += 1
            assert s.groups[GID].ordering.blocked and not backlog.room_made(s)
        medium.step()
    assert sent == total and blocked  # it waited, and went on each time
    for _ in range(200):
        medium.step(0.01)
    assert len(delivered(s)) == total + 1
    assert delivered(a) == delivered(b) == delivered(s)  # one order everywhere


def test_without_a_majority_the_sender_is_held_for_the_wait_only() -> None:
    medium, s, a, b = joined()
    medium.net.hold("a")  # both others silent: no majority orders anything
    medium.net.hold("b")
    sent = send_while_allowed(medium, s, 10 * LIMIT)
    assert sent <= LIMIT and s.groups[GID].ordering.blocked
    blocked_at = medium.now
    while backlog.must_wait(s, SIZE):
        medium.step(0.01)
        assert medium.now < blocked_at + WAIT + 0.1
    # Its deliveries have not moved for the wait: it sends on, the messages unstamped.
    more = send_while_allowed(medium, s, 3 * LIMIT, paced=False)
    assert more == 3 * LIMIT
    medium.net.release("a")
    medium.net.release("b")
    for _ in range(600):
        medium.step(0.05)
        if len(delivered(a)) == 1 + sent + more:
            break
    assert delivered(a) == delivered(b) == delivered(s)
    assert len(delivered(s)) == 1 + sent + more
