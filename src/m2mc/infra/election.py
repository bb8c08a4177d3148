"""The voting algorithm of seeds/004 5.1, as a state machine.

States ``normal``, ``voting``, ``voted``. A starter sends ``ElectStart(eid)``; every
host receiving a newer ``eid`` enters ``voting``, remembers its local start time
and sends its status tagged with ``eid`` (step 2). Statuses tagged with ``eid``
received within ``collect`` seconds of the local start are the participants (step
3). Each host then votes for the participant serving the fewest messengers, then
the lowest port, then the lowest address (step 4; the host ID as a last resort)
and multicasts its vote (step 5). After ``vote`` seconds (step 7) a host holding
the votes of a majority of the participants wins (step 8) and announces itself.

Every host sees every vote, so each one knows whether somebody won: when nobody
did, or the winner does not announce itself within ``announce`` seconds, a new
election starts after a random pause (so that usually one host starts it).
A start with an older ``eid`` than the current one is ignored; all messages of an
election other than the current one are ignored ("interrupted elections").

We also require the participants to be a quorum of all known hosts, so that two
elections can never both produce a master that believes it has the majority.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from m2mc.infra import messages as msg
from m2mc.infra.ids import NO_EPOCH, Epoch

Candidate = tuple[int, int, str, str]  # (load, port, address, host)


class ElectionState(Enum):
    NORMAL = "normal"
    VOTING = "voting"
    VOTED = "voted"


@dataclass(slots=True)
class Outcome:
    """What :meth:`Election.tick` decided."""

    start: msg.ElectStart | None = None
    vote: msg.Vote | None = None
    won: Epoch | None = None
    lost: bool = False  # nobody won: a restart is scheduled


@dataclass(slots=True)
class Election:
    me: str
    collect: float
    vote_window: float
    announce: float
    rng: random.Random
    state: ElectionState = ElectionState.NORMAL
    eid: Epoch = NO_EPOCH
    max_round: int = 0
    started_at: float = 0.0
    vote_at: float = 0.0
    participants: dict[str, Candidate] = field(default_factory=dict)
    votes: dict[str, str] = field(default_factory=dict)  # voter -> candidate
    restart_at: float | None = None
    announce_by: float | None = None
    rounds: int = 0

    def begin(self, now: float) -> msg.ElectStart:
        """Start a new election (step 1); the caller sends its status with ``eid``."""
        self.max_round += 1
        eid = Epoch(self.max_round, now, self.me)
        self._enter(eid, now)
        return msg.ElectStart(eid)

    def on_start(self, eid: Epoch, now: float) -> bool:
        """A start from another host; True when we join it (and must send our status)."""
        self.see_round(eid.round)
        if eid <= self.eid:
            return False
        self._enter(eid, now)
        return True

    def _enter(self, eid: Epoch, now: float) -> None:
        self.eid = eid
        self.state = ElectionState.VOTING
        self.started_at = now
        self.participants = {}
        self.votes = {}
        self.restart_at = None
        self.announce_by = None
        self.rounds += 1

    def see_round(self, rnd: int) -> None:
        self.max_round = max(self.max_round, rnd)

    def on_status(self, st: msg.Status, now: float) -> None:
        if st.eid is None or st.eid != self.eid or self.state != ElectionState.VOTING:
            return
        if now - self.started_at <= self.collect:  # step 3: late statuses do not count
            self.participants[st.host] = (st.load, st.port, st.address, st.host)

    def on_vote(self, v: msg.Vote) -> None:
        if v.eid == self.eid and self.state != ElectionState.NORMAL:
            self.votes[v.voter] = v.candidate

    def settle(self) -> None:
        """A master was announced: the election is over."""
        self.state = ElectionState.NORMAL
        self.restart_at = None
        self.announce_by = None

    def schedule_restart(self, now: float) -> None:
        if self.restart_at is None:
            self.restart_at = now + self.rng.uniform(0.0, self.collect)

    def tick(self, now: float, quorum: int) -> Outcome:
        out = Outcome()
        if self.state == ElectionState.VOTING and now >= self.started_at + self.collect:
            if self.participants:  # step 4: the least loaded participant
                best = min(self.participants.values())
                out.vote = msg.Vote(self.eid, self.me, best[3])
                self.votes[self.me] = best[3]
            self.state = ElectionState.VOTED
            self.vote_at = now
        elif self.state == ElectionState.VOTED and now >= self.vote_at + self.vote_window \
                and self.announce_by is None and self.restart_at is None:
            counted = Counter(c for v, c in self.votes.items() if v in self.participants)
            n = len(self.participants)
            winner = next((c for c, k in counted.items() if 2 * k > n), None)
            if winner is not None and n >= quorum:
                if winner == self.me:
                    out.won = self.eid  # step 8: announce ourselves
                    self.settle()
                else:
                    self.announce_by = now + self.announce
            else:
                out.lost = True
                self.schedule_restart(now)
        elif self.announce_by is not None and now >= self.announce_by:
            self.announce_by = None
            out.lost = True
            self.schedule_restart(now)
        if self.restart_at is not None and now >= self.restart_at:
            self.restart_at = None
            out.start = self.begin(now)
        return out

    def next_deadline(self) -> float | None:
        ds: list[float] = []
        if self.state == ElectionState.VOTING:
            ds.append(self.started_at + self.collect)
        elif self.state == ElectionState.VOTED and self.announce_by is None \
                and self.restart_at is None:
            ds.append(self.vote_at + self.vote_window)
        if self.announce_by is not None:
            ds.append(self.announce_by)
        if self.restart_at is not None:
            ds.append(self.restart_at)
        return min(ds) if ds else None

    @property
    def running(self) -> bool:
        return self.state != ElectionState.NORMAL or self.restart_at is not None
