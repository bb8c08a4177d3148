"""Total order in ad hoc mode: the group's sequencing log, committed by majorities.

One member, the *sequencer*, numbers the group's messages: it appends an entry
``position -> message identity`` to its log and broadcasts it (ORDER). A member
delivers the message at position ``p`` only once ``p`` is *committed*: held, in
the sequencer's ballot, by a majority of the group's configuration at ``p``.
This is Viewstamped Replication / multi-Paxos with a log in contiguous order, on
a lossy broadcast medium (the argument is in docs/group.md, section 5):

- A **ballot** is ``(epoch, pid)``, ordered as a tuple. A member *promises* a
  ballot and from then on accepts nothing of older ballots. Its log is *synced*
  to one ballot (``ballot``): committed up to ``base`` when it synced, then the
  entries of that ballot's sequencer, and it acknowledges (ACK) how far it holds
  them (``high``).
- **Commit.** Position ``p`` is committed when a majority of the configuration in
  force at ``p`` acknowledged ``>= p`` in the ballot, position after position.
  Every member hears every ACK, so followers compute commits as the sequencer
  does; the sequencer's ORDER messages also carry its commit point.
- **Take-over.** A candidate sends PREPARE for a new ballot; members promise and
  answer (PROMISE) with their log. With the answers of a majority of *every*
  configuration the adopted log goes through, the candidate adopts the log of the
  answer synced to the newest ballot, the longest among those (the rule of
  Viewstamped Replication), and sends it (START). Every committed entry is in it.
- **Configuration.** Membership records (``MemberEntry``) are log entries too: a
  process enters or leaves the configuration at the position after its record.
  The sequencer adds a member when it joins (and is heard), removes one when it
  leaves or has been silent for ``member_timeout``, one record at a time.
- A member without a majority can still send: its messages wait unstamped and are
  stamped after the heal. It never delivers a position that is not committed.

Pure: no clocks (``now`` is passed in), no I/O; outgoing messages are collected
in :meth:`SeqLog.flush` and decided entries in :meth:`SeqLog.take_decided`.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from m2mc.group.codec import (
    Ack,
    Body,
    Entries,
    Handover,
    LogEntry,
    LogState,
    MemberEntry,
    Order,
    Prepare,
    Promise,
    SequencerInfo,
    Start,
)
from m2mc.group.config import GroupConfig
from m2mc.group.seqsets import contains, normalize, subtract
from m2mc.ordering import ROOT, MessageId

__all__ = ["NO_BALLOT", "Ballot", "SeqLog", "SeqLogStats"]

Ballot = tuple[int, str]
NO_BALLOT: Ballot = (0, "")
ORDER_CHUNK = 24  # stamps per ORDER message: one M2MP packet
RESEND_LIMIT = 240  # stamps re-sent at once by a sequencer whose majority is slow
PROMISE_LIMIT = 50_000  # entries in one PROMISE or START (a message stays < 1 MB)
# A commit point no new stamps carried goes out alone this much later (members that
# overheard a majority's ACKs know it already).
COMMIT_DELAY = 0.02


@dataclass(slots=True)
class SeqLogStats:
    absurd_epoch: int = 0  # ballots absurdly far past the newest known: dropped
    absurd_position: int = 0  # commit points / positions absurdly far ahead: dropped
    not_member: int = 0  # ballots of processes that are not members: dropped
    stale: int = 0  # messages of a ballot older than our promise
    prepares: int = 0  # candidacies started here
    takeovers: int = 0  # ballots this node started leading
    handovers: int = 0
    config_records: int = 0  # membership records this node proposed
    conflicts: int = 0  # two different entries decided at one position (never, if honest)
    log_full: int = 0  # stamps not proposed: max_uncommitted out


def _apply(members: set[str], entry: MemberEntry) -> None:
    if entry.joined:
        members.add(entry.pid)
    else:
        members.discard(entry.pid)


def _majority(members: set[str]) -> int:
    return len(members) // 2 + 1


def _entry_json(pos: int, e: LogEntry) -> list[Any]:
    if isinstance(e, MemberEntry):
        return [pos, e.pid, e.version, e.joined]
    return [pos, e.pid, e.seq]


def _entry_of(raw: list[Any]) -> tuple[int, LogEntry]:
    if len(raw) == 4:
        return int(raw[0]), MemberEntry(str(raw[1]), int(raw[2]), bool(raw[3]))
    return int(raw[0]), MessageId(str(raw[1]), int(raw[2]))


class SeqLog:
    """One member's replica of a total-order group's sequencing log."""

    def __init__(self, pid: str, config: GroupConfig) -> None:
        self.pid = pid
        self.config = config
        self.last_heard: Mapping[str, float] = {}
        self.is_member: Callable[[str], bool] = lambda p: True
        # ----------------------------------------------------- durable state
        self.promised: Ballot = NO_BALLOT
        self.ballot: Ballot = NO_BALLOT  # the ballot our log is synced to
        self.base = 0  # positions <= base were committed when we synced
        self.log: dict[int, LogEntry] = {}  # entries of `ballot` after the committed ones
        self.commit_b = 0  # committed point within `ballot`
        self.conf: dict[int, MemberEntry] = {}  # decided membership records
        self.cand_epoch = 0
        self.max_epoch = 0
        # ---------------------------------------------------- volatile state
        self.max_ballot: Ballot = NO_BALLOT  # the newest ballot heard of
        self.known = 0  # the highest position known to be committed (from anyone)
        self.high = 0  # our log holds every position of `ballot` up to here
        self.heard_high = 0  # positions of `ballot` others hold (ACKs, ORDERs, STATUS)
        self._resend: set[int] = set()  # sequencer: positions NACKed, to send again
        self._lost: list[tuple[int, int]] = []  # handed out, not kept (a bound): ask again
        self.emitted = 0  # every position <= emitted was handed out as decided
        self._ahead: dict[int, LogEntry] = {}  # decided and handed out, above `emitted`
        self._decided: list[tuple[int, LogEntry]] = []
        self._mids: dict[MessageId, int] = {}  # the log's message identities -> position
        self._conf_sorted: list[int] | None = None
        self.leading = False
        self.stepped_down = False  # handed over, waiting for the successor
        self.acks: dict[str, int] = {}  # per member: how far it holds `ballot`
        self._candidacy: dict[str, Promise] | None = None
        self._cand_deadline = 0.0
        self._prepare_at: float | None = None
        self._prepare_every = 0.0
        self._gone: Ballot = NO_BALLOT  # a ballot whose sequencer handed over
        self._watch_since: float | None = None
        self._lead_since = 0.0
        self._handover_to = ""
        self._handover_until = 0.0
        self._handover_at: float | None = None
        self._no_handover_until = 0.0
        self._stale: dict[str, float] = {}  # members promised to a newer ballot: since when
        self._last_start = float("-inf")
        self._retry_at: float | None = None
        self._retry_every = 0.0
        self._sync_asked: dict[Ballot, float] = {}
        self._start_at: float | None = None
        self._new: Entries = []  # stamps proposed since the last ORDER
        self._commit_sent = 0
        self._commit_at: float | None = None  # a commit-only ORDER is due then
        self._ack_due = False
        self._acked = -1
        self._outbox: list[Body] = []
        self._members: Mapping[str, MemberEntry] = {}  # the gossip membership, last tick
        self._reconfig_due = False
        self._resume = False  # restarted with our own ballot promised
        self.may_found = False  # a group joined by name: the lowest member may found its log
        self._found_after: float | None = None
        self.elected: list[tuple[str, Ballot, int, int]] = []  # (event, ballot, base, high)
        self.dirty = False
        self.conf_dirty = False
        self.stats = SeqLogStats()

    # ================================================================ persistence
    def dumps(self) -> str:
        """The durable state but the membership records (small: the uncommitted log)."""
        self.dirty = False
        return json.dumps({
            "promised": list(self.promised), "ballot": list(self.ballot), "base": self.base,
            "commit": self.commit_b, "cand": self.cand_epoch, "max": self.max_epoch,
            "log": [_entry_json(p, e) for p, e in sorted(self.log.items())],
        }, separators=(",", ":"))

    def dumps_conf(self) -> str:
        """The decided membership records (written only when one is added)."""
        self.conf_dirty = False
        return json.dumps([_entry_json(p, e) for p, e in sorted(self.conf.items())],
                          separators=(",", ":"))

    def restore(self, blob: str | None, start: int, conf_blob: str | None = None) -> None:
        """Reload the durable state; positions below ``start`` were delivered here."""
        if blob:
            d = json.loads(blob)
            self.promised = (int(d["promised"][0]), str(d["promised"][1]))
            self.ballot = (int(d["ballot"][0]), str(d["ballot"][1]))
            self.base = int(d["base"])
            self.commit_b = int(d["commit"])
            self.cand_epoch = int(d["cand"])
            self.max_epoch = int(d["max"])
            self.log = dict(_entry_of(r) for r in d["log"])
        if conf_blob:
            self.conf = {p: e for p, e in (_entry_of(r) for r in json.loads(conf_blob))
                         if type(e) is MemberEntry}
            self._conf_sorted = None
        self.emitted = max(0, start - 1)
        self.known = max(self.base, self.commit_b, self.emitted)
        self.max_ballot = max(self.promised, self.ballot)
        self._resume = self.promised[1] == self.pid
        self._mids = {e: p for p, e in self.log.items() if type(e) is MessageId}
        self._recompute_high()
        self._acked = self.high
        for pos, entry in sorted(self.conf.items()):
            if pos >= start:
                self._decide(pos, entry)
        for pos in sorted(p for p in self.log if start <= p <= self.commit_b):
            self._decide(pos, self.log[pos])

    # ================================================================ queries
    @property
    def is_leader(self) -> bool:
        return self.leading and not self.stepped_down

    def position_of(self, mid: MessageId) -> int | None:
        return self._mids.get(mid)

    def state(self) -> LogState:
        return LogState(self.promised[0], self.promised[1], self.ballot[0], self.ballot[1],
                        self.high)

    def room(self) -> bool:
        return self.is_leader and self.high - self.commit_b < self.config.max_uncommitted

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

    def config_end(self) -> set[str]:
        return self._config_before(max(self.high, self.known, self.emitted) + 1, self.log)

    def take_decided(self) -> list[tuple[int, LogEntry]]:
        out, self._decided = self._decided, []
        return out

    @property
    def has_decided(self) -> bool:
        return bool(self._decided)

    def records_before(self, pos: int) -> int:
        """How many decided membership records come before ``pos`` (every one does by
        the time ``pos`` is delivered): a message's number is its position less these."""
        if self._conf_sorted is None:
            self._conf_sorted = sorted(self.conf)
        return bisect_left(self._conf_sorted, pos)

    def decided_entries(self, lo: int, hi: int) -> Entries:
        """Membership records we know decided in ``lo..hi`` (a NACK's answer)."""
        return [(p, e) for p, e in self.conf.items() if lo <= p <= hi]

    # ================================================================ internals
    def _config_before(self, pos: int, log: Mapping[int, LogEntry]) -> set[str]:
        if self._conf_sorted is None:
            self._conf_sorted = sorted(self.conf)
        members: set[str] = set()
        for p in self._conf_sorted:
            if p >= pos:
                break
            _apply(members, self.conf[p])
        extra = sorted(p for p, e in log.items()
                       if p < pos and type(e) is MemberEntry and p not in self.conf)
        for p in extra:
            e = log[p]
            assert type(e) is MemberEntry
            _apply(members, e)
        return members

    def _heard(self, pid: str, now: float, within: float | None = None) -> bool:
        if pid == self.pid:
            return True
        t = self.last_heard.get(pid)
        limit = self.config.sequencer_timeout if within is None else within
        return t is not None and now - t < limit

    def _valid(self, epoch: int, pid: str) -> bool:
        """A ballot we may act on: of a member, and not absurdly far ahead."""
        if epoch >= self.config.max_seq // 2 or (
                self.max_epoch and epoch > self.max_epoch + self.config.max_epoch_jump):
            self.stats.absurd_epoch += 1
            return False
        if pid != self.pid and not self.is_member(pid):
            self.stats.not_member += 1
            return False
        if epoch > self.max_epoch:
            self.max_epoch = epoch
            self.dirty = True
        if (epoch, pid) > self.max_ballot:
            self.max_ballot = (epoch, pid)
        return True

    def _plausible_pos(self, pos: int) -> bool:
        if pos > max(self.known, self.high, self.emitted) + self.config.max_seq_jump:
            self.stats.absurd_position += 1
            return False
        return True

    def _promise(self, ballot: Ballot) -> None:
        if ballot <= self.promised:
            return
        self.promised = ballot
        if ballot > self.max_ballot:
            self.max_ballot = ballot
        self.dirty = True
        if self.leading and ballot[1] != self.pid:
            self._stop_leading()
        if self._candidacy is not None and ballot != (self.cand_epoch, self.pid):
            self._candidacy = None
            self._prepare_at = None

    def _stop_leading(self) -> None:
        self.leading = False
        self.stepped_down = False
        self._retry_at = None
        self._commit_at = None
        self._start_at = None
        self._handover_at = None
        self._new = []

    def forget(self, pos: int) -> None:
        """The decided entry at ``pos`` could not be kept (a bound): NACK it again and
        hand it out again when it comes back (kept as intervals: a few, however many)."""
        lost = normalize([*self._lost, (pos, pos)])
        if len(lost) <= self.config.max_digest_intervals:
            self._lost = lost

    def _decide(self, pos: int, entry: LogEntry) -> None:
        """``entry`` is committed at ``pos``: hand it out once."""
        if pos <= self.emitted:
            if self._lost and contains(self._lost, pos):
                self._lost = subtract(self._lost, [(pos, pos)])
                self._decided.append((pos, entry))
            return
        earlier = self._ahead.get(pos)
        if earlier is not None:
            if earlier != entry and earlier != ROOT:  # (ROOT: passed over, see pass_over)
                self.stats.conflicts += 1
            return
        if len(self._ahead) >= self.config.max_unstamped and pos != self.emitted + 1:
            return  # asked for again later (missing_positions); the next one always fits
        self._ahead[pos] = entry
        if type(entry) is MemberEntry:
            self.conf[pos] = entry
            self._conf_sorted = None
            self.conf_dirty = True
        self._decided.append((pos, entry))
        if pos > self.known:
            self.known = pos
        ahead = self._ahead
        while self.emitted + 1 in ahead:
            self.emitted += 1
            del ahead[self.emitted]

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
        self._acked = -1
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
                if n < _majority(cfg):
                    break
            elif not (q == 1 and self.leading):
                break  # only the founder commits the first record on its own
            e = log.get(q)
            if type(e) is MemberEntry:
                _apply(cfg, e)
            p = q
        if p > self.commit_b:
            self._commit_to(p)
            if self.leading:
                self._retry_every = self.config.order_retry
                self._retry_at = None

    # ================================================================ sequencer
    def found(self, now: float, me: MemberEntry) -> None:
        """Start the group's log: the founder leads the first ballot alone, and its
        first record makes it the configuration."""
        epoch = self.max_epoch + 1
        self.cand_epoch = epoch
        self.max_epoch = epoch
        ballot = (epoch, self.pid)
        self._promise(ballot)
        self._lead(ballot, 0, [], now)
        self.propose(me)

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

    def _lead(self, ballot: Ballot, base: int, entries: Entries, now: float) -> None:
        self._candidacy = None
        self._prepare_at = None
        self._sync(ballot, base, entries)
        self.leading = True
        self.stepped_down = False
        self._lead_since = now
        self._gone = NO_BALLOT
        self._watch_since = None
        self._stale = {}
        self._retry_every = self.config.order_retry
        self._retry_at = None
        self._commit_sent = self.commit_b
        self.stats.takeovers += 1
        self.elected.append(("lead", ballot, base, self.high))
        self._outbox.append(self._start_message())
        self._last_start = now
        self._advance()
        self._arm(now)

    # ================================================================ candidate
    def _run(self, now: float) -> None:
        """Ask for promises for a new ballot (or our last one, if nothing newer came)."""
        mine = (self.cand_epoch, self.pid)
        if self.promised == mine and mine >= self.max_ballot and self.ballot != mine:
            epoch = self.cand_epoch  # our last candidacy is still the newest: ask again
        else:
            epoch = self.max_epoch + 1
        if epoch >= self.config.max_seq // 2:
            return
        self.cand_epoch = epoch
        self.max_epoch = max(self.max_epoch, epoch)
        ballot = (epoch, self.pid)
        if self.leading:
            self._stop_leading()
        self._promise(ballot)
        self.dirty = True
        self._candidacy = {}
        self._cand_deadline = now + self.config.sequencer_timeout
        self._prepare_every = self.config.order_retry
        self._prepare_at = now + self._prepare_every
        self._outbox.append(Prepare(self.pid, epoch, self.known))
        self.stats.prepares += 1
        self._try_lead(now)

    def _own_promise(self, epoch: int, candidate: str, cand_commit: int) -> Promise:
        start = max(cand_commit, self.known)
        entries: Entries = []
        high = start
        log = self.log
        while high < self.high and len(entries) < PROMISE_LIMIT:
            e = log.get(high + 1)
            if e is None:
                break
            high += 1
            entries.append((high, e))
        return Promise(self.pid, epoch, candidate, self.ballot[0], self.ballot[1], self.known,
                       max(high, min(self.high, start)), entries)

    def _try_lead(self, now: float) -> None:
        replies = self._candidacy
        if replies is None:
            return
        epoch = self.cand_epoch
        replies[self.pid] = self._own_promise(epoch, self.pid, self.known)
        c_star = max(r.commit for r in replies.values())
        if c_star > self.known:
            self.known = c_star
        if self.emitted < c_star:
            return  # first learn every committed entry (missing_positions asks for them)
        best = max(replies.values(),
                   key=lambda r: ((r.log_epoch, r.log_leader), r.high, r.sender == self.pid))
        suffix = dict(best.entries)
        adopted: Entries = []
        top = c_star
        while top < best.high and top + 1 in suffix:
            top += 1
            adopted.append((top, suffix[top]))
        cfg = self._config_before(c_star + 1, {})
        voters = set(replies)
        if not cfg or len(voters & cfg) < _majority(cfg):
            return
        for _, e in adopted:
            if type(e) is MemberEntry:
                _apply(cfg, e)
                if not cfg or len(voters & cfg) < _majority(cfg):
                    return
        self._lead((epoch, self.pid), c_star, adopted, now)

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

    def on_prepare(self, pr: Prepare, now: float) -> None:
        if not self._valid(pr.epoch, pr.sender) or not self._plausible_pos(pr.commit):
            return
        ballot = (pr.epoch, pr.sender)
        if ballot < self.promised:
            self.stats.stale += 1
            return
        self._promise(ballot)
        self._outbox.append(self._own_promise(pr.epoch, pr.sender, pr.commit))

    def on_promise(self, pm: Promise, now: float) -> None:
        if self._candidacy is None or pm.candidate != self.pid or pm.epoch != self.cand_epoch:
            return
        if (pm.log_epoch, pm.log_leader) >= (pm.epoch, pm.candidate):
            return  # a log synced to our own ballot or a newer one: not an answer of ours
        if not self._valid(pm.epoch, pm.sender) or not self._plausible_pos(pm.commit):
            return
        self._candidacy[pm.sender] = pm
        self._try_lead(now)

    def on_start(self, st: Start, now: float) -> None:
        if not self._valid(st.epoch, st.sender) or not self._plausible_pos(st.base):
            return
        ballot = (st.epoch, st.sender)
        if ballot < self.promised:
            self.stats.stale += 1
            return
        self._promise(ballot)
        if st.base > self.known:
            self.known = st.base
        if ballot == self.ballot:  # a START sent again: take what we lack
            for p, e in st.entries:
                if p > self.commit_b and p not in self.log:
                    self.log[p] = e
                    if type(e) is MessageId:
                        self._mids[e] = p
            self._commit_to(st.base)
            self._extend_high()
        else:
            self._sync(ballot, st.base, st.entries)
        self._ack_due = True
        self._sync_asked.pop(ballot, None)
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

    def learn(self, pos: int, mid: MessageId) -> None:
        """A record that came with its committed position (repair, catch-up)."""
        if self._plausible_pos(pos):
            self._decide(pos, mid)

    def on_handover(self, h: Handover, now: float) -> None:
        info = h.sequencer
        if not self._valid(info.epoch, h.sender):
            return
        ballot = (info.epoch, h.sender)
        if ballot != self.promised:
            return
        self._gone = ballot
        if info.pid == self.pid and self._candidacy is None:
            self._run(now)

    def on_status(self, sender: str, st: LogState | None, commit: int, now: float) -> None:
        if st is None:
            return
        if st.epoch and not self._valid(st.epoch, st.leader):
            return
        if st.log_epoch and not self._valid(st.log_epoch, st.log_leader):
            return
        if self._plausible_pos(commit) and commit > self.known:
            self.known = commit
        log_ballot = (st.log_epoch, st.log_leader)
        if log_ballot == self.ballot and self.ballot != NO_BALLOT and self.is_member(sender):
            if st.high > self.acks.get(sender, -1):
                self.acks[sender] = st.high
                if st.high > self.heard_high and self._plausible_pos(st.high):
                    self.heard_high = st.high
                self._advance()
        elif (log_ballot > self.promised and log_ballot == (st.epoch, st.leader)
              and self.is_member(st.log_leader)):
            # A member synced to a newer ballot than we know: follow it.
            self._promise(log_ballot)
            self._want_sync(log_ballot, now)
        if self.is_leader:
            if (st.epoch, st.leader) > self.ballot and sender in self.config_end():
                self._stale.setdefault(sender, now)  # it cannot follow us
            else:
                self._stale.pop(sender, None)

    def _want_sync(self, ballot: Ballot, now: float) -> None:
        """Ask the sequencer of ``ballot`` for its log (a START), at most every order_retry."""
        if ballot[1] == self.pid:
            return
        asked = self._sync_asked.get(ballot)
        if asked is not None and now - asked < self.config.order_retry:
            return
        if len(self._sync_asked) > 16:
            self._sync_asked.clear()
        self._sync_asked[ballot] = now
        self._outbox.append(Ack(self.pid, ballot[0], ballot[1], 0, False))

    # ================================================================ timers
    def next_deadline(self) -> float | None:
        best: float | None = None
        for d in (self._retry_at, self._prepare_at, self._start_at, self._handover_at,
                  self._commit_at):
            if d is not None and (best is None or d < best):
                best = d
        if self._candidacy is not None and (best is None or self._cand_deadline < best):
            best = self._cand_deadline
        return best

    def on_timer(self, now: float) -> None:
        """Retries: stamps a majority has not acknowledged, PREPAREs, HANDOVERs."""
        if self._start_at is not None and now >= self._start_at:
            self._start_at = None
            if self.leading:
                self._outbox.append(self._start_message())
                self._last_start = now
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
        if self._candidacy is not None:
            if now >= self._cand_deadline:
                self._candidacy = None  # no majority answered: wait, then try again
                self._prepare_at = None
                self._watch_since = now
            elif self._prepare_at is not None and now >= self._prepare_at:
                self._prepare_every = min(self._prepare_every * 2, self.config.status_interval)
                self._prepare_at = now + self._prepare_every
                self._outbox.append(Prepare(self.pid, self.cand_epoch, self.known))
                self._try_lead(now)
        if self._handover_at is not None and now >= self._handover_at:
            self._handover_at = None
            if self.leading and self.stepped_down:
                if now >= self._handover_until:  # the successor did not come: carry on
                    self.stepped_down = False
                    self._no_handover_until = now + 4 * self.config.sequencer_timeout
                else:
                    self._send_handover(now)
        self._arm(now)

    def _start_message(self) -> Start:
        entries = [(p, self.log[p]) for p in range(self.commit_b + 1, self.high + 1)]
        return Start(self.pid, self.ballot[0], self.commit_b, entries[:PROMISE_LIMIT])

    def _send_handover(self, now: float) -> None:
        self._outbox.append(Handover(self.pid, SequencerInfo(self.ballot[0], self._handover_to,
                                                             self.high + 1)))
        self._handover_at = now + self.config.order_retry * 4

    def hand_over(self, to: str, now: float) -> None:
        """Stop stamping and ask ``to`` to take over (it adopts our log)."""
        if not self.is_leader or to == self.pid:
            return
        self.stepped_down = True
        self._handover_to = to
        self._handover_until = now + self.config.sequencer_timeout
        self.stats.handovers += 1
        self.elected.append(("handover", self.ballot, self.commit_b, self.high))
        self._send_handover(now)

    @property
    def handover_target(self) -> str:
        return self._handover_to

    def _working(self, now: float) -> bool:
        """Is there a sequencer we follow (or are)?"""
        leader = self.promised[1]
        if not leader:
            return False
        if leader == self.pid:
            return self.is_leader or self._candidacy is not None
        if self.ballot != self.promised or self._gone == self.promised:
            return False
        return self._heard(leader, now)

    def tick(self, now: float, members: Mapping[str, MemberEntry]) -> None:
        """Role policy, run about once a second: take over from a silent sequencer,
        hand over to a lower member, change the configuration. ``members``: the
        current members (gossip membership) by pid."""
        self._members = members
        if self.leading:
            self._leader_tick(now, members)
            return
        if self._candidacy is not None:
            return
        if self.promised == NO_BALLOT and not self.conf:
            self._maybe_found(now, members)
            return
        if self._resume and self.promised[1] == self.pid and self.pid in self.config_end():
            self._resume = False
            self._run(now)  # we led (or ran) before a restart: try again at once
            return
        if self._working(now):
            self._watch_since = None
            return
        leader = self.promised[1]
        if self.ballot != self.promised and leader and self._heard(leader, now):
            self._want_sync(self.promised, now)
        if self._watch_since is None:
            self._watch_since = now
        # A sequencer silent for sequencer_timeout is replaced at once; one that handed
        # over, or whose log we cannot get, after sequencer_timeout more.
        silent = bool(leader) and leader != self.pid and not self._heard(leader, now)
        if not silent and now - self._watch_since < self.config.sequencer_timeout:
            return
        cfg = self.config_end()
        if self.pid not in cfg:
            return
        gone = self.promised[1] if self._gone == self.promised else ""
        live = [p for p in cfg if p != gone and self._heard(p, now)]
        if live and min(live) == self.pid:
            self._run(now)

    def _maybe_found(self, now: float, members: Mapping[str, MemberEntry]) -> None:
        """A group joined by name whose log nobody started: the lowest member does,
        once it has heard no log for ``sequencer_timeout``."""
        if not self.may_found or self.max_epoch:
            return
        if self._found_after is None:
            self._found_after = now + self.config.sequencer_timeout
            return
        if now < self._found_after:
            return
        live = [p for p in members if self._heard(p, now)]
        if live and min(live) == self.pid:
            self.found(now, members.get(self.pid) or MemberEntry(self.pid, 1, True))

    def _leader_tick(self, now: float, members: Mapping[str, MemberEntry]) -> None:
        if self.stepped_down:
            return
        if any(now - t >= self.config.sequencer_timeout and self._heard(p, now)
               for p, t in self._stale.items()):
            self._stale = {}
            self._run(now)  # members promised a newer ballot nobody leads: lead a newer one
            return
        cfg = self.config_end()
        if now >= self._no_handover_until:
            lower = [p for p in cfg if p < self.pid and self._heard(p, now)
                     and self.acks.get(p, -1) >= self.commit_b and p in members]
            if lower:
                self.hand_over(min(lower), now)
                return
        self._reconfigure(now)

    def _reconfigure(self, now: float) -> None:
        """Sequencer: bring the configuration to the members heard lately. Members
        that joined enter together; one that left or went silent leaves, one at a
        time, and only once no other membership record waits for its commit."""
        self._reconfig_due = False
        if not self.is_leader:
            return
        members = self._members
        if any(type(self.log.get(p)) is MemberEntry for p in range(self.commit_b + 1,
                                                                     self.high + 1)):
            return
        cfg = self.config_end()
        joining = [pid for pid in sorted(members) if pid not in cfg and self._heard(pid, now)]
        for pid in joining:
            self.stats.config_records += 1
            self.propose(members[pid])
        if joining:
            return
        since = max(self._lead_since, 0.0)
        for pid in sorted(cfg):
            if pid == self.pid or len(cfg) <= 1:
                continue
            entry = members.get(pid)
            silent = now - max(self.last_heard.get(pid, since), since) >= \
                self.config.member_timeout
            if entry is None or silent:
                version = entry.version if entry is not None else 0
                self.stats.config_records += 1
                self.propose(MemberEntry(pid, version, False))
                return

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
            self._acked = self.high
            out.append(Ack(self.pid, self.ballot[0], self.ballot[1], self.high))
        return out
