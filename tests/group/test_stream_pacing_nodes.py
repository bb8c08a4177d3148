"""Streams paced by their receivers, with real nodes on the deterministic harness
(m2mc.group.stream_pace, STREAM_ACK; docs/group.md section 12, "Pacing").

The sender writes each chunk only when ``GroupStreams.paced`` allows, as
``Group.send_stream`` does. What a user sees: a receiver slower than the sender,
behind a bounded socket buffer, gets the body whole without refusing a chunk (the
same transfer unpaced overflows its buffer and needs repairs); a receiver that crashed holds
the sender back once, for the stated wait, and the others get the body; loss is
still repaired.
"""

from __future__ import annotations

import random
from collections import deque

from m2mc.group.config import GroupConfig
from m2mc.group.manager import GroupNode
from m2mc.ordering import MessageId

from .harness import Net
from .test_streams import CHUNK, body_at, group_of

WAIT = 2 * GroupConfig().send_window_wait  # the pace's bound on a silent receiver


def config(**overrides: object) -> GroupConfig:
    values: dict[str, object] = {"stream_chunk_bytes": CHUNK, "stream_window": 16,
                                 "stream_timeout": 10.0}
    values.update(overrides)
    return GroupConfig(**values)  # type: ignore[arg-type]


def paced_stream(net: Net, pid: str, gid: str, body: bytes, *, paced: bool = True
                 ) -> tuple[MessageId, float]:
    """Send ``body`` as Group.send_stream does: each chunk once the pace allows (or not,
    ``paced`` False: as before pacing). Returns the message and the longest the sender
    waited at once."""
    mid = net.do(pid, lambda n: n.streams.open(gid, net.now, None))
    assert isinstance(mid, MessageId)
    longest = 0.0
    offsets = [*range(0, len(body), CHUNK), None]  # None: the last chunk (close)
    for offset in offsets:
        began = net.now
        while paced and net.do(pid, lambda n: n.streams.paced(gid, mid, net.now)):
            net.run(0.005)
        longest = max(longest, net.now - began)
        if offset is None:
            net.do(pid, lambda n: n.streams.close(gid, mid, net.now))
        else:
            net.do(pid, lambda n, o=offset: n.streams.write(gid, mid, body[o:o + CHUNK],
                                                           net.now))
        net.run(0.0005)  # the sender's own pace: 2,000 chunks a second at most
    return mid, longest


class SlowReceiver:
    """A node that reads ``rate`` datagrams a second from a socket buffer of
    ``capacity`` datagrams; what does not fit is dropped, as the kernel does."""

    def __init__(self, node: GroupNode, rate: float, capacity: int) -> None:
        self.receive = node.receive_datagram
        self.timer = node.on_timer
        self.rate = rate
        self.capacity = capacity
        self.queue: deque[bytes] = deque()
        self.dropped = 0
        self.clock = 0.0
        node.receive_datagram = self.arrive  # type: ignore[method-assign]
        node.on_timer = self.tick  # type: ignore[method-assign]

    def arrive(self, datagram: bytes, now: float) -> None:
        self.drain(now)
        if not self.queue:  # (idle until now: no credit saved up)
            self.clock = max(self.clock, now - 1.0 / self.rate)
        if len(self.queue) >= self.capacity:
            self.dropped += 1
        else:
            self.queue.append(datagram)

    def tick(self, now: float) -> None:
        self.drain(now)
        self.timer(now)

    def drain(self, now: float) -> None:
        while self.queue and self.clock + 1.0 / self.rate <= now:
            self.clock += 1.0 / self.rate
            self.receive(self.queue.popleft(), now)


def slow_pair(seed: int) -> tuple[Net, str, SlowReceiver]:
    net = Net(seed=seed, config=config)
    gid = group_of(net, ["a", "b"])
    # 3,000 datagrams a second (a chunk is 9): a third of what the sender could send;
    # a buffer of 300 datagrams (33 chunks), more than the pace's window of 16 chunks.
    return net, gid, SlowReceiver(net.nodes["b"], 3000.0, 300)


def test_a_slow_receiver_gets_the_body_whole_and_refuses_nothing() -> None:
    net, gid, slow = slow_pair(21)
    body = random.Random(21).randbytes(200 * CHUNK)
    mid, _ = paced_stream(net, "a", gid, body)
    net.run(10.0)
    b, a = net.nodes["b"], net.nodes["a"]
    assert body_at(b, gid, mid) == body
    assert b.streams.stats.stream_chunks_refused == 0
    assert slow.dropped == 0  # the window fits its buffer: nothing to repair
    assert b.streams.stats.stream_nacks_sent == 0
    assert a.streams.stats.stream_paced > 0 and a.streams.stats.stream_laggards == 0
    assert b.streams.stats.stream_acks_sent > 0


def test_the_same_receiver_unpaced_overflows_its_buffer_and_needs_repairs() -> None:
    """The reference: the same transfer written as fast as the sender goes, as before
    pacing. (The chunks it refuses past its window: the model of test_stream_pace.py.)"""
    net, gid, slow = slow_pair(21)
    body = random.Random(21).randbytes(200 * CHUNK)
    mid, _ = paced_stream(net, "a", gid, body, paced=False)
    net.run(30.0)
    b = net.nodes["b"]
    assert slow.dropped > 0
    assert b.streams.stats.stream_nacks_sent > 0
    assert body_at(b, gid, mid) == body  # (repair still gets it there, the long way)


def test_a_receiver_that_crashed_holds_the_sender_for_the_wait_once() -> None:
    net = Net(seed=22, config=config)
    gid = group_of(net, ["a", "b", "c"])
    net.crash("c")  # still a member: it never says a word about the body
    body = random.Random(22).randbytes(100 * CHUNK)
    mid, longest = paced_stream(net, "a", gid, body)
    net.run(5.0)
    a = net.nodes["a"]
    assert body_at(net.nodes["b"], gid, mid) == body
    assert a.streams.stats.stream_laggards == 1  # c, left out once
    assert WAIT <= longest <= WAIT + 0.1  # the one wait, at the first full window
    assert a.streams.silent.of(gid) == frozenset({"c"})  # not waited for next time
    mid2, longest2 = paced_stream(net, "a", gid, body)
    net.run(5.0)
    assert body_at(net.nodes["b"], gid, mid2) == body
    assert longest2 < WAIT and a.streams.stats.stream_laggards == 1


def test_loss_is_repaired_and_nobody_paced_refuses_a_chunk() -> None:
    net = Net(seed=23, config=config)
    gid = group_of(net, ["a", "b", "c"])
    net.loss = 0.1
    body = random.Random(23).randbytes(150 * CHUNK + 123)
    mid, _ = paced_stream(net, "a", gid, body)
    net.run(30.0)
    for pid in ("b", "c"):
        node = net.nodes[pid]
        assert body_at(node, gid, mid) == body
        assert node.streams.stats.stream_chunks_refused == 0
        assert node.streams.stats.stream_nacks_sent > 0
