"""MOP of a total-order group in ad hoc mode: :class:`TotalMop`.

One member, the sequencer, gives each message a position (gseq) in the group's
sequencing log (:mod:`m2mc.group.total.seqlog`); a position is delivered only
once a majority of the group's configuration holds it, so two sides of a
partition never number messages differently, and a side without a majority
holds its messages until the heal (docs/group.md section 5, docs/decisions.md).
The sequencer stamps a reply only after the message it answers, so total order
never delivers a child before its parent.

Built only for a total-order group (:mod:`m2mc.group.total.strategy`); the
other orders use the plain :class:`~m2mc.group.mop.Mop`.
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.group.config import GroupConfig
from m2mc.group.messages import Entries, MemberEntry
from m2mc.group.mop import DUP, NEW, REFUSED, Mop
from m2mc.group.seqsets import Intervals, contains, normalize
from m2mc.group.total.seqlog import SeqLog
from m2mc.kinds import Order
from m2mc.ordering import IntervalList, Message, MessageId, TotalOrder
from m2mc.ordering.ids import make_message
from m2mc.store import GroupStore, StoredMessage


class TotalMop(Mop):
    __slots__ = ("_backlog", "_unstamped_seqs", "_waiting_parent", "log", "max_gseq",
                 "own_ordered", "stamps", "stamps_refused", "tcore", "unstamped",
                 "unstamped_refused")

    def __init__(self, pid: str, gid: str, order: Order, config: GroupConfig,
                 store: GroupStore) -> None:
        super().__init__(pid, gid, order, config, store)
        core = self.core
        assert isinstance(core, TotalOrder)
        self.tcore = core
        self.log = SeqLog(pid, config)
        self.unstamped: dict[MessageId, Message] = {}  # data whose position is not decided
        # The seqnos of `unstamped`, per sender, kept with it (the digest reads them: a
        # backlog of tens of thousands of messages is a few intervals).
        self._unstamped_seqs: dict[str, IntervalList] = {}
        self.stamps: dict[MessageId, list[int]] = {}  # decided positions whose data we lack
        self.max_gseq = 0
        self.own_ordered = 0  # the highest of our own seqnos delivered (sender pacing)
        self._waiting_parent: dict[MessageId, list[Message]] = {}  # sequencer: replies
        self._backlog = False  # sequencer: data left unstamped (window full)
        # Bound max_unstamped (each table): data refused; decided positions whose data we
        # lack not kept (forgotten by the log, asked for again once there is room).
        self.unstamped_refused = 0
        self.stamps_refused = 0

    # ------------------------------------------------------------- restart
    def restore(self, stored: Iterable[StoredMessage]) -> list[Message]:
        items = list(stored)
        for item in items:
            if item.message.gseq is not None:
                self.max_gseq = max(self.max_gseq, item.message.gseq)
        return super().restore(items)

    def _stub_is_gone(self, stub: Message) -> bool:
        return stub.gseq is None  # (learnt without its position)

    def _resume(self, gseq_floor: int) -> list[Message]:
        out: list[Message] = []
        core = self.tcore
        if gseq_floor:
            self.max_gseq = max(self.max_gseq, gseq_floor)
            out.extend(core.skip_to(gseq_floor + 1))
        out.extend(super()._resume(gseq_floor))
        self.log.load_log(self.store, self.gid, core.next_gseq)
        return out

    def _restored(self) -> list[Message]:
        return self.pump()

    def save_log(self) -> None:
        """Write the sequencing log if it changed (before any datagram leaves)."""
        self.log.save_log(self.store, self.gid)

    # ------------------------------------------------------------- receive
    def accept(self, message: Message, persist: bool = True) -> tuple[int, list[Message]]:
        core = self.core
        mid = message.mid
        gseq = message.gseq
        status = NEW
        if mid in self.unstamped or core.has(mid):
            status = DUP
        elif gseq is not None and mid not in self.stamps and self.log.handed_out(gseq):
            # Its committed position is behind us and was not waiting for its data: it
            # was delivered here (a store from before every delivery was marked, or one
            # whose mark a crash lost) or given up. Held again, the next sequencer would
            # give it a second position (and every member that restarted would deliver
            # it twice): it is a duplicate.
            core.duplicates += 1
            if not persist:  # (restoring: it stays delivered from now on)
                self.store.mark_delivered(self.gid, mid)
            return DUP, []
        else:
            if len(self.unstamped) >= self.config.max_unstamped:
                self.unstamped_refused += 1
                return REFUSED, []
            if gseq is not None:
                message = Message(mid, message.parent, message.payload, message.vclock, None)
            self.unstamped[mid] = message
            seqs = self._unstamped_seqs.get(mid.pid)
            if seqs is None:
                seqs = self._unstamped_seqs[mid.pid] = IntervalList()
            seqs.add(mid.seq)
            if persist:
                self.store.put(self.gid, message, False)
        # A record repaired with its committed position: the pump below puts it there
        # (stamping it too would give it a second position).
        learnt = gseq is not None and self.log.learn(gseq, mid)
        out: list[Message] = []
        if status == NEW:
            positions = self.stamps.pop(mid, None)
            if positions is not None:
                for pos in positions:
                    self._place(pos, mid, out)
            elif not learnt and self.log.is_leader:
                self._stamp(message)
        out.extend(self.pump())
        return status, out

    # ------------------------------------------------------------ retention
    def skip(self, ids: dict[str, Intervals], gseqs: Intervals
             ) -> tuple[list[Message], Intervals]:
        """As :meth:`Mop.skip`; the positions passed over are ``gseqs`` and those
        decided for the identities given up."""
        core = self.tcore
        out: list[Message] = []
        out.extend(self.pump())  # what was decided before goes first
        positions = list(gseqs)
        for mid in [m for m in self.stamps if contains(ids.get(m.pid, []), m.seq)]:
            positions.extend((p, p) for p in self.stamps.pop(mid))
        positions = normalize(positions)
        core.preload_intervals(ids)  # later copies are duplicates
        jumped = self.log.pass_over(positions)
        if jumped > core.next_gseq:
            self._number(core.skip_to(jumped), out)
        out.extend(self.pump())
        self.max_gseq = max(self.max_gseq, core.next_gseq - 1)
        return out, positions  # (each marked delivered by _number)

    # --------------------------------------------------------- the log's decisions
    def pump(self) -> list[Message]:
        """Apply what the log decided, and stamp what waits (sequencer); returns deliveries."""
        out: list[Message] = []
        log = self.log
        while True:
            if log.has_decided:
                for pos, entry in log.take_decided():
                    if isinstance(entry, MemberEntry):
                        self._number(self.tcore.fill(pos), out)
                    else:
                        self._place(pos, entry, out)
                continue
            if self._backlog and log.room():
                self._backlog = False
                self.stamp_waiting()
                continue
            break
        return out

    def _place(self, pos: int, mid: MessageId, out: list[Message]) -> None:
        """Position ``pos`` is decided to hold ``mid``."""
        core = self.tcore
        self.max_gseq = max(self.max_gseq, pos)
        message = self.unstamped.pop(mid, None)
        if message is not None:
            seqs = self._unstamped_seqs[mid.pid]
            seqs.discard(mid.seq)
            if not seqs.lows:
                del self._unstamped_seqs[mid.pid]
        if message is None:
            if core.delivered(mid):
                self._number(core.fill(pos), out)  # placed twice: delivered at the first place
                return
            held = core.held_message(mid)
            if held is None:
                positions = self.stamps.get(mid)
                if positions is None:
                    if len(self.stamps) >= self.config.max_unstamped and pos != core.next_gseq:
                        self.stamps_refused += 1
                        self.log.forget(pos)  # asked for again once there is room
                        return
                    positions = self.stamps[mid] = []
                if pos not in positions:
                    positions.append(pos)
                return
            message = held
        else:
            self.store.set_gseq(self.gid, mid, pos)
        self._number(core.receive(make_message(mid, message.parent, message.payload,
                                               message.vclock, pos)), out)
        if self._waiting_parent:
            children = self._waiting_parent.pop(mid, None)
            for child in children or ():
                if child.mid in self.unstamped and self.log.position_of(child.mid) is None:
                    self._stamp(child)

    def number(self, gseq: int | None) -> int | None:
        return None if gseq is None else gseq - self.log.records_before(gseq)

    def _number(self, delivered: list[Message], out: list[Message]) -> None:
        """Delivered messages carry their number among messages (``gseq``), not their
        log position: membership records take positions but no numbers, so messages
        are numbered 1, 2, 3, ... in every member."""
        records_before = self.log.records_before
        # Every delivery is marked in the store here, whatever released it (its data,
        # its position, or a membership record filling the position before it): a
        # restart must not take a delivered message for one still to be placed.
        mark_delivered, gid, pid = self.store.mark_delivered, self.gid, self.pid
        for m in delivered:
            pos = m.gseq
            assert pos is not None
            mid = m.mid
            mark_delivered(gid, mid)
            if mid.pid == pid and mid.seq > self.own_ordered:
                self.own_ordered = mid.seq
            out.append(make_message(mid, m.parent, m.payload, m.vclock,
                                    pos - records_before(pos)))

    # ------------------------------------------------------------ sequencer
    def _placed(self, mid: MessageId) -> bool:
        return (self.core.has(mid) or mid in self.stamps
                or self.log.position_of(mid) is not None)

    def _stamp(self, message: Message) -> None:
        """Sequencer: propose ``message`` once its parent has a position, then its
        waiting children. Never a message our log holds already: a take-over adopts
        entries whose data may come only later, and a second position for it would
        be filled with nothing (delivered at the first) and unknown to any store, so
        a member that missed its entry could never get past it (NACKed in vain)."""
        if self.log.position_of(message.mid) is not None:
            return
        parent = message.parent
        if not parent.is_root and not self._placed(parent):
            waiting = self._waiting_parent.setdefault(parent, [])
            if message not in waiting:
                waiting.append(message)
            return
        if self.log.propose(message.mid) is None:
            self._backlog = True
            return
        children = self._waiting_parent.pop(message.mid, None)
        for child in children or ():
            if child.mid in self.unstamped and self.log.position_of(child.mid) is None:
                self._stamp(child)

    def stamp_waiting(self) -> None:
        """Sequencer: propose every held message the log does not have yet (after a
        take-over, or when the window of uncommitted stamps opens again)."""
        if not self.log.is_leader:
            self._waiting_parent.clear()
            return
        position_of = self.log.position_of
        # Walked in place, not copied: stamping changes nothing in `unstamped` (it is
        # called each time the window opens, and the backlog may be the whole send).
        with self.log.proposals():  # the commit point moves once, after them all
            for mid, message in self.unstamped.items():
                if position_of(mid) is None:
                    self._stamp(message)
                    if self._backlog:
                        return

    def decided_entries(self, lo: int, hi: int) -> Entries:
        """Decided entries in ``lo..hi`` a NACK may need beyond the stored records:
        membership records, and positions whose data we lack too."""
        out = self.log.decided_entries(lo, hi)
        if self.stamps:
            for mid, positions in self.stamps.items():
                out.extend((p, mid) for p in positions if lo <= p <= hi)
        return out

    @property
    def is_sequencer(self) -> bool:
        return self.log.is_leader

    @property
    def seqr(self) -> tuple[object, ...] | None:
        """The sequencing log's state (what a forged message must not change)."""
        log = self.log
        return (log.promised, log.ballot, log.commit_b, log.high, log.is_leader)

    # -------------------------------------------------------------- queries
    def has(self, mid: MessageId) -> bool:
        return self.core.has(mid) or mid in self.unstamped

    def digest(self) -> dict[str, Intervals]:
        """Per sender, the seqnos this node holds (delivered, held or unstamped)."""
        digest = self.core.digest()
        unstamped = self._unstamped_seqs
        if unstamped:
            # Senders known only by their unstamped messages come after the others,
            # in the order of their first message in `unstamped`.
            new = [pid for pid in unstamped if pid not in digest]
            if len(new) > 1:
                first: dict[str, None] = {}
                for mid in self.unstamped:
                    if mid.pid not in digest and mid.pid not in first:
                        first[mid.pid] = None
                        if len(first) == len(new):
                            break
                new = list(first)
            for pid in [p for p in unstamped if p in digest] + new:
                runs = digest.get(pid)
                ivs = unstamped[pid].intervals()
                digest[pid] = normalize(runs + ivs) if runs else ivs
        return digest

    def missing(self) -> list[MessageId]:
        """Identities known to be needed and not held (parents; decided data)."""
        out = list(self.core.missing())
        out.extend(self.stamps)
        out.extend(p for p in self._waiting_parent if not self.has(p))
        return out

    def missing_gseqs(self) -> Intervals:
        """Committed positions whose entry we do not know."""
        return normalize(self.log.missing_positions(self.config.max_nack_intervals))
