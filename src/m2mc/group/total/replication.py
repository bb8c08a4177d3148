"""Total order: replication and commit -- how the sequencer's log reaches the
members and when a position is committed (docs/group.md section 5).

Rules:

- The sequencer of ``ballot`` appends (``propose``) and broadcasts its new
  entries in ORDER messages of at most ``ORDER_CHUNK`` entries, with its commit
  point; at most ``max_uncommitted`` entries wait for their commit.
- A member synced to that ballot keeps the entries after its commit point and
  acknowledges (ACK) how far it holds the log contiguously (``high``).
- **Commit.** Position ``p`` is committed when a majority of the configuration in
  force at ``p`` acknowledged ``>= p`` in the ballot, position after position
  (``advance``). Every member hears every ACK, so followers compute commits as
  the sequencer does; ORDER carries the sequencer's commit point for those that
  missed some (alone, ``COMMIT_DELAY`` later, when no new entry carries it).
- Entries an ORDER says are committed are final anywhere, whatever the ballot; so
  are DECIDED entries (a NACK's answer) and positions repaired with a record.
- The sequencer sends again what a majority has not acknowledged (backing off to
  ``status_interval``) and NACKed positions not committed yet (``RESEND_LIMIT``).

A position's states, in one member's log:

===========  =========================================  ==========
from         event                                      to
===========  =========================================  ==========
(unknown)    ORDER / START of our ballot carries it      HELD
(unknown)    committed elsewhere (ORDER commit, DECIDED,  COMMITTED
             a record with its gseq)
HELD         a majority of its configuration holds it   COMMITTED
COMMITTED    every position before it handed out         EMITTED
(unknown)    NACKed in vain, gone everywhere (retention)  EMITTED (``pass_over``, no message)
===========  =========================================  ==========
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

from m2mc.group.messages import Ack, Body, Entries, LogEntry, MemberEntry, Order
from m2mc.group.seqsets import subtract
from m2mc.group.total.configuration import apply_record, majority
from m2mc.group.total.core import (
    COMMIT_DELAY,
    NO_BALLOT,
    ORDER_CHUNK,
    RESEND_LIMIT,
    Ballot,
    LogCore,
)
from m2mc.ordering import ROOT, MessageId


class ConfigurationPort(Protocol):
    """What replication asks of the configuration
    (:class:`~m2mc.group.total.configuration.Configuration`)."""

    def config_before(self, pos: int, log: Mapping[int, LogEntry]) -> set[str]: ...

    def reconfigure(self, now: float, propose: Callable[[LogEntry], int | None]) -> None: ...


class Replication:
    """ORDER, ACK and DECIDED; the commit point (module docstring)."""

    __slots__ = ("_configuration", "_proposing", "_resend", "core")

    def __init__(self, core: LogCore, configuration: ConfigurationPort) -> None:
        self.core = core
        self._configuration = configuration
        self._proposing = False  # inside proposals(): the commit point moves at its end
        self._resend: set[int] = set()  # sequencer: positions NACKed, to send again

    # ================================================================ queries
    def missing_positions(self, limit: int) -> list[tuple[int, int]]:
        """Positions whose entry we lack (to NACK), as intervals: committed ones we do
        not know, and ones of our ballot that others hold and we missed."""
        core = self.core
        out: list[tuple[int, int]] = []
        p = core.emitted + 1
        ahead = core.ahead
        log = core.log
        known = core.known
        top = max(known, core.heard_high if core.ballot == core.promised else 0)
        count = 0
        if core.lost:
            out.extend(core.lost[:limit])
            count = len(out)

        def have(q: int) -> bool:
            return q in ahead or (q > known and q in log)

        while p <= top and count < limit:
            if have(p):
                p += 1
                continue
            lo = p
            while p <= top and not have(p):
                p += 1
            out.append((lo, p - 1))
            count += 1
        return out

    def on_nack_positions(self, intervals: Iterable[tuple[int, int]]) -> None:
        """Sequencer: NACKed positions of our log not committed yet are sent again
        (committed ones are any member's to repair)."""
        core = self.core
        if not core.is_leader:
            return
        for lo, hi in intervals:
            for p in range(max(lo, core.commit_b + 1), min(hi, core.high) + 1):
                if len(self._resend) >= RESEND_LIMIT:
                    return
                self._resend.add(p)

    # ================================================================ commit
    def extend_high(self) -> None:
        """``high`` after entries came: an ACK is due if it grew."""
        core = self.core
        h = max(core.high, core.commit_b)
        log = core.log
        while h + 1 in log:
            h += 1
        if h != core.high:
            core.high = h
            core.ack_due = True

    def commit_to(self, commit: int) -> None:
        """Our log is committed up to ``commit``: hand its entries out."""
        core = self.core
        old = core.commit_b
        if commit <= old:
            return
        core.commit_b = commit
        core.dirty = True
        if commit > core.known:
            core.known = commit
        log = core.log
        for pos in sorted(p for p in log if old < p <= commit):
            entry = log[pos]
            core.decide(pos, entry)
            if type(entry) is MemberEntry and core.leading:
                core.reconfig_due = True  # the next membership record may follow
        self.extend_high()
        # Committed entries handed out are not needed in the log any more.
        floor = min(commit, core.emitted)
        if floor > old:
            for pos in [p for p in log if p <= floor]:
                e = log.pop(pos)
                if type(e) is MessageId:
                    core.mids.pop(e, None)

    def sync(self, ballot: Ballot, base: int, entries: Iterable[tuple[int, LogEntry]]) -> None:
        """Make our log that of ``ballot``: committed up to ``base``, then ``entries``."""
        core = self.core
        core.ballot = ballot
        core.base = base
        core.commit_b = base
        log: dict[int, LogEntry] = {}
        for p, e in entries:
            if p > base and len(log) < core.config.max_unstamped:
                log[p] = e
        core.set_log(log)
        core.acks = {}
        self._resend = set()
        if base > core.known:
            core.known = base
        core.recompute_high()
        core.heard_high = core.high
        core.ack_due = True
        core.dirty = True
        # Entries we hold that are committed already (the log of a re-sent START).
        for pos in sorted(p for p in core.log if p <= core.known and p <= core.emitted):
            core.decide(pos, core.log[pos])

    def advance(self) -> None:
        """Commit what a majority of each position's configuration holds."""
        core = self.core
        p = core.commit_b
        if core.high <= p or core.emitted < p:
            return  # nothing new, or we cannot tell the configuration
        log = core.log
        cfg = self._configuration.config_before(p + 1, log)
        acks = core.acks
        mine = core.high
        pid = core.pid
        # The positions up to the next membership record of the log (itself included:
        # it changes the configuration from the position after it) share one
        # configuration, and "a majority of it holds q" only gets harder as q grows:
        # the run commits up to the highest position a majority holds, in one step
        # (with the configuration worked out anew at every call, advance was 8 % of
        # the CPU of bench/hotpath.py --order total).
        records = core.records_in_log()
        i = bisect_right(records, p)
        while p < mine:
            if not cfg:
                if not (p == 0 and core.leading):
                    break  # only the founder commits the first record on its own
                stop = 1
            else:
                while i < len(records) and records[i] <= p:
                    i += 1
                stop = records[i] if i < len(records) and records[i] < mine else mine
                held = sorted([mine if m == pid else acks.get(m, 0) for m in cfg],
                              reverse=True)
                reach = held[majority(cfg) - 1]  # the highest position a majority holds
                if reach < stop:
                    p = max(p, reach)
                    break
            e = log.get(stop)
            if type(e) is MemberEntry:
                apply_record(cfg, e)
            p = stop
        if p > core.commit_b:
            self.commit_to(p)
            if core.leading:
                core.retry_every = core.config.order_retry
                core.retry_at = None

    # ================================================================ sequencer
    def propose(self, entry: LogEntry) -> int | None:
        """Sequencer: append ``entry``; its position, or None (not leading, or the
        window of uncommitted stamps is full)."""
        core = self.core
        if not core.is_leader:
            return None
        if core.high - core.commit_b >= core.config.max_uncommitted:
            core.stats.log_full += 1
            return None
        pos = core.high + 1
        core.put_entry(pos, entry)
        core.high = pos
        core.unsent.append((pos, entry))
        core.dirty = True
        if not self._proposing:
            self.advance()
        return pos

    @contextmanager
    def proposals(self) -> Iterator[None]:
        """Sequencer: propose many entries, the commit point moved once, at the end.
        A proposal alone commits only where the sequencer is a majority by itself
        (every other member's ACK of the new position is still to come), so moving
        the commit point once after many proposals finds the point that moving it
        after each would. After each, it read the configuration from the whole
        uncommitted window every time: quadratic in a full window, 0.3 ms a stamp at
        1,024 uncommitted, the sequencer's largest cost (``bench/peers.py``,
        ``m2mc-total``)."""
        if self._proposing:
            yield
            return
        self._proposing = True
        try:
            yield
        finally:
            self._proposing = False
            self.advance()

    def arm(self, now: float) -> None:
        """Sequencer: stamps wait for their commit: send them again after retry_every."""
        core = self.core
        if core.leading and core.high > core.commit_b and core.retry_at is None:
            core.retry_at = now + core.retry_every

    def on_timer(self, now: float) -> None:
        """Sequencer: a commit point due alone, stamps a majority has not acknowledged."""
        core = self.core
        if core.commit_at is not None and now >= core.commit_at:
            core.commit_at = None
            if core.leading and core.commit_b > core.commit_sent:
                core.outbox.append(Order(core.pid, core.ballot[0], [], core.commit_b))
                core.commit_sent = core.commit_b
        if core.retry_at is not None and now >= core.retry_at:
            core.retry_at = None
            if core.leading and core.high > core.commit_b:
                last = min(core.high, core.commit_b + RESEND_LIMIT)
                stamps = [(p, core.log[p]) for p in range(core.commit_b + 1, last + 1)]
                for i in range(0, len(stamps), ORDER_CHUNK):
                    core.outbox.append(Order(core.pid, core.ballot[0],
                                             stamps[i:i + ORDER_CHUNK], core.commit_b))
                core.commit_sent = core.commit_b
                core.retry_every = min(core.retry_every * 2, core.config.status_interval)

    # ================================================================ inputs
    def on_order(self, o: Order, now: float) -> None:
        core = self.core
        if not core.valid(o.epoch, o.sender) or not core.plausible_pos(o.commit):
            return
        ballot = (o.epoch, o.sender)
        top = max(core.known, core.high, core.emitted) + core.config.max_seq_jump
        stamps = [(p, e) for p, e in o.stamps if p <= top]
        for p, e in stamps:
            if p <= o.commit:
                core.decide(p, e)  # the sequencer's committed entries: final anywhere
        if o.commit > core.known:
            core.known = o.commit
        if ballot < core.promised:
            core.stats.stale += 1
            if ballot == core.ballot:  # what our log's sequencer commits still holds
                self.commit_to(o.commit)
            return
        core.promise(ballot)
        if ballot != core.ballot:
            core.want_sync(ballot, now)
            return
        log = core.log
        for p, e in stamps:
            if p > core.commit_b and p not in log and len(log) < core.config.max_unstamped:
                core.put_entry(p, e)
                core.dirty = True
        if stamps:
            core.ack_due = True
            top_sent = max(p for p, _ in stamps)
            if top_sent > core.acks.get(o.sender, -1):
                core.acks[o.sender] = top_sent  # the sequencer holds what it sends
            if top_sent > core.heard_high:
                core.heard_high = top_sent
        self.commit_to(o.commit)
        self.extend_high()
        self.advance()

    def on_ack(self, a: Ack, now: float) -> None:
        core = self.core
        if not core.valid(a.epoch, a.leader):
            return
        ballot = (a.epoch, a.leader)
        if ballot != core.ballot:
            return
        if not a.synced:
            if core.leading and a.leader == core.pid and core.start_at is None:
                core.start_at = max(now, core.last_start + core.config.order_retry)
            return
        if a.high > core.acks.get(a.sender, -1) and core.is_member(a.sender):
            core.acks[a.sender] = a.high
            if a.high > core.heard_high and core.plausible_pos(a.high):
                core.heard_high = a.high
            self.advance()

    def on_decided(self, entries: Entries) -> None:
        core = self.core
        for p, e in entries:
            if core.plausible_pos(p):
                core.decide(p, e)

    def pass_over(self, intervals: Iterable[tuple[int, int]]) -> int:
        """Positions given up (their message is gone everywhere, docs/group.md section
        8) count as decided with no message (ROOT, which the ordering core passes
        over). A long run right after what was handed out is jumped at once: returns
        the position after the last one jumped (0: none), where the ordering core
        must go on from."""
        core = self.core
        jumped = 0
        for lo, hi in intervals:
            lo = max(lo, core.emitted + 1)
            if lo > hi:
                continue
            if lo == core.emitted + 1 and hi - lo >= 64:
                core.emitted = hi
                ahead = core.ahead
                for pos in [p for p in ahead if p <= hi]:
                    del ahead[pos]
                while core.emitted + 1 in ahead:
                    core.emitted += 1
                    del ahead[core.emitted]
                core.known = max(core.known, hi)
                if core.lost:
                    core.lost = subtract(core.lost, [(1, hi)])
                jumped = hi + 1
            else:
                for pos in range(lo, hi + 1):
                    core.decide(pos, ROOT)
        return jumped

    def learn(self, pos: int, mid: MessageId) -> bool:
        """A record that came with its committed position (repair, catch-up). True if
        the position is taken as ``mid``'s (handed out now or later); False if the
        claim is dropped: absurd, or for a position handed out already (as another
        entry: a record that was placed there is a duplicate, never learnt again)."""
        core = self.core
        if not core.plausible_pos(pos):
            return False
        if core.handed_out(pos):
            return False
        core.decide(pos, mid)
        return True

    # ================================================================ output
    def flush(self, now: float) -> list[Body]:
        """The messages to send now (ORDER, ACK, PREPARE, PROMISE, START, HANDOVER)."""
        core = self.core
        if core.reconfig_due:
            self._configuration.reconfigure(now, self.propose)
        out = core.outbox
        core.outbox = []
        if core.leading:
            if self._resend:
                again = sorted(p for p in self._resend if core.commit_b < p <= core.high)
                self._resend = set()
                for i in range(0, len(again), ORDER_CHUNK):
                    out.append(Order(core.pid, core.ballot[0],
                                     [(p, core.log[p]) for p in again[i:i + ORDER_CHUNK]],
                                     core.commit_b))
                if again:
                    core.commit_sent = core.commit_b
            if core.unsent:
                new = core.unsent
                core.unsent = []
                for i in range(0, len(new), ORDER_CHUNK):
                    out.append(Order(core.pid, core.ballot[0], new[i:i + ORDER_CHUNK],
                                     core.commit_b))
                core.commit_sent = core.commit_b
                core.commit_at = None
            elif core.commit_b > core.commit_sent and core.commit_at is None:
                # Members count the ACKs they overhear and see the commit themselves;
                # this is for those that missed some. The next stamps may carry it.
                core.commit_at = now + COMMIT_DELAY
            self.arm(now)
        elif core.ack_due and core.ballot != NO_BALLOT and core.ballot == core.promised:
            core.ack_due = False
            out.append(Ack(core.pid, core.ballot[0], core.ballot[1], core.high))
        return out
