"""Receiver-paced flow control between group nodes (group/window.py), sans-IO.

A sender and two members on a perfect virtual network (m2mc.sim.testing, no delay,
no loss); one member's statuses are held back for a while, as if its
acknowledgements were slow or lost. The sender, driven as ``Group.send`` drives it
(it sends only while ``backlog.must_wait`` allows), stops a window ahead of that
member, goes on as soon as the member speaks again, and a member silent for
``send_window_wait`` is left out instead of stalling it.
"""

from __future__ import annotations

import random

from m2mc.group import backlog
from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.kinds import Order
from m2mc.wire.m2mp import M2MPConfig

from .medium import Medium

GID = "window"
WINDOW = 64 * 1024
SIZE = 4000
WAIT = 0.5


def make(pid: str) -> GroupNode:
    node = GroupNode(pid, rng=random.Random(pid),
                     config=GroupConfig(send_window_bytes=WINDOW, send_window_wait=WAIT),
                     m2mp_config=M2MPConfig(redundancy=1, flow_control=False))
    node.batch_deliveries = True
    return node


def send(medium: Medium, node: GroupNode) -> None:
    medium.call(node, lambda n, now: n.send(GID, bytes(SIZE), now))


def joined() -> tuple[Medium, GroupNode, GroupNode, GroupNode]:
    s, a, b = make("s"), make("a"), make("b")
    medium = Medium([s, a, b])
    for node in medium.nodes:
        medium.call(node, lambda n, now: n.join_group(GID, now, order=Order.SB))
    for _ in range(200):
        medium.step(0.05)
        if all(sorted(n.members(GID)) == ["a", "b", "s"] for n in medium.nodes):
            break
    assert all(sorted(n.members(GID)) == ["a", "b", "s"] for n in medium.nodes)
    return medium, s, a, b


def sends_until_blocked(medium: Medium, s: GroupNode, limit: int = 10_000) -> int:
    sent = 0
    while not backlog.must_wait(s, SIZE) and sent < limit:
        send(medium, s)
        sent += 1
        medium.step()
    return sent


def test_the_sender_waits_a_window_ahead_of_a_slow_member_then_goes_on() -> None:
    medium, s, a, b = joined()
    window = s.groups[GID].window
    # Both members read and acknowledge (a status per quarter window): nothing waits.
    assert sends_until_blocked(medium, s, limit=200) == 200
    assert not window.blocked
    medium.mute("b")  # b reads on, but its statuses are held back
    sent = sends_until_blocked(medium, s)
    assert window.blocked and backlog.must_wait(s, SIZE) and not backlog.room_made(s)
    assert sent <= WINDOW // SIZE + 1  # at most a window past b's last status
    for _ in range(10):
        medium.step(0.01)
    assert window.blocked  # a status of a alone makes no room
    medium.unmute("b")  # b's statuses arrive: it had read everything
    medium.step()
    assert not window.blocked and backlog.room_made(s)
    delivered = b.groups[GID].delivered_count
    assert delivered == a.groups[GID].delivered_count >= 200 + sent


def test_a_silent_member_holds_the_sender_for_the_wait_only() -> None:
    medium, s, _a, _b = joined()
    window = s.groups[GID].window
    sends_until_blocked(medium, s, limit=200)
    medium.mute("b")  # b is gone (crashed, out of range): not a word from it
    sends_until_blocked(medium, s)
    blocked_at = medium.now
    assert window.blocked
    while window.blocked:
        medium.step(0.01)
        assert medium.now < blocked_at + WAIT + 0.1
    assert s.group_stats(GID)["window_laggards"] == 1
    assert sends_until_blocked(medium, s, limit=50) == 50  # a alone paces it now


def test_statuses_come_once_per_quarter_window_of_data() -> None:
    medium, s, a, _b = joined()
    count = 0
    real = a.groups[GID].make_status

    def counting(fill: bool = True, bare: bool = False) -> object:
        nonlocal count
        count += 1
        return real(fill, bare)

    a.groups[GID].make_status = counting  # type: ignore[method-assign]
    messages = 4 * WINDOW // SIZE  # four windows of data
    for _ in range(messages):
        send(medium, s)
        medium.step(0.0001)  # too soon for periodic statuses
    # A status once a quarter window (16 KiB) has been read since the last one: every
    # fifth 4,000-byte message here, so 12 or 13 for 256,000 bytes.
    quarter = WINDOW // 4
    total = messages * SIZE
    assert total // (quarter + SIZE) <= count <= -(-total // quarter)


async def test_a_node_fits_its_window_to_its_socket_buffer() -> None:
    """Half of what the socket holds (the kernel's count): a receiver whose buffer is
    like ours takes a window without dropping; a host at Linux's default buffer gets
    a small window, one with the 4 MiB the channel asks for a larger one."""
    import socket

    from m2mc.api import Node, NodeConfig
    from m2mc.demo.tour import random_multicast_url

    url = random_multicast_url(random.Random())
    async with Node(NodeConfig(channel=url)) as node:
        stack = node._stack
        assert stack is not None
        sock = node._driver.channel._sock  # type: ignore[union-attr, attr-defined]
        held = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert stack.window_bytes == min(GroupConfig().send_window_bytes, held // 2)
        group = await node.create_group("fitted")
        assert stack.groups[group.gid].window.limit == stack.window_bytes
    async with Node(NodeConfig(channel="mem://fit-window")) as node:
        assert node._stack is not None
        assert node._stack.window_bytes == GroupConfig().send_window_bytes  # no buffer


async def test_a_node_fits_its_m2mp_flow_window_to_its_socket_buffer() -> None:
    """M2MP's window of packets awaiting their loopback grows with the receive buffer
    (docs/decisions.md): a 64 KiB message's 132 packets leave at once where the
    socket holds the 4 MiB the channel asks for, a host at Linux's default buffer
    keeps 64, and a window set in the configuration is kept."""
    from m2mc.api import Node, NodeConfig
    from m2mc.demo.tour import random_multicast_url
    from m2mc.runtime.endpoint import DEFAULT_FLOW_WINDOW, flow_window_for
    from m2mc.wire.m2mp import M2MPConfig

    url = random_multicast_url(random.Random())
    async with Node(NodeConfig(channel=url)) as node:
        assert node._stack is not None
        held = node._driver.channel.receive_buffer  # type: ignore[union-attr]
        assert held
        assert node._stack.m2mp.flow_window == flow_window_for(held)
    async with Node(NodeConfig(channel=url + "&rcvbuf=65536")) as small:
        assert small._stack is not None
        assert small._stack.m2mp.flow_window == DEFAULT_FLOW_WINDOW
    async with Node(NodeConfig(channel=url, m2mp=M2MPConfig(flow_window=8))) as fixed:
        assert fixed._stack is not None
        assert fixed._stack.m2mp.flow_window == 8
    async with Node(NodeConfig(channel="mem://fit-flow-window")) as node:
        assert node._stack is not None
        assert node._stack.m2mp.flow_window == DEFAULT_FLOW_WINDOW  # no socket


def test_leaving_a_group_whose_window_is_full_holds_no_other_send() -> None:
    """The send window is checked node-wide (as the backlog): a group left while its
    window was full must not hold sends to the node's other groups while it lingers."""
    medium, s, _a, _b = joined()
    sends_until_blocked(medium, s, limit=200)
    medium.mute("b")
    sends_until_blocked(medium, s)
    assert backlog.must_wait(s, SIZE)
    medium.call(s, lambda n, now: n.leave_group(GID, now))
    assert s.groups[GID].lingering_until is not None  # still there, answering repairs
    assert not backlog.must_wait(s, SIZE)
