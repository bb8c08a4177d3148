"""Total order in ad hoc mode, the state every concern of the sequencing log shares
(:class:`LogCore`): the replica's fields, the sequencer's role, ballots and
promises, and the entries decided (each handed out once).

One member, the *sequencer*, numbers the group's messages: it appends an entry
``position -> message identity`` to its log and broadcasts it (ORDER). A member
delivers the message at position ``p`` only once ``p`` is *committed*: held, in
the sequencer's ballot, by a majority of the group's configuration at ``p``.
This is Viewstamped Replication / multi-Paxos with a log in contiguous order, on
a lossy broadcast medium (docs/group.md, section 5). The log is split by concern,
each module one object that holds this state (and the few others it calls), put
together behind :class:`~m2mc.group.total.seqlog.SeqLog`:

- here: the state, ballots (``(epoch, pid)``, ordered as tuples) and promises;
- :mod:`~m2mc.group.total.configuration`: the configuration of majorities, and
  the membership records the sequencer proposes;
- :mod:`~m2mc.group.total.replication`: ORDER, ACK, DECIDED, the commit point;
- :mod:`~m2mc.group.total.election`: PREPARE, PROMISE, START, HANDOVER, take-over
  and the role policy;
- :mod:`~m2mc.group.total.persistence`: what goes to the store.

Rules kept here:

- A member *promises* a ballot and from then on accepts nothing of older ballots
  (``promise``: promises only grow). Its log is *synced* to one ballot
  (``ballot``), which is never newer than ``promised``.
- A ballot of a non-member, or absurdly far past the newest known, is dropped
  (``valid``); so is a position absurdly far ahead (``plausible_pos``).
- A decided entry is handed out once, in any order, through ``take_decided``;
  ``emitted`` is the contiguous prefix handed out.

The sequencer role (:class:`Role`, read by ``role``), with every transition and
the method that makes it:

==============  ==========================================  ==============  ========================
from            event                                       to              where
==============  ==========================================  ==============  ========================
FOLLOWER        the sequencer silent (or gone), we are the  CANDIDATE       election: tick -> _run
                lowest live member of the configuration
FOLLOWER        a HANDOVER names us                         CANDIDATE       election: on_handover
FOLLOWER        restarted with our own ballot promised      CANDIDATE       election: tick (resume)
FOLLOWER        the log founded (creator, or lowest member  LEADER          election: found
                of a group joined by name)
CANDIDATE       promises of a majority of every             LEADER          election: try_lead
                configuration the adopted log goes through
CANDIDATE       no majority within ``sequencer_timeout``    FOLLOWER        election: on_timer
any             a newer ballot of another process promised  FOLLOWER        core: promise
LEADER          a lower member holds the commit point       HANDING_OVER    election: hand_over
LEADER          members promised a newer ballot nobody      CANDIDATE       election: _leader_tick
                leads
HANDING_OVER    the successor did not come in time          LEADER          election: on_timer
==============  ==========================================  ==============  ========================

Pure: no clocks (``now`` is passed in), no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from m2mc.group.config import GroupConfig
from m2mc.group.messages import Ack, Body, Entries, LogEntry, LogState, MemberEntry, Promise
from m2mc.group.seqsets import contains, normalize, subtract
from m2mc.ordering import ROOT, MessageId

Ballot = tuple[int, str]
NO_BALLOT: Ballot = (0, "")
ORDER_CHUNK = 24  # stamps per ORDER message: one M2MP packet
RESEND_LIMIT = 240  # stamps re-sent at once by a sequencer whose majority is slow
PROMISE_LIMIT = 50_000  # entries in one PROMISE or START (a message stays < 1 MB)
# A commit point no new stamps carried goes out alone this much later (members that
# overheard a majority's ACKs know it already).
COMMIT_DELAY = 0.02


class Role(Enum):
    """The sequencer role of one member (the table in the module docstring)."""

    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"
    HANDING_OVER = "handing_over"


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


class LogCore:
    """One member's replica of a total-order group's sequencing log: its state, shared
    by the log's concerns (each an object holding it; nothing else holds it but
    :class:`~m2mc.group.total.seqlog.SeqLog`), and the rules on it every concern
    applies: ballots, promises, decided entries."""

    __slots__ = (
        "ack_due", "acks", "ahead", "ballot", "base", "cand_epoch", "candidacy", "commit_at",
        "commit_b", "commit_sent", "conf", "conf_dirty", "conf_sorted", "config",
        "decided", "dirty", "elected", "emitted", "handover_at", "handover_to", "heard_high",
        "high", "is_member", "known", "last_heard", "last_start", "lead_since", "leading",
        "log", "log_records", "lost", "max_ballot", "max_epoch", "may_found", "members",
        "mids", "outbox", "pid", "prepare_at", "promised", "reconfig_due", "resume", "retry_at",
        "retry_every", "start_at", "stats", "stepped_down", "sync_asked", "unsent",
    )

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
        # Positions of `log` that may hold a membership record (a superset, checked
        # where used): the configuration reads them instead of the whole log.
        self.log_records: set[int] = set()
        self.commit_b = 0  # committed point within `ballot`
        self.conf: dict[int, MemberEntry] = {}  # decided membership records
        self.cand_epoch = 0
        self.max_epoch = 0
        # ---------------------------------------------------- volatile state
        self.max_ballot: Ballot = NO_BALLOT  # the newest ballot heard of
        self.known = 0  # the highest position known to be committed (from anyone)
        self.high = 0  # our log holds every position of `ballot` up to here
        self.heard_high = 0  # positions of `ballot` others hold (ACKs, ORDERs, STATUS)
        self.lost: list[tuple[int, int]] = []  # handed out, not kept (a bound): ask again
        self.emitted = 0  # every position <= emitted was handed out as decided
        self.ahead: dict[int, LogEntry] = {}  # decided and handed out, above `emitted`
        self.decided: list[tuple[int, LogEntry]] = []  # not taken yet (take_decided)
        self.mids: dict[MessageId, int] = {}  # the log's message identities -> position
        self.conf_sorted: list[int] | None = None  # the positions of `conf`, sorted
        self.leading = False
        self.stepped_down = False  # handed over, waiting for the successor
        self.acks: dict[str, int] = {}  # per member: how far it holds `ballot`
        self.candidacy: dict[str, Promise] | None = None  # the answers, while a candidate
        self.prepare_at: float | None = None  # candidate: the next PREPARE is due then
        self.lead_since = 0.0
        self.handover_to = ""
        self.handover_at: float | None = None  # the next HANDOVER is due then
        self.last_start = float("-inf")
        self.retry_at: float | None = None  # sequencer: stamps sent again then
        self.retry_every = 0.0
        self.sync_asked: dict[Ballot, float] = {}  # START asked of a ballot's sequencer: when
        self.start_at: float | None = None  # sequencer: a START is due then
        self.unsent: Entries = []  # stamps proposed since the last ORDER
        self.commit_sent = 0
        self.commit_at: float | None = None  # a commit-only ORDER is due then
        self.ack_due = False
        self.outbox: list[Body] = []
        self.members: Mapping[str, MemberEntry] = {}  # the gossip membership, last tick
        self.reconfig_due = False
        self.resume = False  # restarted with our own ballot promised
        self.may_found = False  # a group joined by name: the lowest member may found its log
        self.elected: list[tuple[str, Ballot, int, int]] = []  # (event, ballot, base, high)
        self.dirty = False
        self.conf_dirty = False
        self.stats = SeqLogStats()

    # ================================================================ queries
    @property
    def is_leader(self) -> bool:
        return self.leading and not self.stepped_down

    @property
    def role(self) -> Role:
        """The sequencer role (module docstring): ``leading`` and ``stepped_down``
        are its two bits, a candidacy under way the third."""
        if self.leading:
            return Role.HANDING_OVER if self.stepped_down else Role.LEADER
        return Role.CANDIDATE if self.candidacy is not None else Role.FOLLOWER

    def position_of(self, mid: MessageId) -> int | None:
        return self.mids.get(mid)

    def state(self) -> LogState:
        return LogState(self.promised[0], self.promised[1], self.ballot[0], self.ballot[1],
                        self.high)

    def room(self) -> bool:
        return self.is_leader and self.high - self.commit_b < self.config.max_uncommitted

    def take_decided(self) -> list[tuple[int, LogEntry]]:
        out, self.decided = self.decided, []
        return out

    @property
    def has_decided(self) -> bool:
        return bool(self.decided)

    @property
    def handover_target(self) -> str:
        return self.handover_to

    # ================================================================ ballots
    def heard(self, pid: str, now: float, within: float | None = None) -> bool:
        """Heard from ``pid`` within ``within`` (``sequencer_timeout``); ourselves, always."""
        if pid == self.pid:
            return True
        t = self.last_heard.get(pid)
        limit = self.config.sequencer_timeout if within is None else within
        return t is not None and now - t < limit

    def valid(self, epoch: int, pid: str) -> bool:
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

    def handed_out(self, pos: int) -> bool:
        """Position ``pos`` was handed out as decided (and not given up as lost)."""
        return pos <= self.emitted and not (self.lost and contains(self.lost, pos))

    def plausible_pos(self, pos: int) -> bool:
        """A position we may act on: not absurdly far past what we know."""
        if pos > max(self.known, self.high, self.emitted) + self.config.max_seq_jump:
            self.stats.absurd_position += 1
            return False
        return True

    def promise(self, ballot: Ballot) -> None:
        """Promise ``ballot`` if newer (promises only grow): a sequencer or candidate of
        an older ballot of ours stops."""
        if ballot <= self.promised:
            return
        self.promised = ballot
        if ballot > self.max_ballot:
            self.max_ballot = ballot
        self.dirty = True
        if self.leading and ballot[1] != self.pid:
            self.stop_leading()
        if self.candidacy is not None and ballot != (self.cand_epoch, self.pid):
            self.candidacy = None
            self.prepare_at = None

    def stop_leading(self) -> None:
        self.leading = False
        self.stepped_down = False
        self.retry_at = None
        self.commit_at = None
        self.start_at = None
        self.handover_at = None
        self.unsent = []

    def want_sync(self, ballot: Ballot, now: float) -> None:
        """Ask the sequencer of ``ballot`` for its log (a START), at most every order_retry."""
        if ballot[1] == self.pid:
            return
        asked = self.sync_asked.get(ballot)
        if asked is not None and now - asked < self.config.order_retry:
            return
        if len(self.sync_asked) > 16:
            self.sync_asked.clear()
        self.sync_asked[ballot] = now
        self.outbox.append(Ack(self.pid, ballot[0], ballot[1], 0, False))

    def put_entry(self, pos: int, entry: LogEntry) -> None:
        """Put ``entry`` in our log at ``pos`` (every insertion goes through here or
        :meth:`set_log`, so that ``log_records`` knows every record)."""
        self.log[pos] = entry
        if type(entry) is MessageId:
            self.mids[entry] = pos
        elif type(entry) is MemberEntry:
            self.log_records.add(pos)

    def set_log(self, log: dict[int, LogEntry]) -> None:
        """Our log is ``log`` now (its message identities and records with it)."""
        self.log = log
        self.mids = {e: p for p, e in log.items() if type(e) is MessageId}
        self.log_records = {p for p, e in log.items() if type(e) is MemberEntry}

    def records_in_log(self) -> list[int]:
        """The positions of ``log`` that hold a membership record, sorted."""
        recs = self.log_records
        if not recs:
            return []  # (the usual case, asked at every ACK: no generator, no sort)
        log = self.log
        live = sorted(p for p in recs if type(log.get(p)) is MemberEntry)
        if len(live) != len(recs):
            self.log_records = set(live)
        return live

    def recompute_high(self) -> None:
        """``high`` from the log: every position after the committed ones it holds."""
        h = max(self.base, self.commit_b)
        log = self.log
        while h + 1 in log:
            h += 1
        self.high = h

    # ================================================================ decided entries
    def forget(self, pos: int) -> None:
        """The decided entry at ``pos`` could not be kept (a bound): NACK it again and
        hand it out again when it comes back (kept as intervals: a few, however many)."""
        lost = normalize([*self.lost, (pos, pos)])
        if len(lost) <= self.config.max_digest_intervals:
            self.lost = lost

    def decide(self, pos: int, entry: LogEntry) -> None:
        """``entry`` is committed at ``pos``: hand it out once."""
        if pos <= self.emitted:
            if self.lost and contains(self.lost, pos):
                self.lost = subtract(self.lost, [(pos, pos)])
                self.decided.append((pos, entry))
            return
        earlier = self.ahead.get(pos)
        if earlier is not None:
            if earlier != entry and earlier != ROOT:  # (ROOT: passed over, see pass_over)
                self.stats.conflicts += 1
            return
        if len(self.ahead) >= self.config.max_unstamped and pos != self.emitted + 1:
            return  # asked for again later (missing_positions); the next one always fits
        self.ahead[pos] = entry
        if type(entry) is MemberEntry:
            self.conf[pos] = entry
            self.conf_sorted = None
            self.conf_dirty = True
        self.decided.append((pos, entry))
        if pos > self.known:
            self.known = pos
        ahead = self.ahead
        while self.emitted + 1 in ahead:
            self.emitted += 1
            del ahead[self.emitted]
