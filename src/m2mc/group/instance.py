"""One group at one node: the MOP, MSP and repair instances the Group Manager
keeps per group (seeds/000 III.A.4, IX.E ``grpProtocolMap``), its membership
row and its status (heartbeat) messages.

Statuses (beyond the seeds) carry the sender's high-water, those it knows of the
others, membership entries, under total order the sequencer, and the sender's display
name: a node notices a lost *last* message, healed partitions converge, membership news
spreads. One goes ``status_delay`` after a node sends data (in a group larger than a
status slice bare, the high-water alone, or our data again: group/repeats.py); others
every ``status_interval`` or the budget's period in a large group (status_budget.py;
jittered), skipped when one overheard said all ours would, but never for more than
:data:`STATUS_KEEPALIVE` intervals: statuses tell that a member is there (``last_heard``).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import TYPE_CHECKING

from m2mc.group.codec import (
    Ack,
    Data,
    Decided,
    Handover,
    Join,
    Leave,
    MemberEntry,
    Nack,
    Order,
    Prepare,
    Promise,
    Repair,
    Start,
    Status,
    SyncReq,
    SyncResp,
    group_tag,
    record_size,
)
from m2mc.group.events import CatchUpProgress, MemberJoined, MemberLeft, MemberNamed
from m2mc.group.gjlp import MEMBER, GiitRow
from m2mc.group.mop import DUP, NEW, REFUSED
from m2mc.group.msp import Msp
from m2mc.group.order_strategy import NoSequencer, OrderStrategy
from m2mc.group.repair import Repair as RepairState
from m2mc.group.repair import nack_detail
from m2mc.group.repeats import Repeats
from m2mc.group.retention import GroupRetention, earliest
from m2mc.group.status_budget import StatusSlicer, highest, status_bytes
from m2mc.group.status_clock import StatusClock
from m2mc.group.total.strategy import TotalOrderStrategy
from m2mc.group.views import view_change
from m2mc.group.window import Credit, SendWindow
from m2mc.kinds import Order as GroupOrder  # codec's Order is the ORDER body
from m2mc.kinds import ReconnectReason
from m2mc.ordering import Message
from m2mc.security.ratelimit import RateLimiter
from m2mc.trace.schema import detail_json

if TYPE_CHECKING:
    from m2mc.group.port import NodePort

STATUS_KEEPALIVE = 10
"""A member sends a status at least every this many ``status_interval``s, suppressed or not."""


class GroupInstance:
    """One group at one node. It asks its node only what :class:`NodePort` offers,
    and what total order adds only of its order strategy (``ordering``,
    :mod:`m2mc.group.order_strategy`), chosen here once."""

    def __init__(self, node: NodePort, row: GiitRow) -> None:
        self.node = node
        self.pid = node.pid
        self.gid = row.gid
        self.tag = group_tag(row.gid)
        self.row = row
        self.order = row.order
        config = node.config
        self.config = config
        self.last_heard: dict[str, float] = {}
        # The order's strategy, chosen once: total order's sequencing log, or none.
        self.ordering: OrderStrategy = (TotalOrderStrategy(self) if row.order == GroupOrder.TOTAL
                                        else NoSequencer(self))
        self.mop = self.ordering.mop
        self.msp = Msp(node.pid, row.gid, config, node.rng, node.store, self.mop.digest,
                       self.high_waters)
        self.repair = RepairState(node.pid, row.gid, config, node.rng, node.store)
        self.repair.known = lambda pid: row.membership.get(pid) is not None
        self.repair.members = row.membership.current_tuple
        self.repair.sender_alive = self._alive
        self.msp.is_member = row.membership.is_member
        self.msp.group_size = row.membership.__len__
        # This group's SYNC_REQ and NACK (counted in the node's control_limits).
        self.limiter = RateLimiter(node.limit_config, stats=node.control_limits)
        self.repair.decided = self.mop.decided_entries
        self.retention = GroupRetention(self)  # GONE answers and skips (retention)
        # Receiver-paced flow control (group/window.py): our sends, their statuses.
        self.window = SendWindow(node.window_bytes, config.send_window_wait, config.max_members)
        self.credit = Credit(node.window_bytes)
        self.lingering_until: float | None = None
        self.batch: list[Message] = []  # the open batch of our data records
        self.batch_size = 0
        self._full: list[list[Message]] = []  # closed batches waiting to be sent
        self.pending_records = 0
        # batch_hold (config): the open batch waits until hold_until while holding;
        # batch_sent: when the last open batch was sent.
        self.hold_until = float("-inf")
        self.holding = False
        self.batch_sent = float("-inf")
        self.was_held = False  # the open batch waited (the sender is a steady one)
        self.pending_bytes = 0  # their encoded size (the sender's byte backlog counts it)
        # One batch fills one M2MP packet: 500 bytes less the group header (13) and the
        # body's array headers and sender id.
        self.batch_budget = max(64, min(config.batch_bytes, 481 - len(node.pid.encode())))
        self.bulk = False  # set by the node while its M2MP backlog is long
        self.bulk_extra = max(0, config.bulk_batch_bytes - config.batch_bytes)
        # What a status carries and when one goes (group/status_budget.py, status_clock.py).
        self.status_slicer = StatusSlicer(config.status_slice, start=node.pid)
        self.status_clock = StatusClock(config, node.pid, node.rng, STATUS_KEEPALIVE)
        self.repeats = Repeats(config.repeat_above)  # our data sent again, unasked
        self.delivered_count = 0

    # ------------------------------------------------------------ lifecycle
    def restore(self, now: float) -> None:
        """Rebuild the ordering state from the GrpMsgList (join after leave, restart)."""
        for m in self.mop.restore(self.node.store.load_messages(self.gid)):
            self.deliver(m)
        for pid, ivs in self.mop.digest().items():
            if ivs:
                self.repair.hw[pid] = max(self.repair.hw.get(pid, 0), ivs[-1][1])
        self.status_clock.start(now, len(self.row.membership), self.ordering.heartbeat)
        for pid in self.row.membership.current():  # in view from now on (Msp.mark)
            if pid != self.pid:
                self.msp.mark(pid, now)

    def start_sync(self, now: float, why: ReconnectReason | None = None) -> None:
        """SendSyncReq; ``why``: the node is back in range (the trace says how it knew)."""
        self.node.send_body(self.tag, self.msp.request(now))
        self.node.trace("sync_req", self.gid, detail=detail_json(
            sync_seqno=self.msp.sync_seqno, senders=len(self.mop.digest()),
            **({"back": why} if why else {})))

    @property
    def lingering(self) -> bool:
        return self.lingering_until is not None

    # ------------------------------------------------------------- sending
    def queue_data(self, message: Message, now: float) -> None:
        """Add a record of ours to the open batch; a full batch is closed."""
        size = record_size(message)
        budget = self.batch_budget + self.bulk_extra if self.bulk else self.batch_budget
        if self.batch and self.batch_size + size > budget:
            self._full.append(self.batch)
            self.batch = []
            self.batch_size = 0
        self.batch.append(message)
        self.batch_size += size
        self.pending_records += 1
        self.pending_bytes += size
        # Our new high-water, status_delay later, so that a member that lost our last
        # message notices (a bare status in a large group: this one goes per message).
        self.status_clock.budget.data(size)
        self.status_clock.sent_data(now)
        self.repeats.own(message)

    def held(self, now: float) -> bool:
        """True while the records of the open batch wait for more (``batch_hold``):
        until ``hold_until`` (set by :meth:`sending` for a steady sender) or until a
        bulk batch is full."""
        self.holding = holding = (now < self.hold_until
                                  and self.pending_bytes < self.batch_budget + self.bulk_extra)
        if holding:
            self.was_held = True
        return holding

    def sending(self, now: float) -> None:
        """The open batch goes now: hold the next one for ``batch_hold`` if this one
        was held or goes less than ``batch_hold`` after the one before it (a steady
        sender; its first batch after a pause is never held, nor the second of a burst)."""
        hold = self.config.batch_hold
        steady = self.was_held or now - self.batch_sent < hold
        self.hold_until = now + hold if steady else float("-inf")
        self.batch_sent = now
        self.was_held = False

    def release(self) -> None:
        """Hold nothing more: the open batch goes with the next output."""
        self.hold_until = float("-inf")
        self.holding = self.was_held = False

    def take_batches(self, force: bool) -> list[list[Message]]:
        """The closed batches, and the open one too if ``force``."""
        out = self._full
        self.holding = False  # (whatever is left is looked at again by held())
        if force and self.batch:
            out.append(self.batch)
            self.batch = []
            self.batch_size = 0
        if out:
            self._full = []
            self.pending_records = len(self.batch)
            self.pending_bytes = self.batch_size
        return out

    # ------------------------------------------------------------ receiving
    def on_body(self, body: object, now: float) -> None:
        if type(body) is Data and self.lingering_until is None:
            # The hot path, a member's data (as the general path below does it).
            sender = body.sender
            if sender == self.pid:
                self.node.stats.own_echo += 1
                return
            last_heard = self.last_heard
            if sender in last_heard or len(last_heard) < self.config.max_senders:
                last_heard[sender] = now
            if self.msp.waiting:
                self.msp.peer_traffic()
            records = body.records
            self.repeats.fresh(self._records(records, sender, now))
            nbytes = sum([len(m.payload) for m in records])
            self.status_clock.budget.data(nbytes)
            self.status_slicer.read_from(sender)
            if self.credit.read(nbytes):
                self.status_clock.news_now(now)  # how far we read, for the senders' windows
            return
        node = self.node
        sender = getattr(body, "sender", "")
        if sender == self.pid:
            node.stats.own_echo += 1
            return
        if sender in self.last_heard or len(self.last_heard) < self.config.max_senders:
            self.last_heard[sender] = now
        if self.retention.observe(body, now):  # a GONE (NACK, SYNC_REQ: noted, go on)
            return
        if self.lingering and not self.ordering.draining:
            if isinstance(body, Nack):
                self.repair.on_nack(body, now)
            elif isinstance(body, Data | Repair | SyncResp):
                for m in body.records:
                    self.repair.overheard(m.mid)
            elif isinstance(body, _LOG_KINDS):
                self.ordering.on_log_lingering(body, now)
            return
        match body:
            case Data(_, records):
                if self.msp.waiting:
                    self.msp.peer_traffic()
                self.repeats.fresh(self._records(records, sender, now))
                nbytes = sum([len(m.payload) for m in records])
                self.status_clock.budget.data(nbytes)
                self.status_slicer.read_from(sender)
                if self.credit.read(nbytes):
                    self.status_clock.news_now(now)
            case Repair(_, records):
                self.repeats.repaired(self._records(records, sender, now))
                self.msp.broadcast(records, now)  # no MIR of ours needs them any more
            case SyncResp():
                self._sync_resp(body, now)
            case Order() | Ack() | Prepare() | Promise() | Start() | Decided() | Handover():
                self.ordering.on_log(body, now)  # (a wrong kind without a sequencer)
            case Status():
                if self.msp.waiting:
                    self.msp.peer_traffic()
                self._status(body, now)
            case Nack():
                self.repair.overheard_nack(body, now)
                self.repair.on_nack(body, now)
                self.ordering.on_nack(body)
            case SyncReq():
                self.msp.on_request(body, now)  # refused unless the sender is a member
                # MSP both ways: what the requester holds and we lack, we ask for at once.
                if self.msp.is_member(sender) and self.repair.requester_holds(
                        body.digest, self.mop.digest(), now):
                    self.msp.stats.requests_ahead += 1
            case Join(_, version, _, _, name):
                self.msp.mark(sender, now)  # a (re)join: its catch-up starts from here
                self._membership([MemberEntry(sender, version, True)], now, (sender, name))
                self.ordering.tick(now)
            case Leave(_, version):
                self._membership([MemberEntry(sender, version, False)], now)
                self.ordering.tick(now)
            case _:
                node.stats.wrong_kind += 1

    def _records(self, records: list[Message], peer: str, now: float) -> int:
        """The receive hot path: plausibility, repair bookkeeping, ordering, delivery."""
        node = self.node
        accept = self.mop.accept
        repair = self.repair
        hw = repair.hw
        jump = self.config.max_seq_jump
        tracing = node.tracing
        gid = self.gid
        deliver = node.deliver
        # Not tracing, the whole body's deliveries go to the node at once (in order;
        # nothing else emits an event meanwhile).
        delivered: list[Message] = []
        new = 0
        if not tracing and not repair.pending and not repair.tries and records:
            # A sender's batch in order (the common case): the core takes the run in
            # one call (what the loop below does record by record, without tracing).
            pid = records[0].mid.pid
            if hw.get(pid) == records[0].mid.seq - 1:
                new = self.mop.accept_run(records)
                if new:
                    hw[pid] = records[new - 1].mid.seq
                    if new == len(records):
                        self.delivered_count += new
                        node.deliver_many(gid, records[:])  # (a list it may keep)
                        return new
                    delivered = records[:new]
                    records = records[new:]
        for m in records:
            mid = m.mid
            pid = mid.pid
            seq = mid.seq
            h = hw.get(pid)
            if h is None or seq - h > jump:
                if not repair.plausible(pid, seq):
                    continue
                h = 0
            if repair.pending:
                repair.overheard(mid)
            if seq > h:
                hw[pid] = seq
                if seq > h + 1:
                    repair.suspect(now)
            status, out = accept(m)
            if status == NEW:
                new += 1
                if repair.tries:
                    repair.progress(pid, now)
                if tracing:
                    node.trace("recv", self.gid, m, peer=peer)
                if not out or out[0] is not m:
                    repair.suspect(now)
            elif status == DUP:
                node.stats.duplicates += 1
                if tracing:
                    node.trace("dup", self.gid, m, peer=peer)
            elif status == REFUSED:
                node.stats.refused += 1
                repair.suspect(now)
            else:
                node.stats.malformed_records += 1
            if out:
                if tracing:
                    self.delivered_count += len(out)
                    for d in out:
                        deliver(gid, d)
                else:
                    delivered += out
        if delivered:
            self.delivered_count += len(delivered)
            node.deliver_many(gid, delivered)
        return new

    def deliver(self, m: Message) -> None:
        """Hand one message to the application (not the receive hot path's way)."""
        self.delivered_count += 1
        self.node.deliver(self.gid, m)

    def _sync_resp(self, resp: SyncResp, now: float) -> None:
        new = self._records(resp.records, resp.sender, now)
        self.msp.broadcast(resp.records, now)
        if resp.requester == self.pid:
            if self.msp.on_own_response(resp, new, now):
                c = self.msp.catchup
                assert c is not None
                self.node.emit(CatchUpProgress(self.gid, c.recovered, c.remaining, c.done))
                if c.done:
                    self.repair.suspect(now)
        else:
            held_back = self.msp.stats.responses_suppressed
            self.msp.on_response(resp, now)
            self._trace_suppressed(held_back, resp.requester)

    def _trace_suppressed(self, before: int, requester: str | None) -> None:
        """A ``sync_resp`` event for responses MSP decided not to send (others answered)."""
        held_back = self.msp.stats.responses_suppressed - before
        if held_back:
            self.node.trace("sync_resp", self.gid, peer=requester,
                             detail=detail_json(suppressed=True, responses=held_back))

    def _status(self, st: Status, now: float) -> None:
        if self.window.limit and self.row.membership.is_member(st.sender):
            self.window.acked(st.sender, st.summary.get(self.pid, 0), now)
        repair = self.repair
        repair.note_high_water(st.sender, st.own_hw, now)
        # At most max_status_senders high-waters (as ours carry), in order; the rest ignored
        limit = self.config.max_status_senders
        items: Iterable[tuple[str, int]] = st.summary.items()
        if len(st.summary) > limit:
            repair.stats.status_entries_ignored += len(st.summary) - limit
            items = islice(items, limit)
        for pid, hw in items:
            if pid != self.pid:
                repair.note_high_water(pid, hw, now)
        if len(self.row.membership) > self.config.status_slice:  # what it told: not ours soon
            self.status_slicer.heard(st, self.repair.hw.get)
        self._membership(list(st.members), now, (st.sender, st.name))
        if st.members and self.status_slicer.told(st.members, self.row.membership.get):
            self.status_clock.news_told()
        self.ordering.on_status(st, now)
        # Suppression: does this status say everything ours would?
        # (A status that carries a slice of the members never covers ours: the first
        # test is cheap, where the others take time in the size of the group.)
        if (len(st.members) == len(self.row.membership)
                and st.summary.get(self.pid, 0) >= self.mop.own_seq
                and self.row.membership.entries() == st.members
                and all(st.summary.get(pid, 0) >= hw
                        for pid, hw in self._summary().items() if pid != st.sender)):
            self.status_clock.covered()

    def _membership(self, entries: list[MemberEntry], now: float,
                    said: tuple[str, str] | None = None) -> None:
        """Merge membership news; ``said``: (sender, the display name it says it has),
        from its own JOIN or STATUS (names: m2mc.group.names)."""
        node = self.node
        row = self.row
        is_member = row.membership.is_member
        # Who of them was a member: the view (the current members) changed if one of
        # them is in or out now (compared so, not as lists of the whole group).
        was = {e.pid: is_member(e.pid) for e in entries}
        changed = row.membership.merge(entries)
        renamed = (said is not None and row.membership.get(said[0]) is not None
                   and row.names.said(*said))
        if not changed:
            if renamed and said is not None and row.membership.is_member(said[0]):
                node.emit(MemberNamed(self.gid, said[0], said[1]))
            return
        mine = row.membership.get(self.pid)
        if (mine is not None and not mine.joined and row.state == MEMBER
                and not self.lingering):
            # Someone says we left, under a version we did not give to our current
            # membership (an earlier incarnation's leave): we are in, above it.
            node.refute(self, mine.version, now)
        announced = False
        self.status_slicer.membership_changed(e.pid for e in changed)
        if changed and len(row.membership) > self.config.status_slice:
            # membership news in a large group: told by a status soon (suppressible)
            self.status_clock.news(now, len(row.membership))
        for e in changed:
            if e.pid == self.pid:
                continue
            if e.joined:
                self.msp.mark(e.pid, now)
                self.msp.admitted(e.pid, now)
                announced = announced or (said is not None and e.pid == said[0])
                node.emit(MemberJoined(self.gid, e.pid, row.names.get(e.pid)))
            else:
                self.window.forget(e.pid, now)
                node.emit(MemberLeft(self.gid, e.pid))
        if renamed and not announced and said is not None and row.membership.is_member(said[0]):
            node.emit(MemberNamed(self.gid, said[0], said[1]))
        node.save_row(row, [e.pid for e in changed])
        if node.tracing:
            moved = [pid for pid, before in was.items() if is_member(pid) != before]
            if moved:
                node.trace("view", self.gid, detail=view_change(row, moved))

    # -------------------------------------------------------------- leaving
    def start_leave(self, now: float) -> None:
        """The node left: linger (answer repairs); the order may go on delivering
        what is ordered before our departure, and acknowledging, meanwhile."""
        self.lingering_until = now + self.config.leave_linger
        self.ordering.start_leave(now, self.lingering_until)
        self.window.close()  # we send nothing more here: never hold other groups' sends

    def linger_over(self, now: float) -> bool:
        if self.ordering.still_draining(now):
            return False
        return self.lingering_until is not None and now >= self.lingering_until

    # --------------------------------------------------------------- status
    def _summary(self, sending: bool = False) -> dict[str, int]:
        """The high-waters a status carries: the ``max_status_senders`` highest."""
        summary = self.high_waters()
        kept = highest(summary, self.config.max_status_senders)
        if sending and kept is not summary:
            self.repair.stats.status_truncated += 1
        return kept

    def high_waters(self) -> dict[str, int]:
        out = dict(self.repair.hw)
        if self.mop.own_seq:
            out[self.pid] = self.mop.own_seq
        return out

    def make_status(self, fill: bool = True, bare: bool = False) -> Status:
        """Our status; ``fill``: a periodic one, whose high-waters and membership
        entries beyond those that changed take turns (group/status_budget.py);
        ``bare``: our own high-water only (what we just sent, in a large group)."""
        log_state, known = self.ordering.status_log()
        if bare:
            return Status(self.pid, self.mop.own_seq, {}, (), log_state, known, self.node.name)
        self.credit.status_sent()
        slicer = self.status_slicer
        summary = slicer.summary(self._summary(sending=True), fill)
        members = slicer.members(self.row.membership.entries(), fill)
        if fill:
            self.status_clock.size = status_bytes(summary, members)
        return Status(self.pid, self.mop.own_seq, summary, members, log_state, known,
                      self.node.name)

    def renamed(self, now: float) -> None:
        """Our display name changed: say so in a status soon."""
        self.row.names.said(self.pid, self.node.name)
        self.status_clock.news_soon(now)

    def _alive(self, pid: str, now: float) -> bool:
        """A member heard from within a status keepalive: it answers NACKs for its own
        messages itself (group/repair.py)."""
        heard = self.last_heard.get(pid)
        return (heard is not None
                and now - heard <= STATUS_KEEPALIVE * self.status_clock.scale
                and self.row.membership.is_member(pid))

    # --------------------------------------------------------------- timers
    def on_timer(self, now: float) -> None:
        node = self.node
        ordering = self.ordering
        if self.lingering and not ordering.draining:
            for_repair = self.repair.repair_due(now)
            if for_repair:
                node.send_repairs(self, for_repair)
            self._send_decided()
            ordering.on_timer_lingering(now)
            return
        mop = self.mop
        ordering.on_timer(now)
        self.window.on_timer(now)
        repair = self.repair
        msp = self.msp
        if msp.retry_due(now):
            self.start_sync(now)
        catching_up = msp.catchup is not None and not msp.catchup.done
        if repair.check_due(now):
            if catching_up:
                repair.defer(msp.catchup.deadline if msp.catchup else now)
            else:
                repair.check(repair.needs(mop.digest(), mop.missing(), mop.missing_gseqs(), now),
                             now)
        if repair.nack_due(now):
            nack = repair.make_nack(
                repair.needs(mop.digest(), mop.missing(), mop.missing_gseqs(), now), now)
            if nack is not None:
                node.send_body(self.tag, nack)
                if node.tracing:
                    node.trace("nack", self.gid, detail=nack_detail(nack))
            else:  # others' NACKs (or the data itself) covered what we lacked
                node.trace("nack", self.gid, detail=detail_json(suppressed=True))
        for_repair = repair.repair_due(now)
        if for_repair:
            node.send_repairs(self, for_repair)
            msp.broadcast(for_repair, now)
        self._send_decided()
        self.retention.on_timer(now)
        held_back = msp.stats.responses_suppressed
        for resp in msp.due(now):
            node.send_body(self.tag, resp)
            node.trace("sync_resp", self.gid, peer=resp.requester, detail=detail_json(
                sync_seqno=resp.sync_seqno, messages=len(resp.records), remaining=resp.remaining))
        self._trace_suppressed(held_back, None)
        # A status is also a heartbeat: at least every STATUS_KEEPALIVE intervals, and as
        # often as the order asks (total order: its configuration is of members heard lately).
        due = self.status_clock.due(now, len(self.row.membership), ordering.heartbeat)
        if due.soon:  # (in a large lossy group, with our data again: group/repeats.py)
            again = self.repeats.take(len(self.row.membership), due.bare)
            if again:
                node.send_repairs(self, again, repeat=True)
                msp.broadcast(again, now)
                repair.sent_again(again)
            node.send_body(self.tag, self.make_status(fill=False, bare=due.bare))
        if due.periodic:
            node.send_body(self.tag, self.make_status())
        elif due.suppressed:
            node.stats.status_suppressed += 1
        if due.periodic or due.suppressed:
            ordering.tick(now)

    def _send_decided(self) -> None:
        entries = self.repair.take_decided()
        for i in range(0, len(entries), 64):
            self.node.send_body(self.tag, Decided(self.pid, entries[i:i + 64]))

    def next_deadline(self) -> float | None:
        log_deadline = self.ordering.next_deadline()
        if self.lingering and not self.ordering.draining:  # only answering repairs until it ends
            return earliest(self.repair.repair_deadline, self.lingering_until, log_deadline)
        return earliest(self.repair.next_deadline(), self.status_clock.next_deadline(),
                        self.msp.next_deadline(), log_deadline, self.retention.next_deadline(),
                        self.window.deadline(),
                        self.hold_until if self.holding and self.pending_records else None)


_LOG_KINDS = (Order, Ack, Prepare, Promise, Start, Decided, Handover)

