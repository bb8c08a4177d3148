"""MOP, one group's Message Ordering Protocol (seeds/000 IV): the ordering core
chosen at creation (S_b by default; causal, FIFO or total), the sender side
(RESPOND state: next seqno, parent, vector clock) and the group's GrpMsgList
in the store.

Total order in ad hoc mode: one member stamps global sequence numbers. The role
starts with the group's creator and moves by hand-over (seeds give no rule;
docs/decisions.md): the holder hands it to the lowest current member ID when a
lower ID joins or when it leaves; if the holder goes silent for
``sequencer_timeout``, the lowest other member takes over after the highest
gseq it knows. Every hand-over raises an epoch so stale news loses. The
sequencer stamps a reply only after the message it answers, so total order
never delivers a child before its parent.
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.group.codec import SequencerInfo
from m2mc.group.config import GroupConfig
from m2mc.group.fastobj import make_message, make_mid
from m2mc.group.seqsets import Intervals, normalize
from m2mc.ordering import ROOT, Message, MessageId, Sequencer, TotalOrder, make_core
from m2mc.ordering.causal import CausalOrder
from m2mc.store import GroupStore, StoredMessage

NEW = 0
DUP = 1
REFUSED = 2
MALFORMED = 3


class Mop:
    __slots__ = ("_active", "_waiting_parent", "config", "core", "gid", "max_gseq", "new_stamps",
                 "order", "own_seq", "pid", "seqr", "stamps", "stamps_refused", "store",
                 "unstamped", "unstamped_refused")

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
        self.unstamped: dict[MessageId, Message] = {}
        self.stamps: dict[MessageId, int] = {}  # stamps heard before their data
        self.new_stamps: list[tuple[int, MessageId]] = []  # to broadcast (sequencer)
        self.seqr: SequencerInfo | None = None
        self.max_gseq = 0
        self._active: Sequencer | None = None
        self._waiting_parent: dict[MessageId, list[Message]] = {}
        # Bound max_unstamped (each table): data refused, stamps not remembered.
        self.unstamped_refused = 0
        self.stamps_refused = 0

    # ------------------------------------------------------------- restart
    def restore(self, stored: Iterable[StoredMessage]) -> list[Message]:
        """Rebuild from the GrpMsgList: delivered ones are preloaded, the others
        received again. Returns what became deliverable (normally nothing)."""
        delivered: list[Message] = []
        pending: list[Message] = []
        for item in stored:
            (delivered if item.delivered else pending).append(item.message)
            if item.message.gseq is not None:
                self.max_gseq = max(self.max_gseq, item.message.gseq)
        self.core.preload(delivered)
        out: list[Message] = []
        take_ready = getattr(self.core, "take_ready", None)
        if take_ready is not None:
            out.extend(take_ready())
        for message in pending:
            _, released = self.accept(message, persist=False)
            out.extend(released)
        for message in out:
            self.store.mark_delivered(self.gid, message.mid)
        return out

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

    # --------------------------------------------------------- total order
    def _accept_total(self, message: Message, persist: bool) -> tuple[int, list[Message]]:
        core = self.core
        mid = message.mid
        if mid in self.unstamped:
            if message.gseq is None:
                return DUP, []
            # A repaired copy that carries the stamp we missed.
            return DUP, self.apply_stamps([(message.gseq, mid)])
        if core.has(mid):
            return DUP, []
        gseq = message.gseq
        if gseq is None:
            gseq = self.stamps.pop(mid, None)
            if gseq is not None:
                message = Message(mid, message.parent, message.payload, message.vclock, gseq)
        if gseq is None:
            if len(self.unstamped) >= self.config.max_unstamped:
                self.unstamped_refused += 1
                return REFUSED, []
            self.unstamped[mid] = message
            if persist:
                self.store.put(self.gid, message, False)
            out: list[Message] = []
            if self._active is not None:
                self._stamp(message, out)
            return NEW, out
        self.stamps.pop(mid, None)
        status, out = self._receive_stamped(message)
        if status == NEW and persist:
            self._persist(message, out)
        return status, out

    def _receive_stamped(self, message: Message) -> tuple[int, list[Message]]:
        core = self.core
        assert message.gseq is not None
        self.max_gseq = max(self.max_gseq, message.gseq)
        dups = core.duplicates
        refused = core.refused
        malformed = core.malformed
        out = core.receive(message)
        if core.duplicates != dups:
            return DUP, out
        if core.refused != refused:
            return REFUSED, out
        if core.malformed != malformed:
            return MALFORMED, out
        if self._active is not None and self._waiting_parent:
            self._release_children(out)
        return NEW, out

    def apply_stamps(self, stamps: Iterable[tuple[int, MessageId]]) -> list[Message]:
        """An ORDER message: pair each gseq with its data (held unstamped) or remember it."""
        out: list[Message] = []
        for gseq, mid in stamps:
            self.max_gseq = max(self.max_gseq, gseq)
            waiting = self.unstamped.pop(mid, None)
            if waiting is None:
                if not self.core.has(mid):
                    if len(self.stamps) < self.config.max_unstamped:
                        self.stamps[mid] = gseq
                    else:
                        self.stamps_refused += 1
                continue
            stamped = Message(mid, waiting.parent, waiting.payload, waiting.vclock, gseq)
            self.store.set_gseq(self.gid, mid, gseq)
            _, released = self._receive_stamped(stamped)
            for m in released:
                self.store.mark_delivered(self.gid, m.mid)
            out.extend(released)
        return out

    def _stamp(self, message: Message, out: list[Message]) -> None:
        """Sequencer: stamp ``message`` once its parent has a gseq, then its waiting children."""
        parent = message.parent
        if not parent.is_root and not self.core.has(parent) and parent not in self.stamps:
            self._waiting_parent.setdefault(parent, []).append(message)
            return
        self._stamp_now(message, out)

    def _stamp_now(self, message: Message, out: list[Message]) -> None:
        assert self._active is not None
        mid = message.mid
        gseq = self._active.stamp(mid)
        self.new_stamps.append((gseq, mid))
        self.unstamped.pop(mid, None)
        self.store.set_gseq(self.gid, mid, gseq)
        stamped = Message(mid, message.parent, message.payload, message.vclock, gseq)
        _, released = self._receive_stamped(stamped)
        for m in released:
            self.store.mark_delivered(self.gid, m.mid)
        out.extend(released)
        children = self._waiting_parent.pop(mid, None)
        for child in children or ():
            if child.mid in self.unstamped:
                self._stamp_now(child, out)

    def _release_children(self, delivered: list[Message]) -> None:
        for m in list(delivered):
            children = self._waiting_parent.pop(m.mid, None)
            for child in children or ():
                if child.mid in self.unstamped:
                    self._stamp_now(child, delivered)

    # ------------------------------------------------------------ sequencer
    @property
    def is_sequencer(self) -> bool:
        return self._active is not None

    def adopt(self, info: SequencerInfo) -> list[Message]:
        """Newer sequencer news (hand-over, status, take-over). Returns deliveries
        caused by stamping what waited, if this node becomes the sequencer."""
        if self.order != "total":
            return []
        if self.seqr is not None and (info.epoch, info.pid) <= (self.seqr.epoch, self.seqr.pid):
            return []
        self.seqr = info
        out: list[Message] = []
        if info.pid == self.pid:
            start = max(info.next_gseq, self.max_gseq + 1, self._next_known())
            if self._active is None:
                self._active = Sequencer(start)
            elif self._active.next_gseq < start:
                self._active.resume(start)
            for message in list(self.unstamped.values()):
                if message.mid in self.unstamped:
                    self._stamp(message, out)
        else:
            self._active = None
            self._waiting_parent.clear()
        return out

    def _next_known(self) -> int:
        core = self.core
        return core.next_gseq if isinstance(core, TotalOrder) else 1

    def handover(self, to: str) -> SequencerInfo:
        """Give the role to ``to``; returns the news to broadcast."""
        epoch = self.seqr.epoch if self.seqr is not None else 0
        next_gseq = self._active.next_gseq if self._active is not None else self.max_gseq + 1
        info = SequencerInfo(epoch + 1, to, max(next_gseq, self.max_gseq + 1))
        self.adopt(info)
        return info

    def take_over(self) -> tuple[SequencerInfo, list[Message]]:
        epoch = self.seqr.epoch if self.seqr is not None else 0
        info = SequencerInfo(epoch + 1, self.pid, self.max_gseq + 1)
        return info, self.adopt(info)

    def take_stamps(self) -> list[tuple[int, MessageId]]:
        stamps, self.new_stamps = self.new_stamps, []
        return stamps

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
        """Identities known to be needed and not held (parents; total: stamped data)."""
        out = list(self.core.missing())
        if self.order == "total":
            out.extend(mid for mid in self.stamps if not self.core.has(mid))
            out.extend(p for p in self._waiting_parent if not self.has(p))
        return out

    def missing_gseqs(self) -> Intervals:
        core = self.core
        if not isinstance(core, TotalOrder):
            return []
        gaps = [(g, g) for g in core.missing_gseqs()]
        held = [m.gseq for m in core.held_messages() if m.gseq is not None]
        top = max(held, default=core.next_gseq - 1)
        if self.max_gseq > top:
            gaps.append((max(top + 1, core.next_gseq), self.max_gseq))
        return normalize(gaps)
