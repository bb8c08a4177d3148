"""A sender's own messages never stall its node (docs/api.md, docs/decisions.md).

A publisher that only sends and never reads its group: its own copies do not count
against ``max_queued_messages`` (which would stop the node reading the network), so
its sends all go through, the receivers get everything, and the node still takes in
what the others send. Unread own copies have a bound of their own
(``max_queued_own_bytes``, the oldest dropped past it), and ``deliver_own=False``
does not hand them back at all, while the trace still records the sender's delivery
(the docs/interfaces.md §5 checks stay clean).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from m2mc.api import Group, GroupMessage, Node, NodeConfig
from m2mc.api.inbox import OWN_OVERHEAD

from .tracecheck import check, load

LIMIT = 40  # the sender's max_queued_messages
FLOOD = 5 * LIMIT
DEADLINE = 60.0


def _channel() -> str:
    return f"mem://own-{uuid.uuid4().hex[:8]}"


async def _read(group: Group, count: int) -> list[GroupMessage]:
    got: list[GroupMessage] = []
    while len(got) < count:
        got.extend(await group.receive_many(timeout=DEADLINE))
    return got


async def _until(condition: object, what: str) -> None:
    """Poll ``condition()`` (a callable) until it holds, with a generous deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not condition():  # type: ignore[operator]
        assert loop.time() < end, f"not within {DEADLINE} s: {what}"
        await asyncio.sleep(0.01)


async def _flood(sender: Node, receivers: list[Node], **check_each: object) -> tuple[
        Group, list[Group], list[str]]:
    """Everyone joins "bench" by name; the sender sends FLOOD messages as one thread
    (each a reply to the one before) and reads nothing. Returns the groups and texts."""
    group = await sender.join("bench", order="sb")
    theirs = [await r.join("bench", order="sb") for r in receivers]
    await _until(lambda: all(len(g.members) == len(receivers) + 1 for g in [group, *theirs]),
                 "every member knows every other")
    texts = [f"m{i}" for i in range(FLOOD)]
    previous = None
    watch = check_each.get("watch")
    for text in texts:
        previous = await asyncio.wait_for(group.send(text, reply_to=previous), DEADLINE)
        if callable(watch):
            watch()
    return group, theirs, texts


async def test_a_sender_that_never_reads_sends_everything_and_keeps_reading_the_network(
        ) -> None:
    bus = _channel()
    async with Node(NodeConfig(pid="pub", channel=bus, max_queued_messages=LIMIT)) as pub, \
            Node(NodeConfig(pid="r1", channel=bus)) as r1, \
            Node(NodeConfig(pid="r2", channel=bus)) as r2:
        group, theirs, texts = await _flood(pub, [r1, r2])
        for mine in theirs:  # every receiver gets every message, in the thread's order
            assert [m.text for m in await _read(mine, FLOOD)] == texts
        # Its FLOOD unread own copies did not pause it: the receivers' answers reach it.
        for i, mine in enumerate(theirs):
            await mine.send(f"answer {i}")
        await _until(lambda: group.pending() == FLOOD + 2, "the answers reach the sender")
        got = await _read(group, FLOOD + 2)  # read at last: its own copies, then the answers
        assert [m.text for m in got if m.sender == "pub"] == texts
        assert sorted(m.text for m in got if m.sender != "pub") == ["answer 0", "answer 1"]
        assert pub.own_dropped == 0


async def test_unread_own_copies_are_bounded_oldest_dropped() -> None:
    bus = _channel()
    size = len("m100")
    bound = 20 * (size + OWN_OVERHEAD)  # 20 unread own copies
    most = 0

    async with Node(NodeConfig(pid="pub", channel=bus, max_queued_messages=LIMIT,
                               max_queued_own_bytes=bound)) as pub, \
            Node(NodeConfig(pid="r1", channel=bus)) as r1:

        def watch() -> None:
            nonlocal most
            most = max(most, pub.group("bench").pending())

        group, (mine,), texts = await _flood(pub, [r1], watch=watch)
        assert [m.text for m in await _read(mine, FLOOD)] == texts
        assert most <= 20
        assert pub.own_dropped > 0
        kept = await _read(group, group.pending())
        assert len(kept) + pub.own_dropped == FLOOD
        assert [m.text for m in kept] == texts[-len(kept):]  # the newest, in order


async def test_deliver_own_false_queues_nothing_and_the_trace_stays_valid(
        tmp_path: Path) -> None:
    bus = _channel()
    async with Node(NodeConfig(pid="pub", channel=bus, max_queued_messages=LIMIT,
                               deliver_own=False, trace_dir=tmp_path, run_id="own",
                               trace_flush_every=1)) as pub, \
            Node(NodeConfig(pid="r1", channel=bus, trace_dir=tmp_path, run_id="own",
                            trace_flush_every=1)) as r1:
        group, (mine,), texts = await _flood(pub, [r1])
        assert group.pending() == 0
        assert [m.text for m in await _read(mine, FLOOD)] == texts
        await mine.send("answer")
        got = await group.receive(timeout=DEADLINE)  # others' messages still come
        assert (got.sender, got.text) == ("r1", "answer")
        assert group.pending() == 0
        assert len(pub.history("bench")) == FLOOD + 1  # its own are in the group's log
    rows = load(tmp_path)
    delivered_own = {r["mid"] for r in rows if r["node"] == "pub" and r["event"] == "deliver"
                     and r["mid"].startswith("pub:")}
    assert len(delivered_own) == FLOOD
    assert check(rows) == {name: [] for name in check(rows)}
