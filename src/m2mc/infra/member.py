"""A group member on a mobile computer (seeds/001 3.3, figure 6; 2.3 A1-A3; 4.2; 4.3).

State: ``mystable``, ``mynew``, ``mybuf``, ``mylow``, ``mynack`` and the NACK
timer of figure 6 (the last two in :attr:`MemberCore.nacks`), a reliable uplink
(A1-A3), and the joining/leaving steps of 3.3.
The application sees :class:`Delivered`, :class:`ViewChange`, :class:`Joined` and
:class:`Left` events in the total order.

Where this goes beyond the pseudo-code (docs/decisions.md):

* ``mylow`` is "the lowest multicast received and not delivered" (4.2 (i)), kept
  as ``seen_high`` (the highest sequence number known to exist) so that a
  multicast dropped by a full buffer is asked for again; a beacon's ``high`` also
  counts as seen, so a member that missed the last multicasts of a burst finds
  out without waiting for the next one (seeds/001 footnote 4).
* NEWs are batched: the one outstanding frame of A1 carries every NEW queued.
* A NEW is kept until the member delivers it itself; it is sent again when the
  member changes gateway or after ``confirm_timeout`` (the coordinator drops the
  duplicates by ``recv``), so a crashed gateway or coordinator loses nothing.
* JOIN is sent without waiting for a first NORMAL; ``mystable`` starts at the
  gateway's beacon ``high`` (or 0), below the "has joined" it waits for.
* Groups (seeds/001 2.2 (i) lifted, :mod:`.member_groups`): the deployment has one
  order; the member takes every record of it and delivers the messages of its
  groups. It joins the deployment with its first groups (JOIN names them) and joins
  and leaves others by NEW items, in order with its messages.
* History and catch-up after a return (:mod:`.member_history`): what the hosts'
  log still holds, read by HistoryReq.

The member is made of objects with explicit references: this core (the receive
path of figure 6, delivery, the uplink, timers) holds its :class:`~.member_groups.Groups`,
:class:`~.member_history.Reads`, :class:`~.member_nack.Nacks` (``mynack`` and the NACK
timer) and :class:`~.member_moves.Moves`; each sees the core only through its narrow
port in :mod:`.member_ports`, as do the functions of :mod:`.member_lost` and
:mod:`.member_durable`, and none of them imports this module.
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque

from m2mc.core import Save
from m2mc.errors import BufferFullError, DecodeError, UsageError
from m2mc.infra import messages as msg
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import MemberId
from m2mc.infra.member_durable import Durable, restore
from m2mc.infra.member_events import (
    Control,
    Delivered,
    GroupJoined,
    GroupLeft,
    GroupRefused,
    HistoryLoaded,
    Joined,
    Left,
    MemberEvent,
    MemberStats,
    MessagesLost,
    MoveRequest,
    Phase,
    Uplink,
    ViewChange,
)
from m2mc.infra.member_groups import Groups, intended
from m2mc.infra.member_history import Reads
from m2mc.infra.member_lost import new_sequence, not_member
from m2mc.infra.member_moves import Moves, readdress
from m2mc.infra.member_nack import Nacks
from m2mc.infra.member_resend import Resends
from m2mc.infra.persist import MemberCommit, MemberStore, SavedMember
from m2mc.infra.reliable import ReliableSender, frame_full, take_frame
from m2mc.infra.wire import InfraWire
from m2mc.kinds import Order
from m2mc.trace.schema import NullSink, TraceEvent, TraceJournal, TraceSink

__all__ = ["Delivered", "GroupJoined", "GroupLeft", "GroupRefused", "HistoryLoaded", "Joined",
           "Left", "MemberCore", "MemberEvent", "MemberStats", "MessagesLost", "MoveRequest",
           "Phase", "Uplink", "ViewChange"]

_DUMMY = None  # a dummy element of mybuf (4.3): only a sequence number
_DOWNLINK = (msg.Beacon, msg.Normals, msg.Transfer, msg.Ack, msg.Move, msg.NotMember,
             msg.HistoryReply)


class MemberCore:
    def __init__(self, node: str, cfg: InfraConfig, rng: random.Random, *,
                 group: str = "infra", trace: TraceSink | None = None, run_id: str = "",
                 first_app_seq: int = 1, auto_rejoin: bool = True,
                 wire: InfraWire | None = None, store: MemberStore | None = None,
                 trace_journal: TraceJournal | None = None) -> None:
        self.node = node
        self.wire = wire or InfraWire()
        self.cfg = cfg
        self.rng = rng
        self.group = group
        self.trace: TraceSink = trace or NullSink()
        self.run_id = run_id
        self.auto_rejoin = auto_rejoin
        self.phase = Phase.IDLE
        self.mid: MemberId | None = None
        self.stats = MemberStats()
        self.app_seq = first_app_seq - 1  # the last used (message ids are "node:app_seq")
        self.sender = ReliableSender(cfg.retransmit, cfg.uplink_window)
        self.uplinks: list[Uplink] = []
        self.event_queue: list[MemberEvent] = []
        self.cell: str | None = None  # where we are
        self.gateway: str | None = None
        self.gateway_addr = ""
        self.moves = Moves(self)  # when the gateway was heard; a move when it falls silent
        self.directory: tuple[msg.CellInfo, ...] = ()
        self.configured: tuple[str, ...] = ()  # the configuration's cells (driver's form)
        self.last_high = 0
        self.sequence = 0  # the hosts' sequence we belong to (beacons; 0: none heard yet)
        # Switch-off and power-on (persist.py): with a store (the driver's, never called
        # here) every change goes into a save the driver commits before output leaves.
        self.durable = None if store is None else Durable(self.trace, trace_journal)
        self.power_on = False  # resumed a saved membership, not yet confirmed by a host
        self._lost_told = 0  # sequence losses written in the trace
        self.restore_problem = ""  # why the saved membership could not be taken up
        self.old_join_id: int | None = None  # the saved membership's (not to be reused)
        # Back-pressure (the API's max_queued_messages, :meth:`make_room`): messages are
        # delivered while stats.delivered < deliver_until (None: no bound); at it the
        # core pauses, records wait in mybuf (bounded) and the rest is NACKed later.
        self.deliver_until: int | None = None
        self.paused = False
        # Groups (member_groups.py, the object self.grouping): ours (-> gpos of the last
        # one delivered, -1: unknown), our views of them, our join/leave items not yet in
        # the order (app_seq -> (kind, group)), the groups our JOIN names; history and
        # catch-up (member_history.py, the object self.reads).
        self.groups: dict[str, int] = {}
        self.views: dict[str, set[str]] = {}
        self.group_ops: dict[int, tuple[int, str]] = {}
        self.join_groups: tuple[str, ...] = ()
        self.known_groups: dict[str, None] = {}  # groups seen in the order (max_groups)
        self.catchup: tuple[int, int] | None = None  # positions still to read after a return
        self.catchup_gap: tuple[int, int] | None = None  # ... that retention had dropped
        self.resume_from: int | None = None  # delivered up to here before the expulsion
        self.resume_sequenced: set[int] = set()  # app_seqs sequenced under the old join-id
        self.resume_upto = 0  # ... all up to this one (its EXPELLED record said)
        self.grouping = Groups(self)
        self.reads = Reads(self, self.grouping)
        self._on_item = self.grouping.on_item  # (bound once: per delivered record)
        self.nacks = Nacks(self)  # mynack, the NACK timer (figure 6)
        self.resends = Resends(self)  # own NEWs not seen in the order, sent again
        self.reset_membership()

    def reset_membership(self) -> None:
        self.mystable = 0
        self.mynew = 0
        self.mybuf: dict[int, msg.Record | None] = {}
        self.seen_high = 0  # highest gseq known to exist (mylow != 0 iff > mystable)
        self.nacks.reset()
        self.control: deque[Control] = deque()
        self.news: deque[msg.NewItem] = deque()
        self.unconfirmed: OrderedDict[int, tuple[msg.NewItem, float]] = OrderedDict()
        self.confirmed = 0  # own NEWs up to this nseq were delivered (sequenced in order)
        self._control_acked: dict[Control, float] = {}
        self.leave_requested = False

    # ================================================================ application
    def join(self, now: float, groups: tuple[str, ...] | list[str] | None = None) -> MemberId:
        """Ask to join the deployment, and ``groups`` with it (default: ``self.group``),
        with a fresh join-id (seeds/001 2.3, 3.3 steps i-iv;
        :meth:`.member_groups.Groups.join`)."""
        return self.grouping.join(now, groups)

    def join_group(self, group: str, now: float) -> None:
        """Join ``group`` too (:meth:`.member_groups.Groups.join_group`)."""
        self.grouping.join_group(group, now)

    def leave_group(self, group: str, now: float) -> None:
        """Leave ``group`` (:meth:`.member_groups.Groups.leave_group`)."""
        self.grouping.leave_group(group, now)

    def request_history(self, group: str, upto: int, now: float) -> None:
        """Read ``group``'s history from the hosts' log, up to position ``upto``: a
        :class:`HistoryLoaded` event when done (member_history.py)."""
        if group not in self.groups:
            raise UsageError(f"history: not in group {group!r}")
        self.reads.request_history(group, upto, now)

    def leave(self, now: float) -> None:
        """Send LEAVE once every own NEW is sequenced (3.3 leaving steps i-iii)."""
        if self.phase not in (Phase.JOINING, Phase.MEMBER):
            raise UsageError(f"leave: not a member ({self.phase.value})")
        self.leave_requested = True
        self.pump(now)

    def send(self, body: bytes, now: float, group: str | None = None) -> str:
        """Multicast ``body`` to ``group`` (default ``self.group``; 3.3: increment mynew,
        NEW, send reliably); its message id."""
        if self.phase not in (Phase.JOINING, Phase.MEMBER) or self.leave_requested:
            raise UsageError(f"send: not a member ({self.phase.value})")
        group = self.group if group is None else group
        if intended(self).get(group) is not False:
            raise UsageError(f"send: not in group {group!r}")
        if len(body) > self.cfg.max_payload:
            raise UsageError(f"send: {len(body)} bytes exceed max_payload {self.cfg.max_payload}")
        if self.pending_sends >= self.cfg.max_pending_sends:
            raise BufferFullError(f"send: {self.cfg.max_pending_sends} messages already pending")
        self.mynew += 1
        self.app_seq += 1
        self.queue_new(msg.NewItem(self.mynew, self.app_seq, body, group))
        mid = f"{self.node}:{self.app_seq}"
        if self.trace.enabled:
            self.emit("send", now, mid=mid, bytes=len(body), group=group)
        self.pump(now)
        return mid

    def queue_new(self, item: msg.NewItem) -> None:
        self.news.append(item)
        if item.kind != msg.APP:
            self.group_ops[item.app_seq] = (item.kind, item.group)
        if self.durable is not None:
            self.durable.own(item)

    def in_flight(self) -> tuple[msg.NewItem, ...]:
        return self.sender.in_flight()

    @property
    def pending_sends(self) -> int:
        """Messages sent by the application and not yet seen in the total order."""
        return len(self.news) + len(self.unconfirmed) + self.sender.in_flight_count()

    @property
    def is_member(self) -> bool:
        return self.phase in (Phase.MEMBER, Phase.LEAVING)
    # ================================================================ where we are
    def on_attach(self, cell: str | None, now: float) -> None:
        """The radio is now in ``cell`` (None: out of every cell)."""
        if cell == self.cell:
            return
        self.cell = cell
        self.gateway = None
        self.moves.attached_at = now

    # ================================================================ receiving
    def receive_frame(self, data: bytes, now: float, origin: str | None = None) -> bool:
        """A datagram from the cell or the gateway, through the wire (sealed in a keyed
        deployment); False if it was refused (counted in ``stats.decode_errors``).

        ``origin`` is the address the datagram came from (``HOST:PORT``; None when the
        driver has none, as in the simulator). A gateway sends its beacons from its
        uplink socket, so a beacon naming another uplink than its origin is not
        followed (``stats.uplink_mismatch``): members only ever send to an address that
        really spoke to them, whatever a forged beacon names (docs/security.md)."""
        try:
            m, _ = self.wire.decode(data)
        except DecodeError:
            self.stats.decode_errors += 1
            return False
        if not isinstance(m, _DOWNLINK):
            self.stats.decode_errors += 1
            return False
        if origin is not None and isinstance(m, msg.Beacon) and m.uplink != origin:
            self.stats.uplink_mismatch += 1
            return False
        self.receive(m, now)
        return True

    def receive(self, m: msg.DownlinkMessage, now: float) -> None:
        if isinstance(m, msg.Normals):
            if m.host == self.gateway:
                self._on_records(m.records, now)
        elif isinstance(m, msg.Transfer):
            if m.dest == self.mid:
                self.power_on = False  # a gateway transfers only to members it holds
                self._on_records(m.records, now)
        elif isinstance(m, msg.Beacon):
            self._on_beacon(m, now)
        elif isinstance(m, msg.Ack):
            if m.node == self.node:
                self._on_ack(m.rseq, now)
        elif isinstance(m, msg.NotMember):
            if m.mid == self.mid:
                not_member(self, now)
        elif isinstance(m, msg.HistoryReply):
            if m.dest == self.mid and m.host == self.gateway:
                self.reads.on_reply(m, now)
        elif m.node == self.node:  # Move
            self.event_queue.append(MoveRequest(m.target))

    def _on_beacon(self, b: msg.Beacon, now: float) -> None:
        if self.cell is None:
            return
        if self.gateway is not None and b.host != self.gateway \
                and now - self.moves.heard_at < self.cfg.host_silence:
            return  # B3: we stay with one gateway while it is heard
        if b.sequence and b.sequence != self.sequence:
            new_sequence(self, b, now)
        changed = b.host != self.gateway
        self.moves.heard(b.host, now)
        self.gateway = b.host
        self.gateway_addr = b.uplink
        self.directory = b.directory
        self.last_high = b.high
        if changed:
            self.resends.requeue()
            for frame in self.sender.resend_now(now, self._readdress):
                self.uplinks.append(Uplink(b.host, b.uplink, frame))
        self.uplinks.append(Uplink(b.host, b.uplink, msg.Hello(
            self.node, b.host, self.mid if self.phase != Phase.LEFT else None,
            self.mystable if self.is_member else 0, self.is_member)))
        if self.phase in (Phase.JOINING, Phase.MEMBER, Phase.LEAVING) and b.high > self.seen_high:
            self.seen_high = b.high  # tail losses show up here (footnote 4)
            self.maybe_nack(now)
        self.pump(now)

    def _on_ack(self, rseq: int, now: float) -> None:
        frame = self.sender.on_ack(rseq)
        if frame is None:
            return  # A3: duplicate acknowledgment
        if isinstance(frame, msg.NewReq):
            for item in frame.items:
                if item.nseq > self.confirmed:  # the ack may come after the delivery
                    self.unconfirmed[item.nseq] = (item, now)
        elif isinstance(frame, msg.JoinReq) and self.phase == Phase.JOINING:
            self._control_acked[Control.JOIN] = now  # (the ack may come after "has joined")
        elif isinstance(frame, msg.LeaveReq) and self.phase == Phase.LEAVING:
            self._control_acked[Control.LEAVE] = now
        elif isinstance(frame, msg.LeaveOkReq):
            self.phase = Phase.LEFT  # step (iii) done: nothing more to do for this mid
        self.pump(now)

    def _on_records(self, records: tuple[msg.Record, ...], now: float) -> None:
        """Figure 6 lines 1-17 for a batch of NORMAL or TRANSFER messages."""
        if self.phase in (Phase.IDLE, Phase.LEFT, Phase.CLOSING):
            return
        buf = self.mybuf
        tracing = self.trace.enabled and self.phase != Phase.JOINING
        for r in records:
            s = r.gseq
            if (self.phase == Phase.JOINING and r.kind == msg.JOINED and r.mid == self.mid):
                self._on_own_joined(s)  # (v.i), (v.ii)
                tracing = self.trace.enabled
            ours = r.kind == msg.APP and r.group in self.groups
            if s < self.mystable + 1 or (s in buf and buf[s] is not None):  # lines 2-3
                self.stats.duplicates += 1
                if tracing and ours:
                    self.emit("dup", now, mid=f"{r.mid.node}:{r.app_seq}", gseq=s,
                              group=r.group)
                continue
            # 4.3 applies to a computer "neither joining nor leaving": a joining one
            # must not step over its own "has joined" on a dummy.
            bridge = r.prememb if self.cfg.skip_membership and self.phase == Phase.MEMBER else 0
            if bridge > self.cfg.max_dummies:  # absurd: fetch the real ones by NACK
                self.stats.dummies_refused += 1
                bridge = 0
            # Deliverable at once (with its dummies): never worth dropping for space.
            forced = s - bridge <= self.mystable + 1
            self._insert(s, r, forced)  # lines 4-7
            if tracing and ours:
                self.emit("recv", now, mid=f"{r.mid.node}:{r.app_seq}", gseq=s,
                          bytes=len(r.body), group=r.group)
            if bridge:  # 4.3 (i): dummy elements
                for d in range(max(s - bridge, self.mystable + 1), s):
                    if d not in buf:
                        self._insert(d, _DUMMY, forced)
            if s > self.seen_high:
                self.seen_high = s
            if (self.mystable + 1) in buf:
                self.deliver_ready(now)  # lines 8-13, at once: frees room in mybuf
                if self.phase in (Phase.IDLE, Phase.LEFT, Phase.CLOSING):
                    break
        self.maybe_nack(now)  # lines 14-17
        self.pump(now)  # a LEAVE may wait for our last NEW to come back

    def _insert(self, s: int, r: msg.Record | None, forced: bool = False) -> None:
        """Insert into mybuf, bounded as in 4.2 (ii)-(iii)."""
        buf = self.mybuf
        if forced or s in buf or len(buf) < self.cfg.member_buffer:
            buf[s] = r
            return
        self.stats.buffer_evictions += 1
        if not buf:
            return
        top = max(buf)
        if s > top:
            return  # discard m; seen_high remembers it was there
        del buf[top]
        buf[s] = r

    def _on_own_joined(self, s0: int) -> None:
        self.mystable = s0 - 1
        for s in [s for s in self.mybuf if s < s0]:
            del self.mybuf[s]
        self.phase = Phase.MEMBER
        self._control_acked.pop(Control.JOIN, None)

    def deliver_ready(self, now: float) -> None:
        buf = self.mybuf
        while (self.mystable + 1) in buf and self.catchup is None:
            if self.deliver_until is not None and self.stats.delivered >= self.deliver_until \
                    and self._no_room(buf[self.mystable + 1]):
                return
            r = buf.pop(self.mystable + 1)
            self.mystable += 1
            if r is None or self.phase == Phase.JOINING:
                continue  # dummy, or footnote 6: discard instead of deliver
            self.deliver(r, now)
            if self.phase in (Phase.IDLE, Phase.LEFT, Phase.JOINING, Phase.CLOSING):
                return  # left (or expelled and rejoining): the rest is not ours

    def _no_room(self, r: msg.Record | None) -> bool:
        """Whether ``r`` must wait: a message for an application with no room."""
        if r is None or r.kind != msg.APP or r.group not in self.groups \
                or self.phase == Phase.JOINING:
            return False  # not for the application (footnote 6: discarded when joining)
        if not self.paused:
            self.paused = True
            self.stats.delivery_pauses += 1
        return True

    def make_room(self, until: int, now: float) -> None:
        """The application can take messages until ``stats.delivered`` reaches ``until``;
        a paused core delivers what waits in mybuf and NACKs the rest."""
        self.deliver_until = until
        if self.paused and self.stats.delivered < until:
            self.paused = False
            self.deliver_ready(now)
            self.maybe_nack(now)
            self.reads.send_due(now)  # (a catch-up that waited for room)
            self.pump(now)

    def deliver(self, r: msg.Record, now: float) -> None:
        kind = r.kind
        if kind not in msg.MEMBERSHIP_KINDS:  # a message, a group change, a NOOP
            self._on_item(r, now)
            return
        if r.mid != self.mid:
            if r.mid.node != self.node:  # (not our own old membership's end)
                self.grouping.others_membership(r)
            return
        if kind == msg.JOINED:
            self.event_queue.append(Joined(r.mid, r.gseq))
            self.grouping.own_joined(r, now)
            if self.resume_from is not None:  # back after an expulsion: what we missed
                lo, self.resume_from = self.resume_from + 1, None
                self.reads.start_catchup(lo, r.gseq - 1, now)
            return
        expelled = kind == msg.EXPELLED
        self.event_queue.append(Left(r.mid, r.gseq, expelled))
        wanted_out = self.leave_requested or self.phase == Phase.LEAVING
        # Expelled while away: we join again with our groups and catch up on what the
        # hosts still hold (member_history.py), so we never left them.
        # A sequence every host lost (member_lost.py) has no log to catch up from: we
        # leave our groups with it, and join them again in the new one.
        rejoin = expelled and self.auto_rejoin and not wanted_out
        extra = {"power_on_refused": True} if r.lsn == 0 and self.power_on else {}
        lost = r.lsn == 0 and self.stats.sequence_lost > self._lost_told
        if lost:
            self._lost_told = self.stats.sequence_lost
            extra["sequence_lost"] = True
        self.power_on = False
        groups = tuple(self.groups)
        if not rejoin or lost:
            self.reads.cancel_catchup()
            for group in groups:
                self.grouping.leave(group, r.gseq, now, expelled, **extra)
        if kind == msg.LEFT:
            self.phase = Phase.CLOSING
            self.control.append(Control.LEAVE_OK)  # step (iii)
            self._control_acked.pop(Control.LEAVE, None)
            return
        self.phase = Phase.LEFT
        if rejoin:  # (join takes our NEWs in flight along: it abandons the frame itself)
            self.resume_from = None if lost else self.mystable
            self.join(now, groups)
            return
        flying = self.in_flight()
        self.sender.abandon()
        self.news = deque(sorted([*flying, *self.news], key=lambda i: i.nseq))

    # ================================================================ NACK (figure 6)
    def maybe_nack(self, now: float) -> None:
        self.nacks.maybe_nack(now)

    # ================================================================ uplink
    def can_send(self) -> bool:
        return self.cell is not None and self.gateway is not None and self.mid is not None

    def pump(self, now: float) -> None:
        """Start the next frame if none is outstanding (A1), or full NEW frames beside."""
        if self.leave_requested and self.phase == Phase.MEMBER and not self.news \
                and not self.unconfirmed:
            self.leave_requested = False
            self.phase = Phase.LEAVING
            self.control.append(Control.LEAVE)
        if self.can_send() and not self.sender.busy:
            self._start_frame(now)
        while self.sender.busy and self.sender.room_for_new() and self._full_news_waiting():
            self._start_frame(now)
        if self.sender.busy and self.nacks.pending is not None and not self.control \
                and self.can_send() and self.sender.room_for_new():
            self._start_frame(now)  # the NACK, beside our NEWs in flight

    def _full_news_waiting(self) -> bool:
        return self.can_send() and bool(self.news) and self.phase == Phase.MEMBER \
            and self.catchup is None and not self.control and self.nacks.pending is None \
            and frame_full(self.news, self.cfg.max_datagram)

    def _start_frame(self, now: float) -> None:
        assert self.mid is not None and self.gateway is not None
        rseq = self.sender.next_rseq()
        frame: msg.UplinkMessage | None = None
        if self.control:
            kind = self.control.popleft()
            if kind is Control.JOIN:
                frame = msg.JoinReq(self.node, self.gateway, rseq, self.mid, self.join_groups)
            elif kind is Control.LEAVE:
                frame = msg.LeaveReq(self.node, self.gateway, rseq, self.mid)
            else:
                frame = msg.LeaveOkReq(self.node, self.gateway, rseq, self.mid)
        elif self.nacks.pending is not None:
            n = self.nacks.take_pending()
            assert n is not None
            frame = msg.NackReq(self.node, self.gateway, rseq, n.mid, n.s1, n.s2)
        elif self.news and self.phase == Phase.MEMBER and self.catchup is None:
            frame = msg.NewReq(self.node, self.gateway, rseq, self.mid,
                               take_frame(self.news, self.cfg.max_datagram))
        if frame is not None:
            self.sender.start(rseq, frame, now)
            self.uplinks.append(Uplink(self.gateway, self.gateway_addr, frame))

    def _readdress(self, frame: msg.UplinkMessage) -> msg.UplinkMessage:
        return readdress(frame, self.gateway or "")

    # ================================================================ timers
    def on_timer(self, now: float) -> None:
        nacks = self.nacks
        if nacks.timer is not None and now >= nacks.timer:
            nacks.expired(now)
        if self.can_send():
            for frame in self.sender.due(now, self._readdress):
                self.uplinks.append(Uplink(self.gateway or "", self.gateway_addr, frame))
        confirm_at = self.resends.deadline()
        if confirm_at is not None and now >= confirm_at:
            self.resends.requeue()
        for kind, acked in list(self._control_acked.items()):
            if now >= acked + self.cfg.confirm_timeout:  # its effect never showed up
                del self._control_acked[kind]
                if kind not in self.control:
                    self.control.append(kind)
        self.moves.check(now)  # seeds/004 4.5: a silent host
        self.reads.tick(now)
        self.pump(now)

    def next_deadline(self) -> float | None:
        ds = [d for d in (self.nacks.timer,
                          self.sender.deadline() if self.can_send() else None) if d is not None]
        confirm_at = self.resends.deadline()
        if confirm_at is not None:
            ds.append(confirm_at)
        ds.extend(t + self.cfg.confirm_timeout for t in self._control_acked.values())
        silent = self.moves.deadline()
        if silent is not None:
            ds.append(silent)
        fetch = self.reads.deadline(self.paused) if self.can_send() else None
        if fetch is not None:
            ds.append(fetch)
        return min(ds) if ds else None

    # ================================================================ outputs
    def drain(self) -> list[Uplink]:
        out, self.uplinks = self.uplinks, []
        return out

    def drain_frames(self) -> list[tuple[Uplink, bytes]]:
        """:meth:`drain`, each frame encoded (sealed afresh in a keyed deployment)."""
        return [(u, self.wire.encode(u.message)) for u in self.drain()]

    def events(self) -> list[MemberEvent]:
        ev, self.event_queue = self.event_queue, []
        return ev

    def take_save(self, now: float | None = None) -> Save[MemberCommit] | None:
        """What changed since the last save (None: nothing, or no store): the driver
        commits it, then writes its trace, before the frames and events it took leave."""
        return None if self.durable is None else self.durable.take(self)

    def emit(self, event: str, now: float, *, mid: str | None = None, gseq: int | None = None,
             bytes: int | None = None, detail: str | None = None,
             group: str | None = None) -> None:
        ev = TraceEvent(self.run_id, self.node, now, event, self.group if group is None else group,
                        mid, None, Order.TOTAL, gseq, bytes, None, detail)
        if self.durable is not None and self.durable.trace_out is not None:
            self.durable.trace_out.append(ev)  # written once the commit makes it true
        else:
            self.trace.emit(ev)

    def restore(self, saved: SavedMember) -> None:
        """Power-on (seeds/001 4.2): take up the saved state (:func:`.member_durable.restore`)."""
        restore(self, saved, self.reads, self.durable)
