"""What a group node sends and hands out: :class:`NodeOutput`, the output side of
:class:`~m2mc.group.manager.GroupNode`, an object of its own that the node builds
and binds once: the node's ``send_body``, ``trace``, ``deliver``... are this
object's bound methods (the :class:`~m2mc.group.port.NodePort` its group instances
use), and the send side (:mod:`~m2mc.group.node_send`) and the receive side
(:mod:`~m2mc.group.node_receive`) hold them too.

- Messages: every group message is framed (and, in a keyed group, sealed afresh
  for each transmission) into the ``outbox``, which the node hands to M2MP in
  ``datagrams_to_send`` (:meth:`NodeOutput.hand_to`); repairs go one M2MP packet
  per REPAIR.
- Deliveries and events: to the application's event list, consecutive
  deliveries of a group coalesced into one ``DeliveredBatch`` when the owner
  takes them by the batch.
- The save: the store's writes and the trace events they make true, which the
  driver carries out before any datagram leaves (``take_save``); trace events
  wait until then.

Of its node it knows only :class:`NodeStep`: the step's time (read for trace
events and stream heads) and the send room, which each group message made ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from m2mc.core import Save
from m2mc.group import groupwire
from m2mc.group.codec import Body, Data, Repair, encode, record_size
from m2mc.group.events import Delivered, DeliveredBatch, GroupEvent
from m2mc.group.gjlp import GiitRow, Gjlp
from m2mc.group.stream_codec import STREAM_MAGIC
from m2mc.kinds import Order
from m2mc.native import fast_constructor
from m2mc.native import stream_heads as _STREAM_HEADS
from m2mc.ordering import Message, MessageId
from m2mc.security.auth import GroupAuth
from m2mc.store import GroupRow, GroupStore
from m2mc.trace.schema import TraceEvent, TraceJournal, detail_json
from m2mc.wire.packet import MAX_FRAGMENT

if TYPE_CHECKING:
    from m2mc.group.instance import GroupInstance
    from m2mc.group.port import InstancePort
    from m2mc.group.streams import GroupStreams
    from m2mc.wire.m2mp import M2MPLayer

_make_delivered = fast_constructor(Delivered)
_make_batch = fast_constructor(DeliveredBatch)
# Copies of each packet of a repair of more than one packet (send_body).
REPAIR_COPIES = 2
# Store meta key: the trace lines of the last committed batch (docs/decisions.md, "The
# trace of a node with a durable log survives kill -9").
TRACE_JOURNAL_META = "trace/last-batch"
# Read once per trace event: a module global is faster than Order.TOTAL, an enum's
# attribute lookup.
_TOTAL = Order.TOTAL


class NodeStep(Protocol):
    """The node as its output side sees it: the current step's time (read for trace
    events and stream heads only) and the send room every group message made ends
    (m2mc.group.backlog.send_room does not count it)."""

    @property
    def now(self) -> float: ...

    send_room: int


class NodeOutput:
    """The node's output side (module docstring)."""

    def __init__(self, step: NodeStep, *, pid: str, run_id: str, store: GroupStore,
                 gjlp: Gjlp, streams: GroupStreams, auth_by_tag: dict[bytes, GroupAuth],
                 journal: TraceJournal | None, tracing: bool) -> None:
        self._step = step
        self.pid = pid
        self.run_id = run_id
        self.store = store
        self.gjlp = gjlp  # (the group's order, in trace events)
        self.streams = streams
        # The node's GroupAuth of each keyed group instance, by tag (the node's dict,
        # shared: it adds and drops groups).
        self._auth_by_tag = auth_by_tag
        self.tracing = tracing
        # Trace events wait for the store commit (take_save, carried out by the driver):
        # a process killed before it leaves no event about a message its log does not have.
        self._trace_out: list[TraceEvent] = []
        self._journal = journal
        self.outbox: list[bytes] = []  # group messages made since the node last ran M2MP
        self._out_copies: list[bytes] = []  # repairs of more than one packet (send_body)
        self._events: list[GroupEvent] = []
        self.record_delivered = False  # keep delivered ids per group (simulator checks)
        # Deliveries as DeliveredBatch events (consecutive ones of a group coalesced)
        # instead of one Delivered each: for an owner that takes them by the batch.
        self.batch_deliveries = False
        self.delivered_ids: dict[str, list[MessageId]] = {}

    def take_events(self) -> list[GroupEvent]:
        """The events for the application since the last time."""
        events, self._events = self._events, []
        return events

    def hand_to(self, m2mp: M2MPLayer, now: float) -> None:
        """Give the group messages made since the last time to M2MP, in order."""
        out = self.outbox
        if out:
            for message in out:
                m2mp.send(message, now)
            out.clear()
        twice = self._out_copies
        if twice:
            for message in twice:
                m2mp.send(message, now, REPAIR_COPIES)
            twice.clear()

    def take_save(self, now: float) -> Save[float]:
        """What the driver must make durable before the datagrams it took leave: the
        store's writes so far (committed at ``now``, which also runs its age eviction)
        and the trace events they make true, written after the commit."""
        events = self._trace_out
        if not events:
            return Save(now)
        self._trace_out = []
        journal = self._journal
        if journal is None:
            return Save(now, trace_events=events)
        # With a journal the batch's lines go into the same commit, so the next
        # incarnation can put back what a kill -9 right after the commit cut off.
        batch = journal.render(events)
        self.store.set_meta(TRACE_JOURNAL_META, batch)
        return Save(now, trace_text=batch)

    def flush_group(self, inst: GroupInstance, force: bool = True) -> None:
        """Send the group's closed batches of our records, and its open one if ``force``."""
        for batch in inst.take_batches(force):
            self.send_body(inst.tag, Data(self.pid, batch))

    def send_repairs(self, inst: InstancePort, messages: list[Message], *,
                     repeat: bool = False) -> None:
        # One M2MP packet per REPAIR, as a DATA batch: M2MP loses a message whole when
        # any of its packets is lost, and repairs are what a lossy network needs, so a
        # lost packet costs only its own records (docs/decisions.md).
        batch: list[Message] = []
        size = 0
        budget = inst.batch_budget
        detail = detail_json(repeat=True) if repeat else None
        for m in messages:
            if self.tracing:
                self.trace("retransmit", inst.gid, m, detail=detail)
            s = record_size(m)
            if batch and size + s > budget:
                self.send_body(inst.tag, Repair(self.pid, batch), repair=True)
                batch, size = [], 0
            batch.append(m)
            size += s
        if batch:
            self.send_body(inst.tag, Repair(self.pid, batch), repair=True)

    def send_body(self, tag: bytes, body: Body, *, repair: bool = False) -> None:
        """Send ``body`` to the group of ``tag``. A ``repair`` of more than one M2MP
        packet goes with REPAIR_COPIES copies of each packet: M2MP loses a message
        whole when one of its packets is lost, and a group node sends each packet
        once, so at 10% loss a 24 KB record would come back whole in 0.6% of its
        repairs, and in 61% with two copies (docs/decisions.md)."""
        self._step.send_room = 0  # (m2mc.group.backlog.send_room does not count it)
        frame = encode(tag, body)
        auth = self._auth_by_tag.get(tag)
        # A keyed group's message is sealed here, once per transmission: a repair is a
        # new message with a new counter, never a byte copy receivers would refuse.
        if auth is not None:
            frame = groupwire.seal_frame(auth, frame)
        if repair and len(frame) > MAX_FRAGMENT:
            self._out_copies.append(frame)
        else:
            self.outbox.append(frame)

    def deliver(self, gid: str, m: Message) -> None:
        if m.payload.startswith(STREAM_MAGIC):  # a stream's head: its body is fetched
            self.streams.delivered(gid, [m], self._step.now)
        if self.tracing:
            self.trace("deliver", gid, m)
        if self.record_delivered:
            self.delivered_ids.setdefault(gid, []).append(m.mid)
        if self.batch_deliveries:
            self._batch(gid, [m])
        else:
            self._events.append(_make_delivered(gid, m))

    def deliver_many(self, gid: str, messages: list[Message]) -> None:
        """Deliver ``messages`` (a list the caller gives up) of ``gid``, in order: the
        hot paths of a node that is not tracing. (A tracing node goes message by
        message through :meth:`deliver`: its trace interleaves each ``deliver``
        with the ``recv`` that caused it.)"""
        if len(messages) == 1:  # (a sender's own message, every send: no list built)
            if messages[0].payload.startswith(STREAM_MAGIC):
                self.streams.delivered(gid, messages[:], self._step.now)
        else:
            heads = None if _STREAM_HEADS is None else _STREAM_HEADS(messages, STREAM_MAGIC)
            if heads is None:  # (not built, or not all plain Messages)
                heads = [m for m in messages if m.payload.startswith(STREAM_MAGIC)]
            if heads:  # (streams.delivered fetches their bodies)
                self.streams.delivered(gid, heads, self._step.now)
        if self.record_delivered:
            self.delivered_ids.setdefault(gid, []).extend([m.mid for m in messages])
        events = self._events
        if self.batch_deliveries:
            if events:  # (_batch, inline: this runs for every message sent)
                last = events[-1]
                if type(last) is DeliveredBatch and last.gid == gid:
                    last.messages.extend(messages)
                    return
            events.append(_make_batch(gid, messages))
        else:
            events.extend([_make_delivered(gid, m) for m in messages])

    def _batch(self, gid: str, messages: list[Message]) -> None:
        """Append to the pending DeliveredBatch of ``gid`` if it is the last event (no
        other event may come between two messages), else start one with ``messages``."""
        events = self._events
        if events:
            last = events[-1]
            if type(last) is DeliveredBatch and last.gid == gid:
                last.messages.extend(messages)
                return
        events.append(_make_batch(gid, messages))

    def emit(self, event: GroupEvent) -> None:
        self._events.append(event)

    def save_row(self, row: GiitRow, changed: Iterable[str] | None = None) -> None:
        """Write ``row`` to the store; ``changed``: the only members whose entries changed
        since the row was last saved (the store may write just theirs)."""
        entries = None
        if changed is not None:
            entries = [e for e in map(row.membership.get, changed) if e is not None]
        self.store.save_group(GroupRow(row.gid, row.desc, row.order, row.state, row.my_version,
                                       list(row.membership.entries())), entries)

    def trace(self, event: str, gid: str | None, m: Message | None = None, *,
               peer: str | None = None, detail: str | None = None) -> None:
        if not self.tracing:
            return
        order = None
        if gid is not None:
            row = self.gjlp.giit.get(gid)
            order = row.order if row is not None else None
        if m is not None:
            vdetail = detail
            if m.vclock is not None and detail is None and event in ("send", "deliver"):
                vdetail = detail_json(vclock=dict(sorted(m.vclock.items())))
            self._trace_out.append(TraceEvent(
                self.run_id, self.pid, self._step.now, event, gid, str(m.mid), str(m.parent), order,
                m.gseq if order == _TOTAL else None, len(m.payload), peer, vdetail))
        else:
            self._trace_out.append(TraceEvent(self.run_id, self.pid, self._step.now, event, gid,
                                            order=order, peer=peer, detail=detail))

    def record_traces(self, events: list[TraceEvent]) -> None:
        if self.tracing:
            self._trace_out.extend(events)

