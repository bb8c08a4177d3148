"""A tiny deterministic network for GroupNodes: virtual time, a broadcast medium
with per-copy delay and loss, partitions, crashes and restarts.

Every datagram a node emits goes to every other node (unless lost or cut off by
a partition) and back to its sender (the loopback M2MP flow control waits for).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from m2mc.core import carry_out
from m2mc.group.config import GroupConfig
from m2mc.group.events import Delivered, DeliveredBatch
from m2mc.group.manager import GroupNode
from m2mc.ordering import MessageId
from m2mc.security.keys import GroupSecret
from m2mc.store import GroupStore, MemoryStore
from m2mc.trace.schema import ListSink


@dataclass
class Sent:
    gid: str
    mid: MessageId
    parent: MessageId
    t: float


@dataclass
class Net:
    seed: int = 1
    loss: float = 0.0
    delay: tuple[float, float] = (0.0005, 0.003)
    config: Callable[[], GroupConfig] = GroupConfig
    now: float = 0.0
    nodes: dict[str, GroupNode] = field(default_factory=dict)
    stores: dict[str, GroupStore] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    sides: dict[str, int] = field(default_factory=dict)  # partition side per node
    delivered: dict[str, dict[str, list[MessageId]]] = field(default_factory=dict)
    events: dict[str, list[object]] = field(default_factory=dict)  # the other group events
    sent: list[Sent] = field(default_factory=list)
    trace: ListSink = field(default_factory=ListSink)
    datagrams: int = 0
    counter: Callable[[bytes], None] | None = None
    keys: dict[str, dict[str, GroupSecret]] = field(default_factory=dict)  # pid -> gid -> key
    tracing: bool = True  # False: the nodes trace nothing (their non-tracing fast paths)
    names: dict[str, str] = field(default_factory=dict)  # pid -> display name (restarts too)
    batch_deliveries: bool = False  # the nodes deliver DeliveredBatch events

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._queue: list[tuple[float, int, str, bytes]] = []
        self._n = 0

    # ------------------------------------------------------------- nodes
    def add(self, pid: str, store: GroupStore | None = None,
            keys: dict[str, GroupSecret] | None = None) -> GroupNode:
        """Start ``pid``; ``keys``: its group keys (kept for its restarts)."""
        self.stores[pid] = store if store is not None else self.stores.get(pid, MemoryStore())
        if keys is not None:
            self.keys[pid] = keys
        node = GroupNode(pid, rng=random.Random(f"{self.seed}/{pid}/{self.now}"),
                         config=self.config(), store=self.stores[pid],
                         trace=self.trace if self.tracing else None,
                         run_id="test", keys=self.keys.get(pid),
                         counter_start=int(self.now * 1_000_000),
                         name=self.names.get(pid, ""))
        node.batch_deliveries = self.batch_deliveries
        self.nodes[pid] = node
        self.down.discard(pid)
        self.delivered.setdefault(pid, {})
        node.start(self.now)
        self._drain(pid)
        return node

    def crash(self, pid: str) -> None:
        self.down.add(pid)
        del self.nodes[pid]

    def restart(self, pid: str, keys: dict[str, GroupSecret] | None = None) -> GroupNode:
        return self.add(pid, self.stores[pid], keys)

    def partition(self, *sides: list[str]) -> None:
        self.sides = {pid: i for i, side in enumerate(sides) for pid in side}

    def heal(self) -> None:
        self.sides = {}

    # ----------------------------------------------------------- actions
    def do(self, pid: str, action: Callable[[GroupNode], object]) -> object:
        result = action(self.nodes[pid])
        self._drain(pid)
        return result

    def send(self, pid: str, gid: str, payload: bytes, reply_to: MessageId | None = None
             ) -> MessageId:
        mid = self.nodes[pid].send(gid, payload, self.now, reply_to)
        self.sent.append(Sent(gid, mid, reply_to or MessageId("", 0), self.now))
        self._drain(pid)
        return mid

    # -------------------------------------------------------------- time
    def run(self, duration: float) -> None:
        end = self.now + duration
        while True:
            t_net = self._queue[0][0] if self._queue else None
            t_timer = None
            timer_pid = ""
            for pid, node in self.nodes.items():
                d = node.next_deadline()
                if d is not None and (t_timer is None or d < t_timer):
                    t_timer, timer_pid = d, pid
            candidates = [t for t in (t_net, t_timer) if t is not None]
            if not candidates or min(candidates) > end:
                break
            t = min(candidates)
            self.now = max(self.now, t)
            if t_net is not None and t_net <= t:
                _, _, dest, datagram = heapq.heappop(self._queue)
                node = self.nodes.get(dest)
                if node is not None:
                    node.receive_datagram(datagram, self.now)
                    self._drain(dest)
            else:
                self.nodes[timer_pid].on_timer(self.now)
                self._drain(timer_pid)
        self.now = end

    def _drain(self, pid: str) -> None:
        node = self.nodes[pid]
        for event in node.events():
            if isinstance(event, Delivered):
                self.delivered[pid].setdefault(event.gid, []).append(event.message.mid)
            elif isinstance(event, DeliveredBatch):
                self.delivered[pid].setdefault(event.gid, []).extend(
                    m.mid for m in event.messages)
            else:
                self.events.setdefault(pid, []).append(event)
        out = node.datagrams_to_send(self.now)
        # Nothing leaves before the log holds it: commit, then trace (m2mc.core).
        carry_out(node.take_save(self.now), self.stores[pid].commit, self.trace)
        for datagram in out:
            self.datagrams += 1
            if self.counter is not None:
                self.counter(datagram)
            for dest in list(self.nodes):
                if dest != pid:
                    if self.rng.random() < self.loss:
                        continue
                    if self.sides and self.sides.get(dest, -1) != self.sides.get(pid, -1):
                        continue
                self._n += 1
                at = self.now + (0.0001 if dest == pid else self.rng.uniform(*self.delay))
                heapq.heappush(self._queue, (at, self._n, dest, datagram))

    def inject(self, datagram: bytes, to: str | None = None) -> None:
        """A datagram from an outsider, to one node or to all."""
        for dest in [to] if to else list(self.nodes):
            self._n += 1
            heapq.heappush(self._queue, (self.now + 0.0001, self._n, dest, datagram))

    # ------------------------------------------------------------ checks
    def check_group(self, gid: str, members: list[str]) -> None:
        """Every node in ``members`` delivered every message of ``gid`` exactly once,
        each after its parent."""
        want = {s.mid for s in self.sent if s.gid == gid}
        parents = {s.mid: s.parent for s in self.sent if s.gid == gid}
        for pid in members:
            got = self.delivered[pid].get(gid, [])
            assert len(got) == len(set(got)), f"{pid} delivered duplicates"
            missing = want - set(got)
            assert not missing, f"{pid} misses {sorted(map(str, missing))[:10]} ({len(missing)})"
            position = {mid: i for i, mid in enumerate(got)}
            for mid in got:
                parent = parents.get(mid)
                if parent is not None and parent.pid:
                    assert position[parent] < position[mid], f"{pid}: {mid} before {parent}"
