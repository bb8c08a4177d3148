"""The order strategy of a total-order group: :class:`TotalOrderStrategy`
(:class:`~m2mc.group.order_strategy.OrderStrategy`), built once, when the group
instance is, and only for a total-order group.

It owns the group's :class:`~m2mc.group.total.mop.TotalMop` and through it the
sequencing log (:mod:`m2mc.group.total.seqlog`), and wires the log to the
instance: the log's messages in, the decisions out as deliveries (``_pump``,
with an ``elect`` trace event per take-over or hand-over), the role policy's
tick with the current membership, STATUS in both directions, the founding of
the log by its creator, the hand-over of a leaving sequencer, and a leaver that
goes on delivering (*draining*) until everything ordered before its removal
record is delivered, within ``leave_linger + 2 * sequencer_timeout``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m2mc.errors import BufferFullError
from m2mc.group.messages import (
    Ack,
    Body,
    Decided,
    Handover,
    LogState,
    Nack,
    Order,
    Prepare,
    Promise,
    Start,
    Status,
)
from m2mc.group.seqsets import Intervals, subtract
from m2mc.group.total.mop import TotalMop
from m2mc.ordering import MessageId
from m2mc.trace.schema import detail_json

# Sends wait while this many times max_uncommitted of ours are not delivered here.
ORDER_PACE = 4

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from m2mc.group.port import InstancePort


class TotalOrderStrategy:
    """Total order in ad hoc mode: a sequencer's log committed by majorities."""

    __slots__ = ("blocked", "draining", "heartbeat", "inst", "linger_limit", "log", "mop",
                 "pace_limit", "pace_moved", "pace_ordered", "sent_seq")

    def __init__(self, inst: InstancePort) -> None:
        self.inst = inst
        config = inst.config
        self.mop = TotalMop(inst.pid, inst.gid, inst.order, config, inst.node.store)
        self.log = log = self.mop.log
        membership = inst.row.membership
        log.last_heard = inst.last_heard
        log.is_member = lambda pid: membership.get(pid) is not None
        # The configuration (and the sequencer's successor) is chosen among the
        # members heard lately: a status at least every sequencer_timeout / 4.
        self.heartbeat = config.sequencer_timeout / 4
        # A leaver goes on delivering until its departure is ordered (every message
        # before its removal record), within linger_limit.
        self.draining = False
        self.linger_limit: float | None = None
        # The sender's pacing by the order (module docstring of the API's back-pressure,
        # group/backlog.py): sends wait while pace_limit of ours are not delivered here
        # yet, unless our deliveries have not moved for send_window_wait (no majority:
        # sends go on as before, into the unstamped backlog). 0: the window is off.
        self.pace_limit = ORDER_PACE * config.max_uncommitted if inst.node.window_bytes else 0
        self.blocked = False
        self.sent_seq = 0  # the highest of our seqnos sent
        self.pace_ordered = 0  # ...delivered here, when last seen
        self.pace_moved = float("-inf")  # when that was seen to move

    # ------------------------------------------------------------ the log's input
    def on_log(self, body: Body, now: float) -> None:
        inst = self.inst
        if type(body) is Order:
            repair = inst.repair
            for _, entry in body.stamps:
                if type(entry) is MessageId and repair.plausible(entry.pid, entry.seq):
                    repair.note(entry.pid, entry.seq, now)
        elif type(body) is Decided:
            inst.repair.overheard_decided(body.entries)
        self._log_input(body, now)
        self._pump(now)

    def on_log_lingering(self, body: Body, now: float) -> None:
        # A leaver still acknowledges and promises until the configuration no
        # longer counts it (it delivers nothing any more).
        self._log_input(body, now)
        self.log.take_decided()

    def _log_input(self, body: Body, now: float) -> None:
        log = self.log
        match body:
            case Order():
                log.on_order(body, now)
            case Ack():
                log.on_ack(body, now)
            case Prepare():
                log.on_prepare(body, now)
            case Promise():
                log.on_promise(body, now)
            case Start():
                log.on_start(body, now)
            case Decided(_, entries):
                log.on_decided(entries)
            case Handover():
                log.on_handover(body, now)

    def on_nack(self, nack: Nack) -> None:
        if nack.gseqs:
            self.log.on_nack_positions(nack.gseqs)

    def on_status(self, st: Status, now: float) -> None:
        log = self.log
        known = log.known
        log.on_status(st.sender, st.sequencer, st.max_gseq, now)
        if log.known > known:
            self.inst.repair.suspect(now)
        self._pump(now)

    def status_log(self) -> tuple[LogState | None, int]:
        log = self.log
        return log.state(), log.known

    # --------------------------------------------------------- the log's decisions
    def _pump(self, now: float) -> None:
        """Deliver what the sequencing log decided; a new sequencer stamps what waits."""
        inst = self.inst
        mop = self.mop
        log = self.log
        lead = False
        if log.elected:
            node = inst.node
            for what, ballot, base, high in log.elected:
                if what == "lead":
                    lead = True
                    node.trace("elect", inst.gid, detail=detail_json(
                        epoch=ballot[0], sequencer=ballot[1], next_gseq=high + 1, base=base))
                else:
                    target = log.handover_target
                    node.trace("elect", inst.gid, peer=target, detail=detail_json(
                        epoch=ballot[0] + 1, sequencer=target, next_gseq=high + 1,
                        handover=True))
            log.elected.clear()
        out = mop.pump()
        if lead:
            mop.stamp_waiting()
            out.extend(mop.pump())
        for m in out:
            inst.deliver(m)
        if log.known > log.emitted or mop.stamps or log.heard_high > log.high:
            inst.repair.suspect(now)
        if self.draining:
            self._check_drained()
        if self.blocked:
            self._settle_pace(now)

    # ------------------------------------------------------ the sender's pacing
    def sent(self, seq: int, now: float) -> None:
        """We sent our data message ``seq``."""
        self.sent_seq = seq
        if self.pace_limit and not self.blocked and \
                seq - self.mop.own_ordered >= self.pace_limit:
            self._settle_pace(now)

    def send_room(self) -> int:
        """Sends that pass before the pacing blocks: ``sent`` blocks once ``pace_limit``
        of ours are not delivered here, so the k-th next send (from 0) passes while
        ``sent_seq + k - own_ordered < pace_limit`` (one less, to be safe)."""
        if self.blocked:
            return 0
        if not self.pace_limit:
            return 1 << 30
        return max(0, self.pace_limit - (self.sent_seq - self.mop.own_ordered) - 1)

    def _settle_pace(self, now: float) -> None:
        own = self.mop.own_ordered
        if own > self.pace_ordered:
            self.pace_ordered = own
            self.pace_moved = now
        # Once blocked, sends go on when half of the limit is free again (one wake-up of
        # the application per half a window, not per message ordered).
        limit = self.pace_limit // 2 if self.blocked else self.pace_limit
        self.blocked = (bool(limit) and self.sent_seq - own >= limit
                        and now - self.pace_moved < self.inst.config.send_window_wait)

    def _check_drained(self) -> None:
        """A leaver has delivered everything ordered before its removal record."""
        log = self.log
        pid = self.inst.pid
        mine = [p for p, e in log.conf.items() if e.pid == pid]
        if mine:
            last = max(mine)
            if not log.conf[last].joined and self.mop.tcore.next_gseq > last:
                self.draining = False

    # ------------------------------------------------------------ the role policy
    def tick(self, now: float) -> None:
        """The sequencing log's role policy (take-over, hand-over, configuration)."""
        if self.inst.lingering:
            return
        membership = self.inst.row.membership
        current = {pid: e for pid in membership.current()
                   if (e := membership.get(pid)) is not None}
        self.log.tick(now, current)
        self._pump(now)

    def joined(self, now: float, creating: bool, alone: bool) -> None:
        if creating:  # the creator starts the group's sequencing log
            entry = self.inst.row.membership.get(self.inst.pid)
            assert entry is not None
            self.log.found(now, entry)
            self._pump(now)
        else:  # joined by name, nobody else known: the lowest member founds its log
            self.log.may_found = alone

    def check_send(self, gid: str) -> None:
        waiting = len(self.mop.unstamped)
        if waiting >= self.inst.config.max_unstamped:
            raise BufferFullError(f"group {gid!r}: {waiting} messages wait for "
                                  "the total order (no majority of the group is reachable)")

    def hand_over_for_leave(self, now: float) -> None:
        """Leaving: the sequencer hands over to the lowest other live member."""
        log = self.log
        if not log.is_leader:
            return
        inst = self.inst
        others = [p for p in log.config_end() if p != inst.pid and
                  now - inst.last_heard.get(p, float("-inf")) < inst.config.sequencer_timeout]
        if others:
            log.hand_over(min(others), now)
            self._pump(now)

    def start_leave(self, now: float, lingering_until: float) -> None:
        """Go on delivering what is ordered before our removal record, and
        acknowledging, meanwhile."""
        self.pace_limit = 0  # we send nothing more here: never hold other groups' sends
        self.blocked = False
        self.draining = True
        self.linger_limit = lingering_until + 2 * self.inst.config.sequencer_timeout

    def still_draining(self, now: float) -> bool:
        if self.draining:
            if self.linger_limit is not None and now < self.linger_limit:
                return True
            self.draining = False
        return False

    # --------------------------------------------------------------- output, timers
    def flush(self, now: float) -> None:
        """Send what the sequencing log has to say; persist it first."""
        bodies = self.log.flush(now)
        self.mop.save_log()
        inst = self.inst
        for body in bodies:
            inst.node.send_body(inst.tag, body)

    def on_timer(self, now: float) -> None:
        self.log.on_timer(now)
        self._pump(now)

    def on_timer_lingering(self, now: float) -> None:
        self.log.on_timer(now)
        self.log.take_decided()

    def next_deadline(self) -> float | None:
        deadline = self.log.next_deadline()
        if self.blocked:  # sends go on once our deliveries have not moved for the wait
            due = self.pace_moved + self.inst.config.send_window_wait
            if deadline is None or due < deadline:
                return due
        return deadline

    def records_in(self, gseqs: Intervals) -> Intervals:
        if not gseqs:
            return gseqs
        conf = sorted(p for p in self.log.conf if any(lo <= p <= hi for lo, hi in gseqs))
        return subtract(gseqs, [(p, p) for p in conf])

    def stats_tables(self) -> tuple[DataclassInstance, ...]:
        return (self.log.stats,)
