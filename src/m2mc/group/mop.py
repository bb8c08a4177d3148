"""MOP, one group's Message Ordering Protocol (seeds/000 IV): the ordering core
chosen at creation (S_b by default; causal, FIFO or total), the sender side
(RESPOND state: next seqno, parent, vector clock) and the group's GrpMsgList
in the store.

Total order in ad hoc mode: one member, the sequencer, gives each message a
position (gseq) in the group's sequencing log (:mod:`m2mc.group.seqlog`); a
position is delivered only once a majority of the group's configuration holds
it, so two sides of a partition never number messages differently, and a side
without a majority holds its messages until the heal (docs/group.md section 5,
docs/decisions.md). The sequencer stamps a reply only after the message it
answers, so total order never delivers a child before its parent.
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.group.codec import Entries, MemberEntry
from m2mc.group.config import GroupConfig
from m2mc.group.seqlog import SeqLog
from m2mc.group.seqsets import Intervals, contains, normalize
from m2mc.ordering import ROOT, Message, MessageId, TotalOrder, make_core
from m2mc.ordering.causal import CausalOrder
from m2mc.ordering.ids import make_message, make_mid
from m2mc.store import GroupStore, StoredMessage

NEW = 0
DUP = 1
REFUSED = 2
MALFORMED = 3
_LOG_META = "tlog/"  # store meta key prefix: "tlog/<gid>" = the sequencing log (JSON)
_CONF_META = "/conf"  # "tlog/<gid>/conf": its decided membership records (JSON)


class Mop:
    __slots__ = ("_backlog", "_waiting_parent", "config", "core", "gid", "log", "max_gseq",
                 "order", "own_seq", "pid", "stamps", "stamps_refused", "store", "unstamped",
                 "unstamped_refused")

    def __init__(self, pid: str, gid: str, order: str, config: GroupConfig,
                 store: GroupStore) -> None:
        self.pid = pid
        self.gid = gid
        self.order = order
        self.config = config
        self.store = store
        self.core = make_core(order, max_held=config.max_held)
        self.own_seq = store.high_water(gid, pid)
        # Total order only.
        self.log = SeqLog(pid, config)
        self.unstamped: dict[MessageId, Message] = {}  # data whose position is not decided
        self.stamps: dict[MessageId, list[int]] = {}  # decided positions whose data we lack
        self.max_gseq = 0
        self._waiting_parent: dict[MessageId, list[Message]] = {}  # sequencer: replies
        self._backlog = False  # sequencer: data left unstamped (window full)
        # Bound max_unstamped (each table): data refused; decided positions whose data we
        # lack not kept (forgotten by the log, asked for again once there is room).
        self.unstamped_refused = 0
        self.stamps_refused = 0

    # ------------------------------------------------------------- restart
    def restore(self, stored: Iterable[StoredMessage]) -> list[Message]:
        """Rebuild from the GrpMsgList: delivered ones are preloaded, the others
        received again. Returns what became deliverable (normally nothing).

        What retention evicted (or this node skipped) was delivered too: the stubs
        and the log's gone intervals are preloaded with them, so no held message
        waits for one and none is delivered again (docs/group.md section 8)."""
        delivered: list[Message] = []
        pending: list[Message] = []
        for item in stored:
            (delivered if item.delivered else pending).append(item.message)
            if item.message.gseq is not None:
                self.max_gseq = max(self.max_gseq, item.message.gseq)
        gone = self.store.gone(self.gid)
        for stub in self.store.load_stubs(self.gid):
            if stub.gseq is None and self.order == "total":  # (learnt without its position)
                gone.add(stub.mid.pid, [(stub.mid.seq, stub.mid.seq)])
            else:
                delivered.append(stub)
        self.core.preload(delivered)
        if gone.ids:
            self.core.preload_intervals(gone.ids)
        out: list[Message] = []
        if gone.gseq_floor and isinstance(self.core, TotalOrder):
            self.max_gseq = max(self.max_gseq, gone.gseq_floor)
            out.extend(self.core.skip_to(gone.gseq_floor + 1))
        take_ready = getattr(self.core, "take_ready", None)
        if take_ready is not None:
            out.extend(take_ready())
        if self.order == "total":
            core = self.core
            assert isinstance(core, TotalOrder)
            self.log.restore(self.store.get_meta(_LOG_META + self.gid), core.next_gseq,
                             self.store.get_meta(_LOG_META + self.gid + _CONF_META))
        for message in pending:
            _, released = self.accept(message, persist=False)
            out.extend(released)
        if self.order == "total":
            out.extend(self.pump())
        for message in out:
            self.store.mark_delivered(self.gid, message.mid)
        return out

    def save_log(self) -> None:
        """Write the sequencing log if it changed (before any datagram leaves)."""
        if self.log.dirty:
            self.store.set_meta(_LOG_META + self.gid, self.log.dumps())
        if self.log.conf_dirty:
            self.store.set_meta(_LOG_META + self.gid + _CONF_META, self.log.dumps_conf())

    # ---------------------------------------------------------------- send
    def next_message(self, payload: bytes, parent: MessageId = ROOT) -> Message:
        """RESPOND state: a new identity ``<pid, seqno+1>`` and its ordering headers."""
        self.own_seq += 1
        mid = make_mid(self.pid, self.own_seq)
        vclock = None
        if self.order == "causal" and isinstance(self.core, CausalOrder):
            vclock = self.core.clock
            vclock[self.pid] = self.own_seq
            if not parent.is_root and parent.pid != self.pid and (
                    vclock.get(parent.pid, 0) < parent.seq):
                # A reply to a message not delivered here yet: depend on it, so no
                # one (the sender included) delivers the reply before its parent.
                vclock[parent.pid] = parent.seq
        return make_message(mid, parent, payload, vclock, None)

    # ------------------------------------------------------------- receive
    def accept(self, message: Message, persist: bool = True) -> tuple[int, list[Message]]:
        """RECEIVE state. Returns ``(status, delivered)``; status NEW, DUP, REFUSED
        or MALFORMED. New messages go to the GrpMsgList."""
        core = self.core
        if self.order == "total":
            return self._accept_total(message, persist)
        dups = core.duplicates
        refused = core.refused
        malformed = core.malformed
        out = core.receive(message)
        if out and out[0] is message:
            # New and delivered at once, the usual case (a core returns a message it
            # counted as a duplicate, refused or malformed never).
            if persist:
                store = self.store
                gid = self.gid
                store.put(gid, message, True)
                if len(out) > 1:
                    for m in out[1:]:
                        store.mark_delivered(gid, m.mid)
            return NEW, out
        if core.duplicates != dups:
            return DUP, out
        if core.refused != refused:
            return REFUSED, out
        if core.malformed != malformed:
            return MALFORMED, out
        if persist:
            self._persist(message, out)
        return NEW, out

    def _persist(self, message: Message, out: list[Message]) -> None:
        store = self.store
        gid = self.gid
        if out and out[0] is message:
            store.put(gid, message, True)
            for m in out[1:]:
                store.mark_delivered(gid, m.mid)
            return
        delivered_now = False
        for m in out:
            if m is message:
                delivered_now = True
            else:
                store.mark_delivered(gid, m.mid)
        store.put(gid, message, delivered_now)

    # ------------------------------------------------------------ retention
    def skip(self, ids: dict[str, Intervals], gseqs: Intervals
             ) -> tuple[list[Message], Intervals]:
        """Give up ``ids`` (seqnos per sender) and ``gseqs`` (total-order positions):
        gone everywhere (docs/group.md section 8). They count as delivered without
        being delivered, so their replies, their senders' later messages and the
        next positions go on. Returns what that released, in delivery order, and
        the positions passed over (total order: ``gseqs`` and the positions decided
        for the identities given up)."""
        core = self.core
        out: list[Message] = []
        positions: Intervals = []
        if self.order != "total":
            core.preload_intervals(ids)
            out = core.take_ready()
        else:
            assert isinstance(core, TotalOrder)
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
        gid = self.gid
        for m in out:
            self.store.mark_delivered(gid, m.mid)
        return out, positions

    # --------------------------------------------------------- total order
    def _accept_total(self, message: Message, persist: bool) -> tuple[int, list[Message]]:
        core = self.core
        mid = message.mid
        gseq = message.gseq
        status = NEW
        if mid in self.unstamped or core.has(mid):
            status = DUP
        else:
            if len(self.unstamped) >= self.config.max_unstamped:
                self.unstamped_refused += 1
                return REFUSED, []
            if gseq is not None:
                message = Message(mid, message.parent, message.payload, message.vclock, None)
            self.unstamped[mid] = message
            if persist:
                self.store.put(self.gid, message, False)
        if gseq is not None:
            self.log.learn(gseq, mid)  # a record repaired with its committed position
        out: list[Message] = []
        if status == NEW:
            positions = self.stamps.pop(mid, None)
            if positions is not None:
                for pos in positions:
                    self._place(pos, mid, out)
            elif self.log.is_leader:
                self._stamp(message)
        out.extend(self.pump())
        return status, out

    def pump(self) -> list[Message]:
        """Apply what the log decided, and stamp what waits (sequencer); returns deliveries."""
        out: list[Message] = []
        log = self.log
        while True:
            if log.has_decided:
                for pos, entry in log.take_decided():
                    if isinstance(entry, MemberEntry):
                        self._number(self.core.fill(pos), out)  # type: ignore[attr-defined]
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
        core = self.core
        assert isinstance(core, TotalOrder)
        self.max_gseq = max(self.max_gseq, pos)
        message = self.unstamped.pop(mid, None)
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
        delivered = core.receive(Message(mid, message.parent, message.payload, message.vclock,
                                         pos))
        for m in delivered:
            self.store.mark_delivered(self.gid, m.mid)
        self._number(delivered, out)
        if self._waiting_parent:
            children = self._waiting_parent.pop(mid, None)
            for child in children or ():
                if child.mid in self.unstamped and self.log.position_of(child.mid) is None:
                    self._stamp(child)

    def _number(self, delivered: list[Message], out: list[Message]) -> None:
        """Delivered messages carry their number among messages (``gseq``), not their
        log position: membership records take positions but no numbers, so messages
        are numbered 1, 2, 3, ... in every member."""
        records_before = self.log.records_before
        for m in delivered:
            pos = m.gseq
            assert pos is not None
            out.append(Message(m.mid, m.parent, m.payload, m.vclock, pos - records_before(pos)))

    def _placed(self, mid: MessageId) -> bool:
        return (self.core.has(mid) or mid in self.stamps
                or self.log.position_of(mid) is not None)

    def _stamp(self, message: Message) -> None:
        """Sequencer: propose ``message`` once its parent has a position, then its
        waiting children."""
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
        log = self.log
        for mid, message in list(self.unstamped.items()):
            if mid in self.unstamped and log.position_of(mid) is None:
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

    # ------------------------------------------------------------ sequencer
    @property
    def is_sequencer(self) -> bool:
        return self.order == "total" and self.log.is_leader

    @property
    def seqr(self) -> tuple[object, ...] | None:
        """The sequencing log's state (what a forged message must not change)."""
        if self.order != "total":
            return None
        log = self.log
        return (log.promised, log.ballot, log.commit_b, log.high, log.is_leader)

    # -------------------------------------------------------------- queries
    def has(self, mid: MessageId) -> bool:
        return self.core.has(mid) or mid in self.unstamped

    def digest(self) -> dict[str, Intervals]:
        """Per sender, the seqnos this node holds (delivered, held or unstamped)."""
        digest = self.core.digest()
        if self.unstamped:
            extra: dict[str, list[tuple[int, int]]] = {}
            for mid in self.unstamped:
                extra.setdefault(mid.pid, []).append((mid.seq, mid.seq))
            for pid, ivs in extra.items():
                digest[pid] = normalize(digest.get(pid, []) + ivs)
        return digest

    def missing(self) -> list[MessageId]:
        """Identities known to be needed and not held (parents; total: decided data)."""
        out = list(self.core.missing())
        if self.order == "total":
            out.extend(self.stamps)
            out.extend(p for p in self._waiting_parent if not self.has(p))
        return out

    def missing_gseqs(self) -> Intervals:
        """Total order: committed positions whose entry we do not know."""
        if self.order != "total":
            return []
        return normalize(self.log.missing_positions(self.config.max_nack_intervals))
