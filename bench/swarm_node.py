"""One member process of bench/swarm.py, on the public asyncio API (m2mc.api).

    python bench/swarm_node.py --pid n001 --channel URL --data DIR [--trace DIR] [--run ID]

Started by bench/swarm.py inside a network namespace; it is driven by JSON commands
on its standard input, one a line, and answers with JSON lines on its standard
output (``{"ev": ...}``), so the driver runs every member through the same phases:

* ``{"cmd": "join", "group": G, "order": O, "members": K}``: join group ``G`` by
  name, answer ``joined`` (with the seconds the join call took), then ``members``
  once ``K`` members (this one included) are in its view.
* ``{"cmd": "send", "group": G, "count": C, "interval": S, "size": B, "replies": R}``:
  send ``C`` messages of ``B`` bytes, ``S`` seconds apart; with ``R`` half of them
  answer a message delivered lately (S_b threads). Answers ``sent``.
* ``{"cmd": "chat", "group": G, "rate": M, "size": B}`` / ``{"cmd": "hush", "group": G}``:
  a steady chat, messages at random intervals averaging ``M`` a second, half of them
  replies, until ``hush`` (answered ``hushed`` with the number sent).
* ``{"cmd": "expect", "group": G, "from": {pid: count}}``: answer ``complete`` (with
  the seconds since this node's join call of that group) once every message of those
  senders, seqnos 1..count, has been delivered here.
* ``{"cmd": "leave", "group": G}``; ``{"cmd": "stats"}`` (answer ``stats``: the node's
  and its groups' counters, and the group messages it put on the wire by kind);
  end of input or SIGTERM: close cleanly (trace flushed) and exit.

Deliveries are checked here too: ``stats`` reports, per group, duplicates and S_b
replies delivered before their parent (both must stay 0); the trace the node writes
is what bench/swarm.py's checkers judge.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import m2mc.group.node_output as node_output
from m2mc.api import AdhocNode, Group, GroupConfig, Node, NodeConfig
from m2mc.group.codec import Body, encode
from m2mc.ordering import ROOT, MessageId

FRAMES: collections.Counter[str] = collections.Counter()
FRAME_BYTES: collections.Counter[str] = collections.Counter()
_encode = encode  # (what node_output sends with)


def _counting_encode(tag: bytes, body: Body) -> bytes:
    """Every group message this node sends passes here (node_output.send_body): counted
    by kind (Data, Repair, Status, Nack, SyncReq, SyncResp, Adv, GrpsInfo, ...)."""
    frame = _encode(tag, body)
    name = type(body).__name__
    FRAMES[name] += 1
    FRAME_BYTES[name] += len(frame)
    return frame


node_output.encode = _counting_encode  # type: ignore[attr-defined]


class Seen:
    """Which seqnos of each sender were delivered, one bit each (a soak's hours of chat
    cost this node a few kilobytes, not a set of strings); duplicates counted."""

    def __init__(self) -> None:
        self.bits: dict[str, bytearray] = {}
        self.count = 0
        self.duplicates = 0

    def add(self, mid: MessageId) -> None:
        bits = self.bits.setdefault(mid.pid, bytearray())
        byte, bit = divmod(mid.seq, 8)
        if byte >= len(bits):
            bits.extend(bytes(byte + 1 - len(bits) + len(bits) // 2))
        if bits[byte] >> bit & 1:
            self.duplicates += 1
            return
        bits[byte] |= 1 << bit
        self.count += 1

    def has(self, mid: MessageId) -> bool:
        bits = self.bits.get(mid.pid)
        byte, bit = divmod(mid.seq, 8)
        return bits is not None and byte < len(bits) and bool(bits[byte] >> bit & 1)

    def covers(self, wanted: dict[str, int]) -> bool:
        return all(self.has(MessageId(pid, seq)) for pid, count in wanted.items()
                   for seq in range(count, 0, -1))


class Member:
    def __init__(self, node: AdhocNode, pid: str) -> None:
        self.node = node
        self.rng = random.Random(pid)
        self.groups: dict[str, Group] = {}
        self.joined_at: dict[str, float] = {}
        self.seen: dict[str, Seen] = {}
        self.orphans: collections.Counter[str] = collections.Counter()
        self.recent: dict[str, list[MessageId]] = {}
        self.readers: dict[str, asyncio.Task[None]] = {}
        self.chats: dict[str, tuple[asyncio.Event, asyncio.Task[int]]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.progress = asyncio.Event()  # set at every delivery batch

    @staticmethod
    def answer(ev: str, **fields: Any) -> None:
        print(json.dumps({"ev": ev, **fields}), flush=True)

    async def read(self, gid: str, group: Group) -> None:
        seen, recent = self.seen[gid], self.recent[gid]
        while True:
            for message in await group.receive_many():
                if message.parent != ROOT and not seen.has(message.parent):
                    self.orphans[gid] += 1
                seen.add(message.mid)
                recent.append(message.mid)
            del recent[:-8]
            self.progress.set()

    async def join(self, gid: str, order: str, members: int) -> None:
        self.seen[gid] = Seen()
        self.recent[gid] = []
        started = time.monotonic()
        self.joined_at[gid] = started
        group = await self.node.join(gid, order=order)
        self.groups[gid] = group
        self.readers[gid] = asyncio.create_task(self.read(gid, group))
        self.answer("joined", group=gid, seconds=round(time.monotonic() - started, 4))
        while len(group.members) < members:
            await asyncio.sleep(0.05)
        self.answer("members", group=gid, seconds=round(time.monotonic() - started, 4))

    async def send_one(self, gid: str, size: int, replies: bool) -> None:
        recent = self.recent[gid]
        parent = self.rng.choice(recent) if replies and recent and self.rng.random() < 0.5 \
            else None
        await self.groups[gid].send(self.rng.randbytes(size), reply_to=parent)

    async def send(self, gid: str, count: int, interval: float, size: int,
                   replies: bool) -> None:
        for i in range(count):
            await self.send_one(gid, size, replies)
            if i + 1 < count:
                await asyncio.sleep(interval)
        self.answer("sent", group=gid, count=count)

    async def chat(self, gid: str, rate: float, size: int, hush: asyncio.Event) -> int:
        sent = 0
        while not hush.is_set():
            await self.send_one(gid, size, True)
            sent += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hush.wait(), self.rng.expovariate(rate))
        return sent

    async def expect(self, gid: str, wanted: dict[str, int]) -> None:
        seen = self.seen[gid]
        while not seen.covers(wanted):
            self.progress.clear()
            await self.progress.wait()
        self.answer("complete", group=gid,
                    seconds=round(time.monotonic() - self.joined_at[gid], 4))

    async def leave(self, gid: str) -> None:
        self.readers.pop(gid).cancel()
        await self.groups.pop(gid).leave()
        self.answer("left", group=gid)

    def stats(self) -> None:
        node = self.node._node()  # the group layer's counters (as tests/netns/adhoc_node.py)
        groups = {gid: {**node.group_stats(gid), "seen": self.seen[gid].count,
                        "seen_duplicates": self.seen[gid].duplicates,
                        "orphans": self.orphans[gid]} for gid in self.groups}
        self.answer("stats", node=self.node.stats(), groups=groups, frames=dict(FRAMES),
                    frame_bytes=dict(FRAME_BYTES))

    def spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.done)

    def done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.answer("error", error=repr(task.exception()))

    async def command(self, cmd: dict[str, Any]) -> None:
        what, gid = cmd["cmd"], cmd.get("group", "")
        if what == "join":
            self.spawn(self.join(gid, cmd["order"], cmd["members"]))
        elif what == "send":
            self.spawn(self.send(gid, cmd["count"], cmd["interval"], cmd["size"],
                                 cmd["replies"]))
        elif what == "chat":
            hush = asyncio.Event()
            self.chats[gid] = (hush, asyncio.create_task(self.chat(gid, cmd["rate"],
                                                                   cmd["size"], hush)))
        elif what == "hush":
            hush, task = self.chats.pop(gid)
            hush.set()
            self.answer("hushed", group=gid, sent=await task)
        elif what == "expect":
            self.spawn(self.expect(gid, cmd["from"]))
        elif what == "leave":
            self.spawn(self.leave(gid))
        elif what == "stats":
            self.stats()
        else:
            self.answer("error", error=f"unknown command {what!r}")


async def main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    group = (GroupConfig() if args.retention_bytes is None
             else GroupConfig(retention_bytes=args.retention_bytes))
    config = NodeConfig(pid=args.pid, channel=args.channel, data_dir=args.data,
                        trace_dir=args.trace, run_id=args.run, group=group)
    lines: asyncio.Queue[str] = asyncio.Queue()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def pump() -> None:
        async for raw in reader:
            await lines.put(raw.decode())
        stop.set()

    async with Node.adhoc(config) as node:
        member = Member(node, args.pid)
        pumping = asyncio.create_task(pump())
        Member.answer("ready", pid=node.pid)
        while not stop.is_set():
            take = asyncio.create_task(lines.get())
            halt = asyncio.create_task(stop.wait())
            await asyncio.wait({take, halt}, return_when=asyncio.FIRST_COMPLETED)
            halt.cancel()
            if not take.done():
                take.cancel()
                break
            await member.command(json.loads(take.result()))
        pumping.cancel()
        for task in [*member.tasks, *member.readers.values()]:
            task.cancel()
        for hush, chat in member.chats.values():
            hush.set()
            chat.cancel()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--data", type=Path, required=True, help="the durable log's directory")
    parser.add_argument("--trace", default=None, help="write the trace here")
    parser.add_argument("--run", default="swarm")
    parser.add_argument("--retention-bytes", type=int, default=None,
                        help="the log's retention_bytes (default: GroupConfig's)")
    sys.exit(asyncio.run(main(parser.parse_args())))
