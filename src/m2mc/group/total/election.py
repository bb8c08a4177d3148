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

from collections.abc import Mapping

from m2mc.group.messages import (
    Entries,
    Handover,
    LogState,
    MemberEntry,
    Prepare,
    Promise,
    SequencerInfo,
    Start,
)
from m2mc.group.total.configuration import apply_record, majority
from m2mc.group.total.core import NO_BALLOT, PROMISE_LIMIT, Ballot
from m2mc.group.total.replication import Replication
from m2mc.ordering import MessageId


class Election(Replication):
    """PREPARE, PROMISE, START, HANDOVER and the role policy (module docstring)."""

    # ================================================================ sequencer
    def found(self, now: float, me: MemberEntry) -> None:
        """Start the group's log: the founder leads the first ballot alone, and its
        first record makes it the configuration; the records of the other members
        heard lately follow at once, before any message is stamped. (Stamped in a
        configuration of one, a backlog was committed by the founder alone: held by
        no one else, and the others could never elect a successor without it, so
        when the founder closed they stalled for good.)"""
        epoch = self.max_epoch + 1
        self.cand_epoch = epoch
        self.max_epoch = epoch
        ballot = (epoch, self.pid)
        self._promise(ballot)
        self._lead(ballot, 0, [], now)
        self.propose(me)
        self._reconfigure(now)

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

    def _start_message(self) -> Start:
        entries = [(p, self.log[p]) for p in range(self.commit_b + 1, self.high + 1)]
        return Start(self.pid, self.ballot[0], self.commit_b, entries[:PROMISE_LIMIT])

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
        if not cfg or len(voters & cfg) < majority(cfg):
            return
        for _, e in adopted:
            if type(e) is MemberEntry:
                apply_record(cfg, e)
                if not cfg or len(voters & cfg) < majority(cfg):
                    return
        self._lead((epoch, self.pid), c_star, adopted, now)

    # ================================================================ inputs
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

    # ================================================================ hand-over
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

    def _send_handover(self, now: float) -> None:
        self._outbox.append(Handover(self.pid, SequencerInfo(self.ballot[0], self._handover_to,
                                                             self.high + 1)))
        self._handover_at = now + self.config.order_retry * 4

    # ================================================================ role policy
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
        self._replication_timer(now)
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
