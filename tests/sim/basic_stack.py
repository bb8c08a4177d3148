"""The ``basic`` stack (tests only): the real M2MP layer plus one real ordering core
per group, without the group layer. The simulator's tests use it to see M2MP and
the ordering cores on their own in a faulty network; scenarios use the ``group``
stack (the default). Registered by tests/sim/conftest.py. Per node: one
:class:`~m2mc.wire.m2mp.M2MPLayer` (fragmentation, redundancy, flow control,
reassembly) and, per group, the core ``m2mc.ordering.make_core(order)``. There is
no repair, so network losses show in the trace as messages never delivered (and,
for causal and FIFO groups, as messages held behind a lost one).

Group messages travel as msgpack arrays
``[group, pid, seq, parent_pid, parent_seq, vclock | nil, gseq | nil, payload]``;
an M2MP message filter on ``[group`` keeps a node from reassembling the
messages of groups it is not in. Identities: ``seq`` counts per sender and
group from 1 (what FIFO and causal order expect); the counter and the group
memberships are kept in ``durable_dir`` so a restarted node never reuses an
identity. Total order needs a sequencer, so ``total`` groups are not offered.

[stack] keys read here: ``redundancy`` (1), ``flow_control`` (true),
``message_timeout`` (5.0), ``flow_timeout`` (0.1), ``max_held`` (100000).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from m2mc.errors import ConfigError
from m2mc.ordering import ROOT, Message, MessageId, OrderingCore, make_core
from m2mc.sim.node import NodeContext, register_stack
from m2mc.sim.schema import Table
from m2mc.trace.schema import TraceEvent, detail_json
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageReceived

_FIELDS = 8
_MID_CACHE = 4096  # M2MP message id -> (group, mid), to name the mid in dup events


def check_params(params: Mapping[str, Any]) -> None:
    t = Table(params, "stack")
    t.string("kind")
    t.integer("redundancy", 1, low=1)
    t.boolean("flow_control", True)
    t.number("message_timeout", 5.0, above=0.0)
    t.number("flow_timeout", 0.1, above=0.0)
    t.integer("max_held", 100_000, low=0)
    t.finish()


def group_prefix(group: str) -> bytes:
    """The first bytes of every encoded message of ``group`` (an M2MP filter prefix)."""
    return bytes([0x90 | _FIELDS]) + bytes(msgpack.packb(group))


@dataclass(slots=True)
class _Group:
    name: str
    order: str
    core: OrderingCore
    delivered: list[str] = field(default_factory=list)
    delivered_count: dict[str, int] = field(default_factory=dict)  # causal: per sender


class BasicStack:
    def __init__(self, ctx: NodeContext) -> None:
        check_params(ctx.params)
        p = ctx.params
        self.ctx = ctx
        self.pid = ctx.node_id
        self.trace = ctx.trace
        self.m2mp = M2MPLayer(M2MPConfig(
            redundancy=int(p.get("redundancy", 1)),
            flow_control=bool(p.get("flow_control", True)),
            message_timeout=float(p.get("message_timeout", 5.0)),
            flow_timeout=float(p.get("flow_timeout", 0.1))), rng=ctx.rng)
        self.max_held = int(p.get("max_held", 100_000))
        self.groups: dict[str, _Group] = {}
        self.malformed = 0
        self._seqs: dict[str, int] = {}
        self._orders: dict[str, str] = {g.name: g.order for g in ctx.groups}
        self._mids: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._state = ctx.durable_dir / "basic-stack.json"

    # ------------------------------------------------------------ lifecycle
    def start(self, now: float) -> None:
        """Boot: groups and counters from durable state if any, else the initial groups."""
        memberships: list[tuple[str, str]]
        if self._state.exists():
            state = json.loads(self._state.read_text())
            self._seqs = {str(k): int(v) for k, v in state["seqs"].items()}
            memberships = [(str(n), str(o)) for n, o in state["groups"]]
            self._orders.update(dict(memberships))
        else:
            memberships = [(g.name, g.order) for g in self.ctx.groups]
        for name, _ in memberships:
            self._join(name, now, save=False)
        self._save()

    def app_join(self, group: str, now: float) -> None:
        self._join(group, now, save=True)

    def app_leave(self, group: str, now: float) -> None:
        g = self.groups.pop(group, None)
        if g is None:
            return
        self.m2mp.remove_filter(group_prefix(group))
        self._save()
        self._emit(now, "leave", group, order=g.order)

    def _join(self, group: str, now: float, *, save: bool) -> None:
        if group in self.groups:
            return
        order = self._orders.get(group, "sb")
        self.groups[group] = _Group(group, order, make_core(order, max_held=self.max_held))
        self.m2mp.add_filter(group_prefix(group))
        if save:
            self._save()
        self._emit(now, "join", group, order=order)

    def _save(self) -> None:
        state = {"groups": [[g.name, g.order] for g in self.groups.values()], "seqs": self._seqs}
        self._state.write_text(json.dumps(state, sort_keys=True))

    # ------------------------------------------------------------------ app
    def delivered_mids(self, group: str) -> Sequence[str]:
        g = self.groups.get(group)
        return g.delivered if g is not None else ()

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        g = self.groups.get(group)
        if g is None:
            return None
        parent = MessageId.parse(reply_to) if reply_to else ROOT
        seq = self._seqs.get(group, 0) + 1
        self._seqs[group] = seq
        self._save()  # before the message leaves: a restart never reuses seq
        vclock: dict[str, int] | None = None
        if g.order == "causal":
            vclock = dict(g.delivered_count)
            vclock[self.pid] = seq
        data = msgpack.packb([group, self.pid, seq, parent.pid, parent.seq, vclock, None,
                              payload])
        self.m2mp.send(data, now)
        message = Message(MessageId(self.pid, seq), parent, payload, vclock)
        mid = str(message.mid)
        self._emit(now, "send", group, mid, str(parent), g.order, len(payload),
                   detail=_vclock_detail(vclock))
        self._to_ordering(g, message, mid, now)  # a sender delivers its own message too
        return mid

    # -------------------------------------------------------------- sans-IO
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        m2mp = self.m2mp
        before = m2mp.stats.duplicates
        m2mp.receive_datagram(datagram, now)
        if m2mp.stats.duplicates != before and self.trace.enabled:
            known = self._mids.get(int.from_bytes(datagram[:4], "big"))
            if known is not None:
                self._emit(now, "dup", known[0], known[1], peer=known[1].rpartition(":")[0],
                           detail='{"layer":"m2mp"}')
        self._drain(now)

    def on_timer(self, now: float) -> None:
        self.m2mp.on_timer(now)
        self._drain(now)

    def next_deadline(self) -> float | None:
        return self.m2mp.next_deadline()

    def datagrams_to_send(self, now: float) -> list[bytes]:
        return self.m2mp.datagrams_to_send(now)

    def _drain(self, now: float) -> None:
        for event in self.m2mp.events():
            if isinstance(event, MessageReceived):
                self._on_message(event.message_id, event.payload, now)

    def _on_message(self, message_id: int, data: bytes, now: float) -> None:
        try:
            fields = msgpack.unpackb(data, raw=False, strict_map_key=False)
            group, pid, seq, ppid, pseq, vclock, gseq, payload = fields
            if not (isinstance(group, str) and isinstance(pid, str) and isinstance(ppid, str)
                    and type(seq) is int and type(pseq) is int and seq >= 1 and pseq >= 0
                    and isinstance(payload, bytes) and (gseq is None or type(gseq) is int)):
                raise ValueError("bad field types")
            if vclock is not None:
                vclock = {str(k): int(v) for k, v in dict(vclock).items()}
        except (ValueError, TypeError, msgpack.UnpackException):
            self.malformed += 1  # counted and dropped, never a crash
            return
        g = self.groups.get(group)
        if g is None:
            return
        mid_id = MessageId(pid, seq)
        mid = f"{pid}:{seq}"
        self._mids[message_id] = (group, mid)
        if len(self._mids) > _MID_CACHE:
            self._mids.popitem(last=False)
        if g.core.has(mid_id):
            if self.trace.enabled:
                self._emit(now, "dup", group, mid, peer=pid, detail='{"layer":"group"}')
            return
        parent = MessageId(ppid, pseq) if pseq else ROOT
        self._to_ordering(g, Message(mid_id, parent, payload, vclock, gseq), mid, now)

    def _to_ordering(self, g: _Group, message: Message, mid: str, now: float) -> None:
        tracing = self.trace.enabled
        if tracing:
            self._emit(now, "recv", g.name, mid, str(message.parent), g.order,
                       len(message.payload), peer=message.mid.pid,
                       detail=_vclock_detail(message.vclock))
        delivered, counts = g.delivered, g.delivered_count
        for ready in g.core.receive(message):
            ready_mid = mid if ready is message else str(ready.mid)
            delivered.append(ready_mid)
            pid = ready.mid.pid
            counts[pid] = counts.get(pid, 0) + 1
            if tracing:
                self._emit(now, "deliver", g.name, ready_mid, str(ready.parent), g.order,
                           len(ready.payload), peer=pid, gseq=ready.gseq,
                           detail=_vclock_detail(ready.vclock))

    def _emit(self, now: float, event: str, group: str, mid: str | None = None,
              parent: str | None = None, order: str | None = None, nbytes: int | None = None,
              *, peer: str | None = None, gseq: int | None = None,
              detail: str | None = None) -> None:
        if self.trace.enabled:
            if order is None:
                g = self.groups.get(group)
                order = g.order if g is not None else self._orders.get(group)
            self.trace.emit(TraceEvent("", "", now, event, group=group, mid=mid, parent=parent,
                                       order=order, gseq=gseq, bytes=nbytes, peer=peer,
                                       detail=detail))


def _vclock_detail(vclock: Mapping[str, int] | None) -> str | None:
    return None if vclock is None else detail_json(vclock=dict(vclock))


def _factory(ctx: NodeContext) -> BasicStack:
    for g in ctx.groups:
        if g.order == "total":
            raise ConfigError("stack 'basic' does not offer total order (no sequencer)")
    return BasicStack(ctx)


register_stack("basic", _factory, orders=("sb", "causal", "fifo"), check_params=check_params)
