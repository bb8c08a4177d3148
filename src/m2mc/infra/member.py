"""A group member on a mobile computer (seeds/001 3.3, figure 6; 2.3 A1-A3; 4.2; 4.3).

State: ``mystable``, ``mynew``, ``mybuf``, ``mylow``, ``mynack`` and the NACK
timer of figure 6, a reliable uplink (A1-A3), and the joining/leaving steps of 3.3.
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
    Delivered,
    Joined,
    Left,
    MemberEvent,
    MemberStats,
    MoveRequest,
    Phase,
    Uplink,
    ViewChange,
)
from m2mc.infra.member_lost import new_sequence, not_member
from m2mc.infra.member_moves import check_host, readdress
from m2mc.infra.persist import MemberCommit, MemberStore, SavedMember
from m2mc.infra.reliable import ReliableSender
from m2mc.infra.wire import InfraWire
from m2mc.kinds import ViewKind
from m2mc.trace.schema import NullSink, TraceEvent, TraceJournal, TraceSink, detail_json

__all__ = ["Delivered", "Joined", "Left", "MemberCore", "MemberEvent", "MemberStats",
           "MoveRequest", "Phase", "Uplink", "ViewChange"]

_DUMMY = None  # a dummy element of mybuf (4.3): only a sequence number
_DOWNLINK = (msg.Beacon, msg.Normals, msg.Transfer, msg.Ack, msg.Move, msg.NotMember)
_VIEW_KIND = {msg.JOINED: ViewKind.JOINED, msg.LEFT: ViewKind.LEFT,
              msg.EXPELLED: ViewKind.EXPELLED}


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
        self._app_seq = first_app_seq - 1
        self._sender = ReliableSender(cfg.retransmit)
        self._out: list[Uplink] = []
        self._events: list[MemberEvent] = []
        self.cell: str | None = None  # where we are
        self.gateway: str | None = None
        self.gateway_addr = ""
        self._gateway_heard = 0.0
        self._attached_at = 0.0
        self._move_asked = 0.0
        self.directory: tuple[msg.CellInfo, ...] = ()
        self.configured: tuple[str, ...] = ()  # the configuration's cells (driver's form)
        self._expect: str | None = None  # host of the cell we asked to move to
        self._unheard: set[str] = set()  # hosts we went to (or had) and did not hear
        self._last_high = 0
        self.sequence = 0  # the hosts' sequence we belong to (beacons; 0: none heard yet)
        # Switch-off and power-on (persist.py): with a store (the driver's, never called
        # here) every change goes into a save the driver commits before output leaves.
        self.durable = None if store is None else Durable(self.trace, trace_journal)
        self._power_on = False  # resumed a saved membership, not yet confirmed by a host
        self._lost_told = 0  # sequence losses written in the trace
        self.restore_problem = ""  # why the saved membership could not be taken up
        self._old_join_id: int | None = None  # the saved membership's (not to be reused)
        # Back-pressure (the API's max_queued_messages, :meth:`make_room`): messages are
        # delivered while stats.delivered < deliver_until (None: no bound); at it the
        # core pauses, records wait in mybuf (bounded) and the rest is NACKed later.
        self.deliver_until: int | None = None
        self.paused = False
        self._reset_membership()

    def _reset_membership(self) -> None:
        self.mystable = 0
        self.mynew = 0
        self.mybuf: dict[int, msg.Record | None] = {}
        self.seen_high = 0  # highest gseq known to exist (mylow != 0 iff > mystable)
        self.mynack: msg.NackReq | None = None
        self._nack_timer: float | None = None
        self._nack_pending: msg.NackReq | None = None
        self._control: deque[str] = deque()  # "join" | "leave" | "leaveok"
        self._news: deque[msg.NewItem] = deque()
        self._unconfirmed: OrderedDict[int, tuple[msg.NewItem, float]] = OrderedDict()
        self._confirmed = 0  # own NEWs up to this nseq were delivered (sequenced in order)
        self._control_acked: dict[str, float] = {}
        self._leave_requested = False

    # ================================================================ application
    def join(self, now: float) -> MemberId:
        """Ask to join with a fresh join-id (seeds/001 2.3, 3.3 steps i-iv)."""
        if self.phase not in (Phase.IDLE, Phase.LEFT):
            raise UsageError(f"join: already {self.phase.value}")
        pending = sorted([*(item for item, _ in self._unconfirmed.values()),
                          *self._in_flight(), *self._news], key=lambda i: i.nseq)
        pending = [i for i in pending if i.nseq > self._confirmed]
        self._sender.abandon()  # a frame of the old membership is worthless now
        self._reset_membership()
        join_id = self.rng.getrandbits(32)
        while join_id == self._old_join_id:  # never the saved one again (2.3)
            join_id = self.rng.getrandbits(32)
        self.mid = MemberId(self.node, join_id)
        self.mystable = self._last_high
        self.phase = Phase.JOINING
        self._control.append("join")
        if self.durable is not None:
            kept = {i.app_seq for i in pending}
            self.durable.release(lambda i: i.app_seq not in kept)
        for item in pending:  # messages never sequenced in the last membership
            self.mynew += 1
            self._queue_new(msg.NewItem(self.mynew, item.app_seq, item.body))
        self._pump(now)
        return self.mid

    def leave(self, now: float) -> None:
        """Send LEAVE once every own NEW is sequenced (3.3 leaving steps i-iii)."""
        if self.phase not in (Phase.JOINING, Phase.MEMBER):
            raise UsageError(f"leave: not a member ({self.phase.value})")
        self._leave_requested = True
        self._pump(now)

    def send(self, body: bytes, now: float) -> str:
        """Multicast ``body`` (3.3: increment mynew, NEW, send reliably); its message id."""
        if self.phase not in (Phase.JOINING, Phase.MEMBER) or self._leave_requested:
            raise UsageError(f"send: not a member ({self.phase.value})")
        if len(body) > self.cfg.max_payload:
            raise UsageError(f"send: {len(body)} bytes exceed max_payload {self.cfg.max_payload}")
        if self.pending_sends >= self.cfg.max_pending_sends:
            raise BufferFullError(f"send: {self.cfg.max_pending_sends} messages already pending")
        self.mynew += 1
        self._app_seq += 1
        self._queue_new(msg.NewItem(self.mynew, self._app_seq, body))
        mid = f"{self.node}:{self._app_seq}"
        if self.trace.enabled:
            self._emit("send", now, mid=mid, bytes=len(body))
        self._pump(now)
        return mid

    def _queue_new(self, item: msg.NewItem) -> None:
        self._news.append(item)
        if self.durable is not None:
            self.durable.own(item)

    def _in_flight(self) -> tuple[msg.NewItem, ...]:
        out = self._sender.outstanding
        return out.frame.items if out is not None and isinstance(out.frame, msg.NewReq) else ()

    @property
    def pending_sends(self) -> int:
        """Messages sent by the application and not yet seen in the total order."""
        return len(self._news) + len(self._unconfirmed) + len(self._in_flight())

    @property
    def app_seq(self) -> int:
        """The last application sequence number used (message ids are "node:app_seq")."""
        return self._app_seq

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
        self._attached_at = now

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
                self._power_on = False  # a gateway transfers only to members it holds
                self._on_records(m.records, now)
        elif isinstance(m, msg.Beacon):
            self._on_beacon(m, now)
        elif isinstance(m, msg.Ack):
            if m.node == self.node:
                self._on_ack(m.rseq, now)
        elif isinstance(m, msg.NotMember):
            if m.mid == self.mid:
                not_member(self, now)
        elif m.node == self.node:  # Move
            self._events.append(MoveRequest(m.target))

    def _on_beacon(self, b: msg.Beacon, now: float) -> None:
        if self.cell is None:
            return
        if self.gateway is not None and b.host != self.gateway \
                and now - self._gateway_heard < self.cfg.host_silence:
            return  # B3: we stay with one gateway while it is heard
        if b.sequence and b.sequence != self.sequence:
            new_sequence(self, b, now)
        changed = b.host != self.gateway
        self._unheard.discard(b.host)
        if b.host == self._expect:
            self._expect = None
        self.gateway = b.host
        self.gateway_addr = b.uplink
        self._gateway_heard = now
        self.directory = b.directory
        self._last_high = b.high
        if changed:
            self._requeue_unconfirmed()
            frame = self._sender.resend_now(now, self._readdress)
            if frame is not None:
                self._out.append(Uplink(b.host, b.uplink, frame))
        self._out.append(Uplink(b.host, b.uplink, msg.Hello(
            self.node, b.host, self.mid if self.phase != Phase.LEFT else None,
            self.mystable if self.is_member else 0, self.is_member)))
        if self.phase in (Phase.JOINING, Phase.MEMBER, Phase.LEAVING) and b.high > self.seen_high:
            self.seen_high = b.high  # tail losses show up here (footnote 4)
            self._maybe_nack(now)
        self._pump(now)

    def _on_ack(self, rseq: int, now: float) -> None:
        frame = self._sender.on_ack(rseq)
        if frame is None:
            return  # A3: duplicate acknowledgment
        if isinstance(frame, msg.NewReq):
            for item in frame.items:
                if item.nseq > self._confirmed:  # the ack may come after the delivery
                    self._unconfirmed[item.nseq] = (item, now)
        elif isinstance(frame, msg.JoinReq) and self.phase == Phase.JOINING:
            self._control_acked["join"] = now  # (the ack may come after "has joined")
        elif isinstance(frame, msg.LeaveReq) and self.phase == Phase.LEAVING:
            self._control_acked["leave"] = now
        elif isinstance(frame, msg.LeaveOkReq):
            self.phase = Phase.LEFT  # step (iii) done: nothing more to do for this mid
        self._pump(now)

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
            if s < self.mystable + 1 or (s in buf and buf[s] is not None):  # lines 2-3
                self.stats.duplicates += 1
                if tracing and r.kind == msg.APP:
                    self._emit("dup", now, mid=f"{r.mid.node}:{r.app_seq}", gseq=s)
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
            if tracing and r.kind == msg.APP:
                self._emit("recv", now, mid=f"{r.mid.node}:{r.app_seq}", gseq=s,
                           bytes=len(r.body))
            if bridge:  # 4.3 (i): dummy elements
                for d in range(max(s - bridge, self.mystable + 1), s):
                    if d not in buf:
                        self._insert(d, _DUMMY, forced)
            if s > self.seen_high:
                self.seen_high = s
            if (self.mystable + 1) in buf:
                self._deliver_ready(now)  # lines 8-13, at once: frees room in mybuf
                if self.phase in (Phase.IDLE, Phase.LEFT, Phase.CLOSING):
                    break
        self._maybe_nack(now)  # lines 14-17
        self._pump(now)  # a LEAVE may wait for our last NEW to come back

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
        self._control_acked.pop("join", None)

    def _deliver_ready(self, now: float) -> None:
        buf = self.mybuf
        while (self.mystable + 1) in buf:
            if self.deliver_until is not None and self.stats.delivered >= self.deliver_until \
                    and self._no_room(buf[self.mystable + 1]):
                return
            r = buf.pop(self.mystable + 1)
            self.mystable += 1
            if r is None or self.phase == Phase.JOINING:
                continue  # dummy, or footnote 6: discard instead of deliver
            self._deliver(r, now)
            if self.phase in (Phase.IDLE, Phase.LEFT, Phase.JOINING, Phase.CLOSING):
                return  # left (or expelled and rejoining): the rest is not ours

    def _no_room(self, r: msg.Record | None) -> bool:
        """Whether ``r`` must wait: a message for an application with no room."""
        if r is None or r.kind != msg.APP or self.phase == Phase.JOINING:
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
            self._deliver_ready(now)
            self._maybe_nack(now)
            self._pump(now)

    def _deliver(self, r: msg.Record, now: float) -> None:
        if r.kind == msg.APP:
            self.stats.delivered += 1
            if r.mid == self.mid:
                self._unconfirmed.pop(r.nseq, None)
                self._confirmed = max(self._confirmed, r.nseq)
                self._power_on = False  # the hosts hold our membership
                if self.durable is not None:
                    self.durable.sequenced(r.nseq)
            self._events.append(Delivered(r.gseq, r.mid.node, r.app_seq, r.body))
            if self.trace.enabled:
                self._emit("deliver", now, mid=f"{r.mid.node}:{r.app_seq}", gseq=r.gseq,
                           bytes=len(r.body))
            return
        own = r.mid == self.mid
        if own and r.kind == msg.JOINED:
            self._events.append(Joined(r.mid, r.gseq))
            if self.trace.enabled:
                self._emit("join", now, gseq=r.gseq, detail=detail_json(member=str(r.mid)))
        elif own:
            self._events.append(Left(r.mid, r.gseq, r.kind == msg.EXPELLED))
            if self.trace.enabled:
                extra = {"power_on_refused": True} if r.lsn == 0 and self._power_on else {}
                if r.lsn == 0 and self.stats.sequence_lost > self._lost_told:
                    self._lost_told = self.stats.sequence_lost
                    extra["sequence_lost"] = True
                self._emit("leave", now, gseq=r.gseq,
                           detail=detail_json(member=str(r.mid),
                                              expelled=r.kind == msg.EXPELLED, **extra))
            self._power_on = False
            if r.kind == msg.LEFT:
                self.phase = Phase.CLOSING
                self._control.append("leaveok")  # step (iii)
                self._control_acked.pop("leave", None)
            else:
                wanted_out = self._leave_requested or self.phase == Phase.LEAVING
                self.phase = Phase.LEFT
                self._sender.abandon()
                if self.auto_rejoin and not wanted_out:
                    self.join(now)
            return
        elif self.cfg.skip_membership:
            return  # 4.3 (ii): line 11 skipped for membership changes
        self._events.append(ViewChange(r.gseq, _VIEW_KIND[r.kind], r.mid))

    # ================================================================ NACK (figure 6)
    def _nack_now(self) -> msg.NackReq | None:
        if self.seen_high <= self.mystable or self.mid is None or self.paused \
                or self.phase not in (Phase.JOINING, Phase.MEMBER, Phase.LEAVING):
            return None  # mylow = 0, nothing more to deliver, or no room: not now
        s2 = min(self.mybuf) if self.mybuf else self.seen_high + 1
        if self.phase == Phase.JOINING:
            # Which multicasts we need starts at our "has joined", unknown yet: ask
            # for all we know of; the gateway starts the transfer at first[mid].
            s2 = self.seen_high + 1
        return msg.NackReq(self.node, "", 0, self.mid, self.mystable, s2)

    def _maybe_nack(self, now: float) -> None:
        if self.mynack is not None:
            return  # the timer runs: no further NACK (lines 14-17)
        nack = self._nack_now()
        if nack is not None:
            self._send_nack(nack, now)

    def _send_nack(self, nack: msg.NackReq, now: float) -> None:
        self.mynack = nack
        self._nack_pending = nack
        out = self._sender.outstanding
        if out is not None and isinstance(out.frame, msg.NackReq):
            self._sender.abandon()  # the newer NACK supersedes the unacknowledged one
        self._nack_timer = now + self.cfg.nack_timer
        self.stats.nacks += 1
        if self.trace.enabled:
            # gseq_ranges: the sequence numbers asked for (s1 < gseq < s2), as the group
            # layer's NACKs name theirs: what the pipeline's time to repair starts from.
            wanted = [[nack.s1 + 1, nack.s2 - 1]] if nack.s2 - nack.s1 > 1 else []
            self._emit("nack", now, detail=detail_json(s1=nack.s1, s2=nack.s2,
                                                       gseq_ranges=wanted))
        self._pump(now)

    def _nack_expired(self, now: float) -> None:
        """Figure 6 lines 18-23."""
        self._nack_timer = None
        nack = self._nack_now()
        if nack is not None:
            self._send_nack(nack, now)
        else:
            self.mynack = None

    # ================================================================ uplink
    def _requeue_unconfirmed(self) -> None:
        if not self._unconfirmed:
            return
        queued = {i.nseq for i in self._news}
        again = [item for item, _ in self._unconfirmed.values()
                 if item.nseq not in queued and item.nseq > self._confirmed]
        self.stats.resent_news += len(again)
        self._news = deque(sorted([*again, *self._news], key=lambda i: i.nseq))
        self._unconfirmed.clear()

    def _can_send(self) -> bool:
        return self.cell is not None and self.gateway is not None and self.mid is not None

    def _pump(self, now: float) -> None:
        """Start the next frame if none is outstanding (A1)."""
        if self._leave_requested and self.phase == Phase.MEMBER and not self._news \
                and not self._unconfirmed:
            self._leave_requested = False
            self.phase = Phase.LEAVING
            self._control.append("leave")
        if self._sender.busy or not self._can_send():
            return
        assert self.mid is not None and self.gateway is not None
        rseq = self._sender.next_rseq()
        frame: msg.UplinkMessage | None = None
        if self._control:
            kind = self._control.popleft()
            if kind == "join":
                frame = msg.JoinReq(self.node, self.gateway, rseq, self.mid)
            elif kind == "leave":
                frame = msg.LeaveReq(self.node, self.gateway, rseq, self.mid)
            else:
                frame = msg.LeaveOkReq(self.node, self.gateway, rseq, self.mid)
        elif self._nack_pending is not None:
            n = self._nack_pending
            self._nack_pending = None
            frame = msg.NackReq(self.node, self.gateway, rseq, n.mid, n.s1, n.s2)
        elif self._news and self.phase == Phase.MEMBER:
            items: list[msg.NewItem] = []
            size = 0
            while self._news and (not items or size + len(self._news[0].body) + 16
                                  <= self.cfg.max_datagram):
                item = self._news.popleft()
                items.append(item)
                size += len(item.body) + 16
            frame = msg.NewReq(self.node, self.gateway, rseq, self.mid, tuple(items))
        if frame is not None:
            self._sender.start(rseq, frame, now)
            self._out.append(Uplink(self.gateway, self.gateway_addr, frame))

    def _readdress(self, frame: msg.UplinkMessage) -> msg.UplinkMessage:
        return readdress(frame, self.gateway or "")

    # ================================================================ timers
    def on_timer(self, now: float) -> None:
        if self._nack_timer is not None and now >= self._nack_timer:
            self._nack_expired(now)
        if self._can_send():
            frame = self._sender.due(now, self._readdress)
            if frame is not None:
                self._out.append(Uplink(self.gateway or "", self.gateway_addr, frame))
        if self._unconfirmed:
            _, sent = next(iter(self._unconfirmed.values()))
            if now >= sent + self.cfg.confirm_timeout:
                self._requeue_unconfirmed()
        for kind, acked in list(self._control_acked.items()):
            if now >= acked + self.cfg.confirm_timeout:  # its effect never showed up
                del self._control_acked[kind]
                if kind not in self._control:
                    self._control.append(kind)
        check_host(self, now)  # seeds/004 4.5: a silent host
        self._pump(now)

    def next_deadline(self) -> float | None:
        ds = [d for d in (self._nack_timer,
                          self._sender.deadline() if self._can_send() else None) if d is not None]
        if self._unconfirmed:
            ds.append(next(iter(self._unconfirmed.values()))[1] + self.cfg.confirm_timeout)
        ds.extend(t + self.cfg.confirm_timeout for t in self._control_acked.values())
        if self.cell is not None:
            ds.append(max(self._gateway_heard, self._attached_at, self._move_asked)
                      + self.cfg.host_silence)
        return min(ds) if ds else None

    # ================================================================ outputs
    def drain(self) -> list[Uplink]:
        out, self._out = self._out, []
        return out

    def drain_frames(self) -> list[tuple[Uplink, bytes]]:
        """:meth:`drain`, each frame encoded (sealed afresh in a keyed deployment)."""
        return [(u, self.wire.encode(u.message)) for u in self.drain()]

    def events(self) -> list[MemberEvent]:
        ev, self._events = self._events, []
        return ev

    def take_save(self, now: float | None = None) -> Save[MemberCommit] | None:
        """What changed since the last save (None: nothing, or no store): the driver
        commits it, then writes its trace, before the frames and events it took leave."""
        return None if self.durable is None else self.durable.take(self)

    def _emit(self, event: str, now: float, *, mid: str | None = None, gseq: int | None = None,
              bytes: int | None = None, detail: str | None = None) -> None:
        ev = TraceEvent(self.run_id, self.node, now, event, self.group, mid, None, "total",
                        gseq, bytes, None, detail)
        if self.durable is not None and self.durable.trace_out is not None:
            self.durable.trace_out.append(ev)  # written once the commit makes it true
        else:
            self.trace.emit(ev)

    def restore(self, saved: SavedMember) -> None:
        """Power-on (seeds/001 4.2): take up the saved state (:func:`.member_durable.restore`)."""
        restore(self, saved)
