"""MOP, one group's Message Ordering Protocol (seeds/000 IV): the ordering core
chosen at creation (S_b by default; causal or FIFO here, total order in
:class:`m2mc.group.total.mop.TotalMop`), the sender side (RESPOND state: next
seqno, parent, vector clock) and the group's GrpMsgList in the store.

A group of another order than total never builds a sequencing log: what total
order adds (the log, the messages waiting for a position, the positions waiting
for their data) lives in the subclass only. The few read-only class attributes
below are what those buffers look like without a sequencer (empty, nothing
refused), for the statistics and the fuzzer's bound checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

from m2mc.group.config import GroupConfig
from m2mc.group.messages import Entries
from m2mc.group.seqsets import Intervals
from m2mc.kinds import Order
from m2mc.ordering import ROOT, Message, MessageId, make_core
from m2mc.ordering.causal import CausalOrder
from m2mc.ordering.ids import make_message, make_mid
from m2mc.store import GroupStore, StoredMessage

NEW = 0
DUP = 1
REFUSED = 2
MALFORMED = 3
_NONE: Mapping[MessageId, object] = MappingProxyType({})
# Read once per message: a module global is faster than Order.CAUSAL, an enum's
# attribute lookup.
_CAUSAL = Order.CAUSAL


class Mop:
    __slots__ = ("_receive_run", "config", "core", "gid", "order", "own_seq", "pid", "store")

    # Total order's buffers and counters as a group without a sequencer has them.
    unstamped: Mapping[MessageId, Message] = _NONE  # type: ignore[assignment]
    stamps: Mapping[MessageId, list[int]] = _NONE  # type: ignore[assignment]
    unstamped_refused = 0
    stamps_refused = 0

    def __init__(self, pid: str, gid: str, order: Order, config: GroupConfig,
                 store: GroupStore) -> None:
        self.pid = pid
        self.gid = gid
        self.order = order
        self.config = config
        self.store = store
        self.core = make_core(order, max_held=config.max_held)
        self.own_seq = store.high_water(gid, pid)
        # A core's batch fast path (SbOrder.receive_run), if it has one.
        self._receive_run: Callable[[Sequence[Message]], int] | None = getattr(
            self.core, "receive_run", None)

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
        gone = self.store.gone(self.gid)
        for stub in self.store.load_stubs(self.gid):
            if self._stub_is_gone(stub):
                gone.add(stub.mid.pid, [(stub.mid.seq, stub.mid.seq)])
            else:
                delivered.append(stub)
        self.core.preload(delivered)
        if gone.ids:
            self.core.preload_intervals(gone.ids)
        out = self._resume(gone.gseq_floor)
        for message in pending:
            _, released = self.accept(message, persist=False)
            out.extend(released)
        out.extend(self._restored())
        for message in out:
            self.store.mark_delivered(self.gid, message.mid)
        return out

    def _stub_is_gone(self, stub: Message) -> bool:
        """A stub that stands for nothing delivered (TotalMop: one without its position)."""
        return False

    def _resume(self, gseq_floor: int) -> list[Message]:
        """After the preload, before the pending messages: what became deliverable."""
        take_ready = getattr(self.core, "take_ready", None)
        return list(take_ready()) if take_ready is not None else []

    def _restored(self) -> list[Message]:
        """After the pending messages: what else became deliverable."""
        return []

    # ---------------------------------------------------------------- send
    def next_message(self, payload: bytes, parent: MessageId = ROOT) -> Message:
        """RESPOND state: a new identity ``<pid, seqno+1>`` and its ordering headers."""
        self.own_seq += 1
        mid = make_mid(self.pid, self.own_seq)
        vclock = None
        if self.order == _CAUSAL and isinstance(self.core, CausalOrder):
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

    def accept_run(self, messages: Sequence[Message]) -> int:
        """:meth:`accept` for the leading messages that the core delivers at once as a
        run (one sender's next ones, in order, nothing held: the receive hot path);
        they are stored as delivered. Returns how many; the rest go to ``accept``."""
        run = self._receive_run
        if run is None:
            return 0
        count = run(messages)
        if count:
            self.store.put_delivered(self.gid, messages if count == len(messages)
                                     else messages[:count])
        return count

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
        the positions passed over (total order only: :class:`TotalMop`)."""
        core = self.core
        core.preload_intervals(ids)
        out: list[Message] = core.take_ready()
        gid = self.gid
        for m in out:
            self.store.mark_delivered(gid, m.mid)
        return out, []

    def decided_entries(self, lo: int, hi: int) -> Entries:
        """Decided log entries in ``lo..hi`` a NACK may need (total order only)."""
        return []

    # -------------------------------------------------------------- queries
    def number(self, gseq: int | None) -> int | None:
        """The number a stored message was delivered with, from the ``gseq`` its store
        row holds (TotalMop: the row holds the log position, records included)."""
        return gseq

    @property
    def is_sequencer(self) -> bool:
        return False  # (TotalMop: the sequencing log's leader)

    @property
    def seqr(self) -> tuple[object, ...] | None:
        """The sequencing log's state (TotalMop; None: no log)."""
        return None

    def has(self, mid: MessageId) -> bool:
        return self.core.has(mid)

    def digest(self) -> dict[str, Intervals]:
        """Per sender, the seqnos this node holds (delivered or held)."""
        return self.core.digest()

    def missing(self) -> list[MessageId]:
        """Identities known to be needed and not held (parents)."""
        return list(self.core.missing())

    def missing_gseqs(self) -> Intervals:
        """Committed positions whose entry we do not know (total order only)."""
        return []
