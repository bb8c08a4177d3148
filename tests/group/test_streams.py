"""Group messages sent as streams (m2mc.group.streams, docs/group.md section 12), on the
deterministic harness: loss, reordering, crashes, late joiners, bounds.

What a user sees: every member ends with the body, byte for byte, or with an error
naming why it never will; the head is ordered like any message; a lost chunk is
fetched again from whoever holds it; a member holds a bounded window of a stream in
memory, the bytes go to its body store.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.group.config import GroupConfig
from m2mc.group.events import StreamUpdate
from m2mc.group.manager import GroupNode
from m2mc.group.stream_codec import StreamData, StreamNack
from m2mc.ordering import MessageId
from m2mc.store.bodies import FileBodyStore

from .harness import Net, Sent

CHUNK = 4_000


def config(**overrides: object) -> GroupConfig:
    values: dict[str, object] = {"stream_chunk_bytes": CHUNK, "stream_window": 16,
                                 "stream_timeout": 5.0}
    values.update(overrides)
    return GroupConfig(**values)  # type: ignore[arg-type]


def group_of(net: Net, pids: list[str]) -> str:
    for pid in pids:
        net.add(pid)
    gid = str(net.do(pids[0], lambda n: n.create_group("files", net.now)))
    for pid in pids[1:]:
        net.do(pid, lambda n: n.join_group(gid, net.now, order="sb"))
    net.run(2.0)
    return gid


def stream(net: Net, pid: str, gid: str, body: bytes, cuts: list[int] | None = None,
           reply_to: MessageId | None = None, close: bool = True) -> MessageId:
    """Send ``body`` as a stream from ``pid``, written in pieces cut at ``cuts``."""
    mid = net.do(pid, lambda n: n.streams.open(gid, net.now, reply_to))
    assert isinstance(mid, MessageId)
    net.sent.append(Sent(gid, mid, reply_to or MessageId("", 0), net.now))
    bounds = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts or [])})
    for lo, hi in itertools.pairwise(bounds):
        net.do(pid, lambda n, lo=lo, hi=hi: n.streams.write(gid, mid, body[lo:hi], net.now))
        net.run(0.01)
    if close:
        net.do(pid, lambda n: n.streams.close(gid, mid, net.now))
    return mid


def body_at(node: GroupNode, gid: str, mid: MessageId) -> bytes | None:
    key = (gid, mid.pid, mid.seq)
    info = node.streams.store.info(key)
    if info is None:
        return None
    data = node.streams.store.read(key, 0, info.size)
    assert data is not None and hashlib.sha256(data).digest() == info.sha256
    return data


def updates(net: Net, pid: str, mid: MessageId) -> list[StreamUpdate]:
    return [e for e in net.events.get(pid, []) if isinstance(e, StreamUpdate) and e.mid == mid]


@settings(max_examples=25, deadline=None)
@given(size=st.integers(0, 40_000), cuts=st.lists(st.integers(0, 40_000), max_size=8),
       loss=st.sampled_from([0.0, 0.05, 0.1]), seed=st.integers(1, 10_000))
def test_a_stream_and_a_whole_message_of_the_same_bytes_arrive_the_same(
        size: int, cuts: list[int], loss: float, seed: int) -> None:
    """Pieces cut anywhere, datagrams lost and reordered (random delays): every member
    ends with the stream's body exactly, and the same bytes sent whole arrive equal.
    (A whole message of 40 KB is 80 M2MP packets, lost whole if any is: at much more
    loss its repair takes minutes, which is what streams are for.)"""
    net = Net(seed=seed, config=config, batch_deliveries=False)
    gid = group_of(net, ["a", "b", "c"])
    net.loss = loss
    body = random.Random(seed).randbytes(size)
    mid = stream(net, "a", gid, body, cuts)
    whole = net.send("a", gid, body)
    net.run(60.0)
    for pid in ("b", "c"):
        assert body_at(net.nodes[pid], gid, mid) == body
        assert updates(net, pid, mid)[-1] == StreamUpdate(gid, mid, size, done=True)
    net.check_group(gid, ["a", "b", "c"])  # the head and the whole message, once each
    for pid in ("b", "c"):
        assert whole in net.delivered[pid][gid]


def test_lost_chunks_are_fetched_again_from_whoever_holds_them() -> None:
    net = Net(seed=4, config=config)
    gid = group_of(net, ["a", "b", "c", "d"])
    net.loss = 0.1
    body = random.Random(4).randbytes(300_000)
    mid = stream(net, "a", gid, body, [70_001])
    net.run(30.0)
    stats = {pid: net.nodes[pid].streams.stats for pid in "abcd"}
    for pid in "bcd":
        assert body_at(net.nodes[pid], gid, mid) == body
    assert sum(s.stream_nacks_sent for s in stats.values()) > 0
    assert sum(s.stream_chunks_repaired for s in stats.values()) > 0
    assert sum(stats[p].stream_chunks_repaired for p in "bcd") > 0  # receivers serve too


def test_a_reply_to_a_stream_is_delivered_after_its_head() -> None:
    net = Net(seed=5, config=config)
    gid = group_of(net, ["a", "b", "c"])
    net.loss = 0.1
    mid = stream(net, "a", gid, bytes(50_000))
    net.run(0.5)
    net.send("b", gid, b"got it", reply_to=mid)
    net.run(20.0)
    net.check_group(gid, ["a", "b", "c"])  # parents first, everything once


def test_a_sender_that_crashes_mid_stream_leaves_its_readers_an_error_not_a_short_body(
) -> None:
    net = Net(seed=6, config=config)
    gid = group_of(net, ["a", "b", "c"])
    mid = stream(net, "a", gid, random.Random(6).randbytes(40_000), close=False)
    net.run(0.5)
    net.crash("a")
    net.run(10.0)
    for pid in ("b", "c"):
        assert body_at(net.nodes[pid], gid, mid) is None
        last = updates(net, pid, mid)[-1]
        assert last.error == "timeout" and not last.done
        assert net.nodes[pid].streams.store.held_bytes == 0  # the partial body is gone


def test_a_stream_its_sender_gives_up_fails_at_once_for_its_readers() -> None:
    net = Net(seed=7, config=config)
    gid = group_of(net, ["a", "b"])
    mid = stream(net, "a", gid, bytes(20_000), close=False)
    net.do("a", lambda n: n.streams.abort(gid, mid, net.now))
    net.run(0.5)
    assert updates(net, "b", mid)[-1].error == "aborted"


def test_a_late_joiner_gets_the_body_from_a_member_when_the_sender_is_gone() -> None:
    net = Net(seed=8, config=config)
    gid = group_of(net, ["a", "b"])
    body = random.Random(8).randbytes(90_000)
    mid = stream(net, "a", gid, body)
    net.run(5.0)
    net.crash("a")  # the sender is gone: b, which received it, serves it
    net.add("late")
    net.do("late", lambda n: n.join_group(gid, net.now, order="sb"))
    net.run(10.0)
    late = net.nodes["late"]
    assert mid in net.delivered["late"][gid]  # the head came by MSP, like any message
    assert body_at(late, gid, mid) == body  # and with it the body, from b
    assert net.nodes["b"].streams.stats.stream_chunks_repaired > 0


def test_a_body_evicted_here_is_fetched_again_when_a_reader_wants_it() -> None:
    net = Net(seed=13, config=config)
    gid = group_of(net, ["a", "b"])
    body = random.Random(13).randbytes(30_000)
    mid = stream(net, "a", gid, body)
    net.run(5.0)
    b = net.nodes["b"]
    b.streams.store.drop((gid, mid.pid, mid.seq))  # as the store's bound would
    head = b.store.load_messages(gid)[0].message.payload
    net.do("b", lambda n: n.streams.want(gid, mid, head, net.now))
    net.run(5.0)
    assert body_at(b, gid, mid) == body


def test_a_receiver_holds_a_window_of_indexes_the_bytes_go_to_its_store(tmp_path: Path
                                                                         ) -> None:
    """4 MB through a lossy network into a file store. The receiver's memory for it is
    bounded whatever the body's size: its stream state holds at most ``stream_window``
    early chunk indexes (the bytes go to the file), and its M2MP layer the chunks being
    reassembled, at most ``max_partial_bytes`` (here 48 KB: twelve chunks; those it
    abandons at the bound are fetched again like lost ones)."""
    net = Net(seed=9, config=config, loss=0.0)
    gid = group_of(net, ["a", "b"])
    node = net.nodes["b"]
    node.streams.store = FileBodyStore(tmp_path / "bodies", 1 << 30)
    bound = 48_000
    node.m2mp._reassembler.limits.max_partial_bytes = bound  # (the harness sets no M2MP)
    net.loss = 0.05
    body = random.Random(9).randbytes(4_000_000)
    most_early = most_partial = 0
    receive = node.receive_datagram

    def watched(datagram: bytes, now: float) -> None:
        nonlocal most_early, most_partial
        receive(datagram, now)
        for st_ in node.streams.incoming.values():
            most_early = max(most_early, len(st_.have))
        most_partial = max(most_partial, node.m2mp.partial_bytes)

    node.receive_datagram = watched  # type: ignore[method-assign]
    mid = stream(net, "a", gid, body, [1_000_000, 2_000_000, 3_000_000])
    net.run(60.0)
    assert body_at(node, gid, mid) == body
    assert most_early <= config().stream_window
    assert most_partial <= bound
    files = sorted(p.suffix for p in (tmp_path / "bodies").iterdir())
    assert files == [".body", ".json"]


def test_chunks_of_outsiders_and_streams_past_the_bound_are_refused() -> None:
    net = Net(seed=10, config=lambda: config(max_streams=2))
    gid = group_of(net, ["a", "b"])
    node = net.nodes["b"]
    inst = node.groups[gid]
    streams = node.streams
    streams.on_body(inst, StreamData("x", "x", 1, 0, CHUNK, bytes(CHUNK)), net.now)
    assert streams.stats.stream_refused == 1 and not streams.incoming  # not a member
    for seq in (1, 2, 3):
        streams.on_body(inst, StreamData("a", "a", 100 + seq, 0, CHUNK, bytes(CHUNK)), net.now)
    assert len(streams.incoming) == 2 and streams.stats.stream_refused == 2
    streams.on_body(inst, StreamData("a", "a", 101, 40, CHUNK, bytes(CHUNK)), net.now)
    assert streams.stats.stream_chunks_refused == 1  # past the window: asked for again later
    assert max(st_.seen for st_ in streams.incoming.values()) == 41


def test_a_nack_for_everything_schedules_at_most_max_stream_repairs() -> None:
    net = Net(seed=11, config=lambda: config(max_stream_repairs=10))
    gid = group_of(net, ["a", "b"])
    mid = stream(net, "a", gid, bytes(200_000))
    net.run(5.0)
    node = net.nodes["a"]
    node.streams.on_body(node.groups[gid], StreamNack("b", "a", mid.seq, [(0, 2**32 - 1)]),
                         net.now)
    assert len(node.streams.repairs) == 10
    assert node.streams.stats.stream_repairs_refused == 1


def test_a_body_larger_than_the_store_fails_with_store_full() -> None:
    net = Net(seed=12, config=config)
    gid = group_of(net, ["a", "b"])
    net.nodes["b"].streams.store.limit = 50_000  # the sender's store holds it; b's cannot
    mid = stream(net, "a", gid, bytes(120_000))
    net.run(5.0)
    assert updates(net, "b", mid)[-1].error == "store_full"
    assert net.nodes["b"].streams.store.held_bytes == 0
