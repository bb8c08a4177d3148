"""Total order: election -- ballots, promises, take-over and hand-over, and the
role policy run about once a second (docs/group.md section 5, "Take-over").

Rules (the role transitions are tabled in :mod:`~m2mc.group.total.core`):

- **Take-over.** A candidate sends PREPARE for a new ballot; members promise and
  answer (PROMISE) with their log after the candidate's commit point. With the
  answers of a majority of *every* configuration the adopted log goes through,
  and once it knows every committed entry, the candidate adopts the log of the
  answer synced to the newest ballot, the longest among those (the rule of
  Viewstamped Replication), and sends it (START). Every committed entry is in it.
- A candidate asks again every ``order_retry`` (backing off), and gives up after
  ``sequencer_timeout`` without a majority.
- A member that learns of a newer ballot it is not synced to asks its sequencer
  for the log (ACK ``synced=False``); the sequencer answers with START.
- **Hand-over.** A sequencer hands over to a lower member that is heard and holds
  the commit point (HANDOVER); if the successor does not take over within
  ``sequencer_timeout`` it carries on, and does not try again for four times that.
- **Who runs.** A sequencer silent for ``sequencer_timeout`` is replaced at once;
  one that handed over, or whose log we cannot get, after ``sequencer_timeout``
  more. The lowest live member of the configuration runs.
- A member without a majority can still send: its messages wait unstamped and are
  stamped after the heal. It never delivers a position that is not committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from m2mc.group.messages import (
    Entries,
    Handover,
    LogEntry,
    LogState,
    MemberEntry,
    Prepare,
    Promise,
    SequencerInfo,
    Start,
)
from m2mc.group.total.configuration import apply_record, majority
from m2mc.group.total.core import NO_BALLOT, PROMISE_LIMIT, Ballot, LogCore
from m2mc.group.total.replication import ConfigurationPort


class ReplicationPort(Protocol):
    """What the election asks of replication
    (:class:`~m2mc.group.total.replication.Replication`)."""

    def sync(self, ballot: Ballot, base: int, entries: Iterable[tuple[int, LogEntry]]
             ) -> None: ...

    def advance(self) -> None: ...

    def commit_to(self, commit: int) -> None: ...

    def extend_high(self) -> None: ...

    def propose(self, entry: LogEntry) -> int | None: ...

    def arm(self, now: float) -> None: ...

    def on_timer(self, now: float) -> None: ...


class ElectionConfigurationPort(ConfigurationPort, Protocol):
    """What the election asks of the configuration
    (:class:`~m2mc.group.total.configuration.Configuration`)."""

    def config_end(self) -> set[str]: ...


class Election:
    """PREPARE, PROMISE, START, HANDOVER and the role policy (module docstring)."""

    __slots__ = ("_cand_deadline", "_configuration", "_found_after", "_gone",
                 "_handover_until", "_no_handover_until", "_prepare_every", "_replication",
                 "_stale", "_watch_since", "core")

    def __init__(self, core: LogCore, configuration: ElectionConfigurationPort,
                 replication: ReplicationPort) -> None:
        self.core = core
        self._configuration = configuration
        self._replication = replication
        self._cand_deadline = 0.0  # candidate: no majority by then, give up
        self._prepare_every = 0.0
        self._gone: Ballot = NO_BALLOT  # a ballot whose sequencer handed over
        self._watch_since: float | None = None
        self._handover_until = 0.0
        self._no_handover_until = 0.0
        self._stale: dict[str, float] = {}  # members promised to a newer ballot: since when
        self._found_after: float | None = None

    # ================================================================ sequencer
    def found(self, now: float, me: MemberEntry) -> None:
        """Start the group's log: the founder leads the first ballot alone, and its
        first record makes it the configuration; the records of the other members
        heard lately follow at once, before any message is stamped. (Stamped in a
        configuration of one, a backlog was committed by the founder alone: held by
        no one else, and the others could never elect a successor without it, so
        when the founder closed they stalled for good.)"""
        core = self.core
        epoch = core.max_epoch + 1
        core.cand_epoch = epoch
        core.max_epoch = epoch
        ballot = (epoch, core.pid)
        core.promise(ballot)
        self._lead(ballot, 0, [], now)
        self._replication.propose(me)
        self._configuration.reconfigure(now, self._replication.propose)

    def _lead(self, ballot: Ballot, base: int, entries: Entries, now: float) -> None:
        core = self.core
        core.candidacy = None
        core.prepare_at = None
        self._replication.sync(ballot, base, entries)
        core.leading = True
        core.stepped_down = False
        core.lead_since = now
        self._gone = NO_BALLOT
        self._watch_since = None
        self._stale = {}
        core.retry_every = core.config.order_retry
        core.retry_at = None
        core.commit_sent = core.commit_b
        core.stats.takeovers += 1
        core.elected.append(("lead", ballot, base, core.high))
        core.outbox.append(self._start_message())
        core.last_start = now
        self._replication.advance()
        self._replication.arm(now)

    def _start_message(self) -> Start:
        core = self.core
        entries = [(p, core.log[p]) for p in range(core.commit_b + 1, core.high + 1)]
        return Start(core.pid, core.ballot[0], core.commit_b, entries[:PROMISE_LIMIT])

    # ================================================================ candidate
    def _run(self, now: float) -> None:
        """Ask for promises for a new ballot (or our last one, if nothing newer came)."""
        core = self.core
        mine = (core.cand_epoch, core.pid)
        if core.promised == mine and mine >= core.max_ballot and core.ballot != mine:
            epoch = core.cand_epoch  # our last candidacy is still the newest: ask again
        else:
            epoch = core.max_epoch + 1
        if epoch >= core.config.max_seq // 2:
            return
        core.cand_epoch = epoch
        core.max_epoch = max(core.max_epoch, epoch)
        ballot = (epoch, core.pid)
        if core.leading:
            core.stop_leading()
        core.promise(ballot)
        core.dirty = True
        core.candidacy = {}
        self._cand_deadline = now + core.config.sequencer_timeout
        self._prepare_every = core.config.order_retry
        core.prepare_at = now + self._prepare_every
        core.outbox.append(Prepare(core.pid, epoch, core.known))
        core.stats.prepares += 1
        self.try_lead(now)

    def _own_promise(self, epoch: int, candidate: str, cand_commit: int) -> Promise:
        core = self.core
        start = max(cand_commit, core.known)
        entries: Entries = []
        high = start
        log = core.log
        while high < core.high and len(entries) < PROMISE_LIMIT:
            e = log.get(high + 1)
            if e is None:
                break
            high += 1
            entries.append((high, e))
        return Promise(core.pid, epoch, candidate, core.ballot[0], core.ballot[1], core.known,
                       max(high, min(core.high, start)), entries)

    def try_lead(self, now: float) -> None:
        """Lead if the answers so far let us (module docstring, "Take-over")."""
        core = self.core
        replies = core.candidacy
        if replies is None:
            return
        epoch = core.cand_epoch
        replies[core.pid] = self._own_promise(epoch, core.pid, core.known)
        c_star = max(r.commit for r in replies.values())
        if c_star > core.known:
            core.known = c_star
        if core.emitted < c_star:
            return  # first learn every committed entry (missing_positions asks for them)
        best = max(replies.values(),
                   key=lambda r: ((r.log_epoch, r.log_leader), r.high, r.sender == core.pid))
        suffix = dict(best.entries)
        adopted: Entries = []
        top = c_star
        while top < best.high and top + 1 in suffix:
            top += 1
            adopted.append((top, suffix[top]))
        cfg = self._configuration.config_before(c_star + 1, {})
        voters = set(replies)
        if not cfg or len(voters & cfg) < majority(cfg):
            return
        for _, e in adopted:
            if type(e) is MemberEntry:
                apply_record(cfg, e)
                if not cfg or len(voters & cfg) < majority(cfg):
                    return
        self._lead((epoch, core.pid), c_star, adopted, now)

    # ================================================================ inputs
    def on_prepare(self, pr: Prepare, now: float) -> None:
        core = self.core
        if not core.valid(pr.epoch, pr.sender) or not core.plausible_pos(pr.commit):
            return
        ballot = (pr.epoch, pr.sender)
        if ballot < core.promised:
            core.stats.stale += 1
            return
        core.promise(ballot)
        core.outbox.append(self._own_promise(pr.epoch, pr.sender, pr.commit))

    def on_promise(self, pm: Promise, now: float) -> None:
        core = self.core
        if core.candidacy is None or pm.candidate != core.pid or pm.epoch != core.cand_epoch:
            return
        if (pm.log_epoch, pm.log_leader) >= (pm.epoch, pm.candidate):
            return  # a log synced to our own ballot or a newer one: not an answer of ours
        if not core.valid(pm.epoch, pm.sender) or not core.plausible_pos(pm.commit):
            return
        core.candidacy[pm.sender] = pm
        self.try_lead(now)

    def on_start(self, st: Start, now: float) -> None:
        core = self.core
        if not core.valid(st.epoch, st.sender) or not core.plausible_pos(st.base):
            return
        ballot = (st.epoch, st.sender)
        if ballot < core.promised:
            core.stats.stale += 1
            return
        core.promise(ballot)
        if st.base > core.known:
            core.known = st.base
        if ballot == core.ballot:  # a START sent again: take what we lack
            for p, e in st.entries:
                if p > core.commit_b and p not in core.log:
                    core.put_entry(p, e)
            self._replication.commit_to(st.base)
            self._replication.extend_high()
        else:
            self._replication.sync(ballot, st.base, st.entries)
        core.ack_due = True
        core.sync_asked.pop(ballot, None)
        self._replication.advance()

    def on_handover(self, h: Handover, now: float) -> None:
        core = self.core
        info = h.sequencer
        if not core.valid(info.epoch, h.sender):
            return
        ballot = (info.epoch, h.sender)
        if ballot != core.promised:
            return
        self._gone = ballot
        if info.pid == core.pid and core.candidacy is None:
            self._run(now)

    def on_status(self, sender: str, st: LogState | None, commit: int, now: float) -> None:
        core = self.core
        if st is None:
            return
        if st.epoch and not core.valid(st.epoch, st.leader):
            return
        if st.log_epoch and not core.valid(st.log_epoch, st.log_leader):
            return
        if core.plausible_pos(commit) and commit > core.known:
            core.known = commit
        log_ballot = (st.log_epoch, st.log_leader)
        if log_ballot == core.ballot and core.ballot != NO_BALLOT and core.is_member(sender):
            if st.high > core.acks.get(sender, -1):
                core.acks[sender] = st.high
                if st.high > core.heard_high and core.plausible_pos(st.high):
                    core.heard_high = st.high
                self._replication.advance()
        elif (log_ballot > core.promised and log_ballot == (st.epoch, st.leader)
              and core.is_member(st.log_leader)):
            # A member synced to a newer ballot than we know: follow it.
            core.promise(log_ballot)
            core.want_sync(log_ballot, now)
        if core.is_leader:
            if ((st.epoch, st.leader) > core.ballot
                    and sender in self._configuration.config_end()):
                self._stale.setdefault(sender, now)  # it cannot follow us
            else:
                self._stale.pop(sender, None)

    # ================================================================ hand-over
    def hand_over(self, to: str, now: float) -> None:
        """Stop stamping and ask ``to`` to take over (it adopts our log)."""
        core = self.core
        if not core.is_leader or to == core.pid:
            return
        core.stepped_down = True
        core.handover_to = to
        self._handover_until = now + core.config.sequencer_timeout
        core.stats.handovers += 1
        core.elected.append(("handover", core.ballot, core.commit_b, core.high))
        self._send_handover(now)

    def _send_handover(self, now: float) -> None:
        core = self.core
        core.outbox.append(Handover(core.pid, SequencerInfo(core.ballot[0], core.handover_to,
                                                             core.high + 1)))
        core.handover_at = now + core.config.order_retry * 4

    # ================================================================ role policy
    def _working(self, now: float) -> bool:
        """Is there a sequencer we follow (or are)?"""
        core = self.core
        leader = core.promised[1]
        if not leader:
            return False
        if leader == core.pid:
            return core.is_leader or core.candidacy is not None
        if core.ballot != core.promised or self._gone == core.promised:
            return False
        return core.heard(leader, now)

    def tick(self, now: float, members: Mapping[str, MemberEntry]) -> None:
        """Role policy, run about once a second: take over from a silent sequencer,
        hand over to a lower member, change the configuration. ``members``: the
        current members (gossip membership) by pid."""
        core = self.core
        core.members = members
        if core.leading:
            self._leader_tick(now, members)
            return
        if core.candidacy is not None:
            return
        if core.promised == NO_BALLOT and not core.conf:
            self._maybe_found(now, members)
            return
        if (core.resume and core.promised[1] == core.pid
                and core.pid in self._configuration.config_end()):
            core.resume = False
            self._run(now)  # we led (or ran) before a restart: try again at once
            return
        if self._working(now):
            self._watch_since = None
            return
        leader = core.promised[1]
        if core.ballot != core.promised and leader and core.heard(leader, now):
            core.want_sync(core.promised, now)
        if self._watch_since is None:
            self._watch_since = now
        # A sequencer silent for sequencer_timeout is replaced at once; one that handed
        # over, or whose log we cannot get, after sequencer_timeout more.
        silent = bool(leader) and leader != core.pid and not core.heard(leader, now)
        if not silent and now - self._watch_since < core.config.sequencer_timeout:
            return
        cfg = self._configuration.config_end()
        if core.pid not in cfg:
            return
        gone = core.promised[1] if self._gone == core.promised else ""
        live = [p for p in cfg if p != gone and core.heard(p, now)]
        if live and min(live) == core.pid:
            self._run(now)

    def _maybe_found(self, now: float, members: Mapping[str, MemberEntry]) -> None:
        """A group joined by name whose log nobody started: the lowest member does,
        once it has heard no log for ``sequencer_timeout``."""
        core = self.core
        if not core.may_found or core.max_epoch:
            return
        if self._found_after is None:
            self._found_after = now + core.config.sequencer_timeout
            return
        if now < self._found_after:
            return
        live = [p for p in members if core.heard(p, now)]
        if live and min(live) == core.pid:
            self.found(now, members.get(core.pid) or MemberEntry(core.pid, 1, True))

    def _leader_tick(self, now: float, members: Mapping[str, MemberEntry]) -> None:
        core = self.core
        if core.stepped_down:
            return
        if any(now - t >= core.config.sequencer_timeout and core.heard(p, now)
               for p, t in self._stale.items()):
            self._stale = {}
            self._run(now)  # members promised a newer ballot nobody leads: lead a newer one
            return
        cfg = self._configuration.config_end()
        if now >= self._no_handover_until:
            lower = [p for p in cfg if p < core.pid and core.heard(p, now)
                     and core.acks.get(p, -1) >= core.commit_b and p in members]
            if lower:
                self.hand_over(min(lower), now)
                return
        self._configuration.reconfigure(now, self._replication.propose)

    # ================================================================ timers
    def next_deadline(self) -> float | None:
        core = self.core
        best: float | None = None
        for d in (core.retry_at, core.prepare_at, core.start_at, core.handover_at,
                  core.commit_at):
            if d is not None and (best is None or d < best):
                best = d
        if core.candidacy is not None and (best is None or self._cand_deadline < best):
            best = self._cand_deadline
        return best

    def on_timer(self, now: float) -> None:
        """Retries: stamps a majority has not acknowledged, PREPAREs, HANDOVERs."""
        core = self.core
        if core.start_at is not None and now >= core.start_at:
            core.start_at = None
            if core.leading:
                core.outbox.append(self._start_message())
                core.last_start = now
        self._replication.on_timer(now)
        if core.candidacy is not None:
            if now >= self._cand_deadline:
                core.candidacy = None  # no majority answered: wait, then try again
                core.prepare_at = None
                self._watch_since = now
            elif core.prepare_at is not None and now >= core.prepare_at:
                self._prepare_every = min(self._prepare_every * 2, core.config.status_interval)
                core.prepare_at = now + self._prepare_every
                core.outbox.append(Prepare(core.pid, core.cand_epoch, core.known))
                self.try_lead(now)
        if core.handover_at is not None and now >= core.handover_at:
            core.handover_at = None
            if core.leading and core.stepped_down:
                if now >= self._handover_until:  # the successor did not come: carry on
                    core.stepped_down = False
                    self._no_handover_until = now + 4 * core.config.sequencer_timeout
                else:
                    self._send_handover(now)
        self._replication.arm(now)
