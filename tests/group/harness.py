"""GroupNodes on the simulator's virtual network (m2mc.sim.testing): one broadcast
domain with a uniform delay and an independent loss per copy, partitions, crashes
and restarts, in virtual time, from one seed.

Every datagram a node emits goes to every other node (unless lost or cut off by a
partition) and back to its sender 0.1 ms later (the loopback M2MP flow control
waits for). This module only keeps the book a group test reads: what each node
delivered, its other events, what was sent.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from m2mc.group.config import GroupConfig
from m2mc.group.events import Delivered, DeliveredBatch
from m2mc.group.manager import GroupNode
from m2mc.ordering import MessageId
from m2mc.security.keys import GroupSecret
from m2mc.sim.testing import CoreStack, VirtualNet
from m2mc.store import GroupStore, MemoryStore
from m2mc.trace.schema import ListSink
from m2mc.wire.m2mp_types import M2MPConfig


@dataclass
class Sent:
    gid: str
    mid: MessageId
    parent: MessageId
    t: float


class Net:
    def __init__(self, seed: int = 1, loss: float = 0.0,
                 delay: tuple[float, float] = (0.0005, 0.003),
                 config: Callable[[], GroupConfig] = GroupConfig, *, tracing: bool = True,
                 batch_deliveries: bool = False,
                 counter: Callable[[bytes], None] | None = None,
                 names: dict[str, str] | None = None, redundancy: int = 1) -> None:
        self.seed = seed
        self.redundancy = redundancy  # copies of each M2MP packet: 1, as a real node sends
        self._loss = loss
        self.delay = delay
        self.config = config  # read at each start: a test may change it between restarts
        self.tracing = tracing  # False: the nodes trace nothing (their non-tracing fast paths)
        self.batch_deliveries = batch_deliveries  # the nodes deliver DeliveredBatch events
        self.net = VirtualNet({"lan": {
            "delay": {"dist": "uniform", "low": delay[0], "high": delay[1]},
            "loss": loss, "loopback_delay": 0.0001}}, seed=seed)
        self.nodes: dict[str, GroupNode] = {}  # the nodes that are up
        self.stores: dict[str, GroupStore] = {}
        self.down: set[str] = set()
        self.delivered: dict[str, dict[str, list[MessageId]]] = {}
        self.events: dict[str, list[object]] = {}  # the other group events
        self.sent: list[Sent] = []
        self.trace = ListSink()
        self.datagrams = 0
        self.counter = counter  # sees every datagram sent
        self.keys: dict[str, dict[str, GroupSecret]] = {}  # pid -> gid -> key
        self.names: dict[str, str] = dict(names or {})  # pid -> display name (restarts too)

    @property
    def now(self) -> float:
        return self.net.now

    @property
    def loss(self) -> float:
        return self._loss

    @loss.setter
    def loss(self, loss: float) -> None:
        """A test may make the network lossier (or better) part-way."""
        self._loss = loss
        self.net.set_loss(loss)

    # ------------------------------------------------------------- nodes
    def add(self, pid: str, store: GroupStore | None = None,
            keys: dict[str, GroupSecret] | None = None) -> GroupNode:
        """Start ``pid``; ``keys``: its group keys (kept for its restarts)."""
        self.stores[pid] = store if store is not None else self.stores.get(pid, MemoryStore())
        if keys is not None:
            self.keys[pid] = keys
        self.down.discard(pid)
        self.delivered.setdefault(pid, {})
        if self.net.up(pid):
            self.net.crash(pid)  # replaced by a new process
        self.net.add(pid, lambda ctx: CoreStack(self._group_node(pid), drain=self._drain,
                                                on_send=self._sent,
                                                commit=self.stores[pid].commit,
                                                trace=self.trace))
        return self.nodes[pid]

    def _group_node(self, pid: str) -> GroupNode:
        node = GroupNode(pid, rng=random.Random(f"{self.seed}/{pid}/{self.now}"),
                         config=self.config(), store=self.stores[pid],
                         m2mp_config=M2MPConfig(redundancy=self.redundancy),
                         trace=self.trace if self.tracing else None,
                         run_id="test", keys=self.keys.get(pid),
                         counter_start=int(self.now * 1_000_000),
                         name=self.names.get(pid, ""))
        node.batch_deliveries = self.batch_deliveries
        self.nodes[pid] = node
        return node

    def _drain(self, node: GroupNode) -> None:
        delivered = self.delivered[node.pid]
        for event in node.events():
            if isinstance(event, Delivered):
                delivered.setdefault(event.gid, []).append(event.message.mid)
            elif isinstance(event, DeliveredBatch):
                delivered.setdefault(event.gid, []).extend(m.mid for m in event.messages)
            else:
                self.events.setdefault(node.pid, []).append(event)

    def _sent(self, datagram: bytes) -> None:
        self.datagrams += 1
        if self.counter is not None:
            self.counter(datagram)

    def crash(self, pid: str) -> None:
        self.down.add(pid)
        self.net.crash(pid)
        del self.nodes[pid]

    def restart(self, pid: str, keys: dict[str, GroupSecret] | None = None) -> GroupNode:
        return self.add(pid, self.stores[pid], keys)

    def partition(self, *sides: list[str]) -> None:
        self.net.partition(*sides)

    def heal(self) -> None:
        self.net.heal_partitions()

    # ----------------------------------------------------------- actions
    def do(self, pid: str, action: Callable[[GroupNode], object]) -> object:
        return self.net.call(pid, lambda stack, now: action(stack.core))

    def send(self, pid: str, gid: str, payload: bytes, reply_to: MessageId | None = None
             ) -> MessageId:
        mid: MessageId = self.net.call(
            pid, lambda stack, now: stack.core.send(gid, payload, now, reply_to))
        self.sent.append(Sent(gid, mid, reply_to or MessageId("", 0), self.now))
        return mid

    def inject(self, datagram: bytes, to: str | None = None) -> None:
        """A datagram from an outsider, to one node or to all."""
        self.net.inject(datagram, to)

    # -------------------------------------------------------------- time
    def run(self, duration: float) -> None:
        self.net.run(duration)

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


def group_of_three(net: Net, name: str = "chat", order: str = "sb") -> str:
    """Nodes a, b and c up, a's group ``name`` (of ``order``) created and joined by b
    and c."""
    for pid in ("a", "b", "c"):
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group(name, net.now, order=order)))
    net.run(0.5)
    for pid in ("b", "c"):
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    return gid
