"""The total-order sequencing log (m2mc.group.total.seqlog) on its own: a Hypothesis state
machine runs several replicas over a network that loses, duplicates, reorders and
partitions their messages, crashes and restarts them from their durable state, and
checks after every step that no two replicas ever decide different entries at one
position, and that no message is decided at two positions. At the end the network
heals and every message any sequencer accepted is decided everywhere, once.

Plus examples of the rules the safety argument rests on (docs/group.md section 5)."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from m2mc.group.codec import Body, LogEntry, MemberEntry, Order, Prepare, Promise, Start
from m2mc.group.config import GroupConfig
from m2mc.group.total.seqlog import SeqLog
from m2mc.ordering import MessageId

PIDS = ("a", "b", "c", "d", "e")


def _config() -> GroupConfig:
    return GroupConfig(sequencer_timeout=4.0, member_timeout=12.0, order_retry=0.1,
                       max_uncommitted=16)


class Cluster:
    """Replicas of one log on a broadcast medium, driven by hand."""

    def __init__(self, pids: tuple[str, ...] = PIDS) -> None:
        self.pids = pids
        self.now = 0.0
        self.heard: dict[str, dict[str, float]] = {p: {} for p in pids}
        self.logs: dict[str, SeqLog] = {}
        self.durable: dict[str, tuple[str | None, int]] = {p: (None, 1) for p in pids}
        self.conf_blob: dict[str, str | None] = {p: None for p in pids}
        self.delivered: dict[str, int] = {p: 0 for p in pids}  # contiguous decided prefix
        self.down: set[str] = set()
        self.sides: dict[str, int] = {}
        self.flight: list[tuple[str, str, Body]] = []  # (from, to, body)
        self.decided: dict[int, LogEntry] = {}  # every decision any replica made
        self.knows: dict[str, dict[int, LogEntry]] = {p: {} for p in pids}  # per replica
        self.where: dict[MessageId, int] = {}
        self.conflicts: list[str] = []
        self.wanted: list[MessageId] = []  # what the application sent
        self.members = {p: MemberEntry(p, 1, True) for p in pids}
        for p in pids:
            self._boot(p)

    def _boot(self, pid: str) -> None:
        log = SeqLog(pid, _config())
        log.last_heard = self.heard[pid]
        log.is_member = lambda p: p in self.members
        blob, start = self.durable[pid]
        log.restore(blob, start, self.conf_blob[pid])
        self.logs[pid] = log
        self._collect(pid)

    def found(self, pid: str) -> None:
        self.logs[pid].found(self.now, self.members[pid])
        self._collect(pid)

    def _collect(self, pid: str) -> None:
        log = self.logs[pid]
        for pos, entry in log.take_decided():
            self._record(pid, pos, entry)
        if log.is_leader:  # the application's messages wait until a sequencer takes them
            for mid in self.wanted:
                if (mid not in self.where and log.position_of(mid) is None
                        and log.propose(mid) is None):
                    break
            for pos, entry in log.take_decided():
                self._record(pid, pos, entry)
        self.delivered[pid] = log.emitted
        bodies = log.flush(self.now)
        blob = log.dumps() if log.core.dirty else self.durable[pid][0]
        if log.core.conf_dirty:
            self.conf_blob[pid] = log.dumps_conf()
        self.durable[pid] = (blob, log.emitted + 1)  # written before anything is sent
        for body in bodies:
            for dest in self.pids:
                if dest != pid:
                    self.flight.append((pid, dest, body))

    def _record(self, pid: str, pos: int, entry: LogEntry) -> None:
        self.knows[pid][pos] = entry
        earlier = self.decided.setdefault(pos, entry)
        if earlier != entry:
            self.conflicts.append(f"{pid}: {pos} = {entry}, elsewhere {earlier}")
        if isinstance(entry, MessageId):
            at = self.where.setdefault(entry, pos)
            if at != pos:
                self.conflicts.append(f"{entry} decided at {at} and {pos}")

    def deliver(self, index: int, keep: bool = False) -> None:
        src, dest, body = self.flight[index]
        if not keep:
            del self.flight[index]
        if dest in self.down or src in self.down:
            return
        if self.sides and self.sides.get(src, -1) != self.sides.get(dest, -1):
            return
        self.heard[dest][src] = self.now
        log = self.logs[dest]
        match body:
            case Order():
                log.on_order(body, self.now)
            case Prepare():
                log.on_prepare(body, self.now)
            case Promise():
                log.on_promise(body, self.now)
            case Start():
                log.on_start(body, self.now)
            case _:
                name = type(body).__name__
                if name == "Ack":
                    log.on_ack(body, self.now)  # type: ignore[arg-type]
                elif name == "Handover":
                    log.on_handover(body, self.now)  # type: ignore[arg-type]
                elif name == "Decided":
                    log.on_decided(body.entries)  # type: ignore[attr-defined]
        self._collect(dest)

    def step(self, dt: float) -> None:
        self.now += dt
        for pid in self.pids:
            if pid in self.down:
                continue
            log = self.logs[pid]
            log.on_timer(self.now)
            log.tick(self.now, self.members)
            self._repair(pid)
            self._collect(pid)
            # Statuses stand for the heartbeats the group layer sends.
            for dest in self.pids:
                if dest != pid and dest not in self.down and (
                        not self.sides or self.sides.get(pid) == self.sides.get(dest)):
                    self.heard[dest][pid] = self.now
                    other = self.logs[dest]
                    other.on_status(pid, log.state(), log.known, self.now)
        for pid in self.pids:
            if pid not in self.down:
                self._collect(pid)

    def _reachable(self, a: str, b: str) -> bool:
        return b not in self.down and (not self.sides or self.sides.get(a) == self.sides.get(b))

    def _repair(self, pid: str) -> None:
        """What the group layer's NACK of positions does: a reachable replica that
        knows the committed entries answers with them (DECIDED)."""
        log = self.logs[pid]
        for lo, hi in log.missing_positions(16):
            for other in self.pids:
                if other != pid and self._reachable(pid, other):
                    known = self.knows[other]
                    entries = [(p, known[p]) for p in range(lo, hi + 1) if p in known]
                    if entries:
                        log.on_decided(entries)
                        break

    def crash(self, pid: str) -> None:
        self.down.add(pid)
        self.flight = [f for f in self.flight if f[1] != pid]

    def restart(self, pid: str) -> None:
        self.down.discard(pid)
        self.heard[pid] = {}
        self._boot(pid)

    def run_quietly(self, seconds: float) -> None:
        """No faults: deliver everything in order, with time passing."""
        end = self.now + seconds
        while self.now < end:
            while self.flight:
                self.deliver(0)
            self.step(0.05)


class SeqLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.c = Cluster()
        self.c.found("a")
        self.c.run_quietly(1.0)
        self.count = 0

    @rule(sender=st.sampled_from(PIDS))
    def send(self, sender: str) -> None:
        self.count += 1
        self.c.wanted.append(MessageId(sender, self.count))
        for pid, log in self.c.logs.items():
            if pid not in self.c.down and log.is_leader:
                self.c._collect(pid)

    @precondition(lambda self: bool(self.c.flight))
    @rule(index=st.integers(0, 10_000), keep=st.booleans())
    def deliver(self, index: int, keep: bool) -> None:
        self.c.deliver(index % len(self.c.flight), keep=keep and index % 7 == 0)

    @precondition(lambda self: bool(self.c.flight))
    @rule(index=st.integers(0, 10_000))
    def lose(self, index: int) -> None:
        del self.c.flight[index % len(self.c.flight)]

    @precondition(lambda self: bool(self.c.flight))
    @rule()
    def deliver_all(self) -> None:
        for _ in range(len(self.c.flight)):
            if self.c.flight:
                self.c.deliver(0)

    @rule(dt=st.sampled_from([0.05, 0.3, 1.0, 2.5]))
    def time_passes(self, dt: float) -> None:
        self.c.step(dt)

    @rule(cut=st.integers(1, len(PIDS) - 1), shift=st.integers(0, len(PIDS) - 1))
    def partition(self, cut: int, shift: int) -> None:
        order = PIDS[shift:] + PIDS[:shift]
        self.c.sides = {p: (0 if i < cut else 1) for i, p in enumerate(order)}

    @rule()
    def heal(self) -> None:
        self.c.sides = {}

    @precondition(lambda self: len(self.c.down) < 2)
    @rule(pid=st.sampled_from(PIDS))
    def crash(self, pid: str) -> None:
        self.c.crash(pid)

    @precondition(lambda self: bool(self.c.down))
    @rule(pid=st.sampled_from(PIDS))
    def restart(self, pid: str) -> None:
        if pid in self.c.down:
            self.c.restart(pid)

    @invariant()
    def one_entry_per_position(self) -> None:
        assert self.c.conflicts == []

    def teardown(self) -> None:
        c = self.c
        c.sides = {}
        for pid in list(c.down):
            c.restart(pid)
        c.run_quietly(40.0)
        assert c.conflicts == []
        decided = set(c.where)
        assert set(c.wanted) <= decided, sorted(set(c.wanted) - decided)[:5]
        top = max(c.decided, default=0)
        for pid, log in c.logs.items():
            # every replica knows every decided position (the group layer fetches what a
            # lost ORDER carried by NACK; here nothing is lost any more)
            assert log.known >= top or log.emitted >= top, (pid, log.emitted, top)


TestSeqLog = settings(max_examples=60, stateful_step_count=50, deadline=None)(
    SeqLogMachine).TestCase


# ------------------------------------------------------------------ examples
def test_a_minority_commits_nothing_and_its_stamps_are_replaced() -> None:
    c = Cluster(("a", "b", "c"))
    c.found("a")
    c.run_quietly(1.0)
    assert c.logs["a"].config_end() == {"a", "b", "c"}
    c.sides = {"a": 0, "b": 1, "c": 1}
    c.wanted.append(MessageId("a", 1))
    c.run_quietly(0.5)
    assert c.logs["a"].position_of(MessageId("a", 1)) is not None  # stamped...
    assert MessageId("a", 1) not in c.where  # ...but a minority cannot commit it
    c.run_quietly(6.0)  # the majority takes over and stamps a:1 itself
    assert c.logs["b"].is_leader
    c.wanted.append(MessageId("b", 1))
    c.run_quietly(1.0)
    assert {MessageId("a", 1), MessageId("b", 1)} <= set(c.where)
    c.sides = {}
    c.run_quietly(6.0)
    assert c.conflicts == []
    assert all(log.emitted == c.logs["b"].emitted for log in c.logs.values())


def _promise(sender: str, log_epoch: int, log_leader: str, commit: int,
             entries: list[tuple[int, Any]]) -> Promise:
    high = max([p for p, _ in entries], default=commit)
    return Promise(sender, 9, "a", log_epoch, log_leader, commit, high, entries)


def _candidate(pid: str = "a", epoch: int = 9) -> SeqLog:
    """A candidate for ballot (epoch, pid) that knows the configuration {a, b, c}."""
    log = SeqLog(pid, _config())
    log.is_member = lambda p: True
    log.on_decided([(1, MemberEntry("a", 1, True)), (2, MemberEntry("b", 1, True)),
                    (3, MemberEntry("c", 1, True))])
    log.take_decided()
    log.core.cand_epoch = log.core.max_epoch = epoch
    log.core.promise((epoch, pid))
    log.core.candidacy = {}
    return log


def test_take_over_adopts_the_newest_ballot_then_the_longest_log() -> None:
    # Viewstamped Replication's rule: b's log is longer but was synced to an older
    # ballot; c's is shorter but newer, so c's log is the one that may hold commits.
    log = _candidate()
    assert log.core.candidacy is not None
    log.core.candidacy["b"] = _promise("b", 3, "b", 3, [(4, MessageId("x", 1)),
                                                    (5, MessageId("x", 2))])
    log.core.candidacy["c"] = _promise("c", 5, "c", 3, [(4, MessageId("y", 1))])
    log.election.try_lead(0.0)
    assert log.is_leader and log.core.log == {4: MessageId("y", 1)} and log.high == 4
    # Among answers of the same ballot, the longest.
    log = _candidate()
    assert log.core.candidacy is not None
    log.core.candidacy["b"] = _promise("b", 5, "c", 3, [(4, MessageId("y", 1)),
                                                    (5, MessageId("y", 2))])
    log.core.candidacy["c"] = _promise("c", 5, "c", 3, [(4, MessageId("y", 1))])
    log.election.try_lead(0.0)
    assert log.is_leader and log.high == 5


def test_candidate_needs_a_majority_of_every_configuration_in_the_adopted_log() -> None:
    log = _candidate(epoch=4)
    # b's log adds d and e (uncommitted): {a, b} is a majority of {a, b, c} but not of
    # {a, b, c, d, e}, so a must wait for another answer.
    grown = _promise("b", 2, "b", 3, [(4, MemberEntry("d", 1, True)),
                                      (5, MemberEntry("e", 1, True))])
    log.on_promise(Promise(grown.sender, 4, "a", 2, "b", 3, 5, grown.entries), 0.0)
    assert not log.is_leader
    log.on_promise(Promise("d", 4, "a", 0, "", 0, 0, []), 0.0)
    assert log.is_leader and log.config_end() == {"a", "b", "c", "d", "e"}


def test_a_candidate_first_learns_every_committed_entry() -> None:
    log = _candidate(epoch=4)
    log.on_promise(Promise("b", 4, "a", 2, "b", 7, 7, []), 0.0)  # b knows 7 committed
    assert not log.is_leader and log.missing_positions(10) == [(4, 7)]
    log.on_decided([(p, MessageId("z", p)) for p in range(4, 8)])
    log.on_promise(Promise("b", 4, "a", 2, "b", 7, 7, []), 0.0)
    assert log.is_leader and log.core.base == 7


def test_an_order_of_an_older_ballot_is_refused_after_a_promise() -> None:
    log = SeqLog("b", _config())
    log.is_member = lambda p: True
    log.on_start(Start("a", 1, 0, [(1, MemberEntry("a", 1, True))]), 0.0)
    log.on_prepare(Prepare("c", 2, 0), 0.0)
    log.on_order(Order("a", 1, [(2, MessageId("a", 1))], 1), 0.0)
    assert 2 not in log.core.log and log.stats.stale == 1
    assert [p for p, _ in log.take_decided()] == [1]  # what a said was committed is
