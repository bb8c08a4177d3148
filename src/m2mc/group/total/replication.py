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
  (``_advance``). Every member hears every ACK, so followers compute commits as
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

from collections.abc import Iterable

from m2mc.group.messages import Ack, Body, Entries, LogEntry, MemberEntry, Order
from m2mc.group.seqsets import contains, subtract
from m2mc.group.total.configuration import Configuration, apply_record, majority
from m2mc.group.total.core import COMMIT_DELAY, NO_BALLOT, ORDER_CHUNK, RESEND_LIMIT, Ballot
from m2mc.ordering import ROOT, MessageId


class Replication(Configuration):
    """ORDER, ACK and DECIDED; the commit point (module docstring)."""

    # ================================================================ queries
    def missing_positions(self, limit: int) -> list[tuple[int, int]]:
        """Positions whose entry we lack (to NACK), as intervals: committed ones we do
        not know, and ones of our ballot that others hold and we missed."""
        out: list[tuple[int, int]] = []
        p = self.emitted + 1
        ahead = self._ahead
        log = self.log
        known = self.known
        top = max(known, self.heard_high if self.ballot == self.promised else 0)
        count = 0
        if self._lost:
            out.extend(self._lost[:limit])
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
        if not self.is_leader:
            return
        for lo, hi in intervals:
            for p in range(max(lo, self.commit_b + 1), min(hi, self.high) + 1):
                if len(self._resend) >= RESEND_LIMIT:
                    return
                self._resend.add(p)

    # ================================================================ commit
    def _recompute_high(self) -> None:
        h = max(self.base, self.commit_b)
        log = self.log
        while h + 1 in log:
            h += 1
        self.high = h

    def _extend_high(self) -> None:
        h = max(self.high, self.commit_b)
        log = self.log
        while h + 1 in log:
            h += 1
        if h != self.high:
            self.high = h
            self._ack_due = True

    def _commit_to(self, commit: int) -> None:
        old = self.commit_b
        if commit <= old:
            return
        self.commit_b = commit
        self.dirty = True
        if commit > self.known:
            self.known = commit
        log = self.log
        for pos in sorted(p for p in log if old < p <= commit):
            entry = log[pos]
            self._decide(pos, entry)
            if type(entry) is MemberEntry and self.leading:
                self._reconfig_due = True  # the next membership record may follow
        self._extend_high()
        # Committed entries handed out are not needed in the log any more.
        floor = min(commit, self.emitted)
        if floor > old:
            for pos in [p for p in log if p <= floor]:
                e = log.pop(pos)
                if type(e) is MessageId:
                    self._mids.pop(e, None)

    def _sync(self, ballot: Ballot, base: int, entries: Iterable[tuple[int, LogEntry]]) -> None:
        """Make our log that of ``ballot``: committed up to ``base``, then ``entries``."""
        self.ballot = ballot
        self.base = base
        self.commit_b = base
        self.log = {}
        for p, e in entries:
            if p > base and len(self.log) < self.config.max_unstamped:
                self.log[p] = e
        self._mids = {e: p for p, e in self.log.items() if type(e) is MessageId}
        self.acks = {}
        self._resend = set()
        if base > self.known:
            self.known = base
        self._recompute_high()
        self.heard_high = self.high
        self._ack_due = True
        self.dirty = True
        # Entries we hold that are committed already (the log of a re-sent START).
        for pos in sorted(p for p in self.log if p <= self.known and p <= self.emitted):
            self._decide(pos, self.log[pos])

    def _advance(self) -> None:
        """Commit what a majority of each position's configuration holds."""
        p = self.commit_b
        if self.high <= p or self.emitted < p:
            return  # nothing new, or we cannot tell the configuration
        cfg = self._config_before(p + 1, self.log)
        acks = self.acks
        mine = self.high
        log = self.log
        while p < mine:
            q = p + 1
            if cfg:
                n = 0
                for m in cfg:
                    if (mine if m == self.pid else acks.get(m, 0)) >= q:
                        n += 1
                if n < majority(cfg):
                    break
            elif not (q == 1 and self.leading):
                break  # only the founder commits the first record on its own
            e = log.get(q)
            if type(e) is MemberEntry:
                apply_record(cfg, e)
            p = q
        if p > self.commit_b:
            self._commit_to(p)
            if self.leading:
                self._retry_every = self.config.order_retry
                self._retry_at = None

    # ================================================================ sequencer
    def propose(self, entry: LogEntry) -> int | None:
        """Sequencer: append ``entry``; its position, or None (not leading, or the
        window of uncommitted stamps is full)."""
        if not self.is_leader:
            return None
        if self.high - self.commit_b >= self.config.max_uncommitted:
            self.stats.log_full += 1
            return None
        pos = self.high + 1
        self.log[pos] = entry
        self.high = pos
        if type(entry) is MessageId:
            self._mids[entry] = pos
        self._new.append((pos, entry))
        self.dirty = True
        self._advance()
        return pos

    def _arm(self, now: float) -> None:
        if self.leading and self.high > self.commit_b and self._retry_at is None:
            self._retry_at = now + self._retry_every

    def _replication_timer(self, now: float) -> None:
        """Sequencer: a commit point due alone, stamps a majority has not acknowledged."""
        if self._commit_at is not None and now >= self._commit_at:
            self._commit_at = None
            if self.leading and self.commit_b > self._commit_sent:
                self._outbox.append(Order(self.pid, self.ballot[0], [], self.commit_b))
                self._commit_sent = self.commit_b
        if self._retry_at is not None and now >= self._retry_at:
            self._retry_at = None
            if self.leading and self.high > self.commit_b:
                last = min(self.high, self.commit_b + RESEND_LIMIT)
                stamps = [(p, self.log[p]) for p in range(self.commit_b + 1, last + 1)]
                for i in range(0, len(stamps), ORDER_CHUNK):
                    self._outbox.append(Order(self.pid, self.ballot[0],
                                              stamps[i:i + ORDER_CHUNK], self.commit_b))
                self._commit_sent = self.commit_b
                self._retry_every = min(self._retry_every * 2, self.config.status_interval)

    # ================================================================ inputs
    def on_order(self, o: Order, now: float) -> None:
        if not self._valid(o.epoch, o.sender) or not self._plausible_pos(o.commit):
            return
        ballot = (o.epoch, o.sender)
        top = max(self.known, self.high, self.emitted) + self.config.max_seq_jump
        stamps = [(p, e) for p, e in o.stamps if p <= top]
        for p, e in stamps:
            if p <= o.commit:
                self._decide(p, e)  # the sequencer's committed entries: final anywhere
        if o.commit > self.known:
            self.known = o.commit
        if ballot < self.promised:
            self.stats.stale += 1
            if ballot == self.ballot:  # what our log's sequencer commits still holds
                self._commit_to(o.commit)
            return
        self._promise(ballot)
        if ballot != self.ballot:
            self._want_sync(ballot, now)
            return
        log = self.log
        for p, e in stamps:
            if p > self.commit_b and p not in log and len(log) < self.config.max_unstamped:
                log[p] = e
                if type(e) is MessageId:
                    self._mids[e] = p
                self.dirty = True
        if stamps:
            self._ack_due = True
            top_sent = max(p for p, _ in stamps)
            if top_sent > self.acks.get(o.sender, -1):
                self.acks[o.sender] = top_sent  # the sequencer holds what it sends
            if top_sent > self.heard_high:
                self.heard_high = top_sent
        self._commit_to(o.commit)
        self._extend_high()
        self._advance()

    def on_ack(self, a: Ack, now: float) -> None:
        if not self._valid(a.epoch, a.leader):
            return
        ballot = (a.epoch, a.leader)
        if ballot != self.ballot:
            return
        if not a.synced:
            if self.leading and a.leader == self.pid and self._start_at is None:
                self._start_at = max(now, self._last_start + self.config.order_retry)
            return
        if a.high > self.acks.get(a.sender, -1) and self.is_member(a.sender):
            self.acks[a.sender] = a.high
            if a.high > self.heard_high and self._plausible_pos(a.high):
                self.heard_high = a.high
            self._advance()

    def on_decided(self, entries: Entries) -> None:
        for p, e in entries:
            if self._plausible_pos(p):
                self._decide(p, e)

    def pass_over(self, intervals: Iterable[tuple[int, int]]) -> int:
        """Positions given up (their message is gone everywhere, docs/group.md section
        8) count as decided with no message (ROOT, which the ordering core passes
        over). A long run right after what was handed out is jumped at once: returns
        the position after the last one jumped (0: none), where the ordering core
        must go on from."""
        jumped = 0
        for lo, hi in intervals:
            lo = max(lo, self.emitted + 1)
            if lo > hi:
                continue
            if lo == self.emitted + 1 and hi - lo >= 64:
                self.emitted = hi
                ahead = self._ahead
                for pos in [p for p in ahead if p <= hi]:
                    del ahead[pos]
                while self.emitted + 1 in ahead:
                    self.emitted += 1
                    del ahead[self.emitted]
                self.known = max(self.known, hi)
                if self._lost:
                    self._lost = subtract(self._lost, [(1, hi)])
                jumped = hi + 1
            else:
                for pos in range(lo, hi + 1):
                    self._decide(pos, ROOT)
        return jumped

    def learn(self, pos: int, mid: MessageId) -> bool:
        """A record that came with its committed position (repair, catch-up). True if
        the position is taken as ``mid``'s (handed out now or later); False if the
        claim is dropped: absurd, or for a position handed out already (as another
        entry: a record that was placed there is a duplicate, never learnt again)."""
        if not self._plausible_pos(pos):
            return False
        if pos <= self.emitted and not (self._lost and contains(self._lost, pos)):
            return False
        self._decide(pos, mid)
        return True

    # ================================================================ output
    def flush(self, now: float) -> list[Body]:
        """The messages to send now (ORDER, ACK, PREPARE, PROMISE, START, HANDOVER)."""
        if self._reconfig_due:
            self._reconfigure(now)
        out = self._outbox
        self._outbox = []
        if self.leading:
            if self._resend:
                again = sorted(p for p in self._resend if self.commit_b < p <= self.high)
                self._resend = set()
                for i in range(0, len(again), ORDER_CHUNK):
                    out.append(Order(self.pid, self.ballot[0],
                                     [(p, self.log[p]) for p in again[i:i + ORDER_CHUNK]],
                                     self.commit_b))
                if again:
                    self._commit_sent = self.commit_b
            if self._new:
                new = self._new
                self._new = []
                for i in range(0, len(new), ORDER_CHUNK):
                    out.append(Order(self.pid, self.ballot[0], new[i:i + ORDER_CHUNK],
                                     self.commit_b))
                self._commit_sent = self.commit_b
                self._commit_at = None
            elif self.commit_b > self._commit_sent and self._commit_at is None:
                # Members count the ACKs they overhear and see the commit themselves;
                # this is for those that missed some. The next stamps may carry it.
                self._commit_at = now + COMMIT_DELAY
            self._arm(now)
        elif self._ack_due and self.ballot != NO_BALLOT and self.ballot == self.promised:
            self._ack_due = False
            out.append(Ack(self.pid, self.ballot[0], self.ballot[1], self.high))
        return out
