"""Who leads the hosts (docs/infra.md, "Election" and "Failover"), as one object of a
host: the election of seeds/004 5.1, the takeover that makes the winner the
coordinator, and the recovery of a host that starts without state
(:mod:`m2mc.infra.recovery`).

:class:`Succession` owns the :class:`~m2mc.infra.election.Election`, the running
:class:`~m2mc.infra.takeover.TakeoverRound` and the :class:`~m2mc.infra.recovery.Recovery`;
it sees its host only through :class:`~m2mc.infra.host_ports.HostSeat`, the narrow
port :class:`~m2mc.infra.host.HostCore` implements (what it sends, whom it follows, the
coordinator it installs). Sans-IO like the rest of the host.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from m2mc.infra import messages as msg
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.election import Election
from m2mc.infra.host_ports import HostSeat
from m2mc.infra.ids import NO_EPOCH, Epoch, MemberId
from m2mc.infra.recovery import BOOTSTRAP, Recovery
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import StateError
from m2mc.infra.takeover import TakeoverRound, state_reply
from m2mc.trace.schema import detail_json


def pristine(log: ReplicaLog) -> bool:
    """A log that holds nothing and never promised: a host that has no state."""
    return (log.promised == NO_EPOCH and log.log_epoch == NO_EPOCH and log.high == 0
            and log.state.lsn == 0)


class Succession:
    def __init__(self, seat: HostSeat, rng: random.Random) -> None:
        cfg = seat.cfg
        self.seat = seat
        self.rng = rng
        self.election = Election(seat.me, cfg.election_collect, cfg.election_vote,
                                 cfg.election_announce, rng)
        self.takeover: TakeoverRound | None = None
        self.recovery: Recovery | None = None
        self._next_check = 0.0

    # ------------------------------------------------------------ life
    def start(self, now: float) -> None:
        """A host with no state recovers first; the others vote after a grace period
        to discover each other (jittered, so hosts rarely start together)."""
        seat = self.seat
        if pristine(seat.log):
            self.recovery = Recovery(seat.me, self.rng, seat.cfg.status_interval)
        self._next_check = now + seat.cfg.host_timeout + self.rng.uniform(
            0.0, 2 * seat.cfg.status_interval)

    @property
    def recovering(self) -> bool:
        return self.recovery is not None

    def tick(self, now: float) -> None:
        seat = self.seat
        r = self.recovery
        if r is not None:
            self._decide(now)  # (a lone host needs no answer)
            if self.recovery is None:
                return
            ask = r.ask(now)
            if ask is not None:
                seat.broadcast(ask)
                if r.asked in (20, 200):  # about 2 s, then 20 s, at the default interval
                    seat.notice(f"{seat.me} has no state and is recovering the log: no "
                                "answer yet from "
                                f"{', '.join(r.waiting_for(seat.directory.known)) or 'any host'}")
            return
        if now >= self._next_check:  # seeds/004 4.5: is anybody the master?
            self._next_check = now + 2 * seat.cfg.status_interval
            if not seat.master_alive() and not self.election.running and self.takeover is None:
                seat.stats.elections_started += 1
                self._announce(self.election.begin(now), now)
        outcome = self.election.tick(now, seat.directory.quorum())
        if outcome.vote is not None:
            seat.broadcast(outcome.vote)
        if outcome.start is not None:
            self._announce(outcome.start, now)
        if outcome.won is not None:
            self._won(outcome.won, now)
        if self.takeover is not None and now >= self.takeover.deadline:
            self.takeover = None  # no quorum answered: vote again
            self.election.schedule_restart(now)

    def next_deadline(self) -> float | None:
        if self.recovery is not None:
            return None if self.recovery.verdict else self.recovery.next_ask
        ds = [self._next_check]
        e = self.election.next_deadline()
        if e is not None:
            ds.append(e)
        if self.takeover is not None:
            ds.append(self.takeover.deadline)
        return min(ds)

    def stop(self) -> None:
        """This host was retired: it leads nothing from now on."""
        self.takeover = None
        self.election.settle()

    # ------------------------------------------------------------ messages
    def on_message(self, m: msg.BackboneMessage, now: float,
                   admitted: Callable[[str], bool]) -> None:
        """An election, takeover or recovery message (``admitted(host)``: whether that
        host is known; it counts the unknown ones)."""
        seat = self.seat
        if isinstance(m, msg.Recover):
            seat.send_to(m.host, msg.RecoverReply(
                seat.me, m.nonce, max(seat.epoch, seat.log.promised), pristine(seat.log),
                tuple(sorted(seat.retired)), seat.config_lsn))
        elif isinstance(m, msg.RecoverReply):
            self._on_recover_reply(m, now)
        elif self.recovery is not None:
            return  # no vote, no promise, no answer before we hold the log
        elif isinstance(m, msg.ElectStart):
            if self.election.on_start(m.eid, now):
                seat.send_status(now)
        elif isinstance(m, msg.Vote):
            if admitted(m.voter):
                self.election.on_vote(m)
        elif isinstance(m, msg.Takeover):
            self._on_takeover(m, now)
        elif isinstance(m, msg.StateReply):
            t = self.takeover
            if t is not None and admitted(m.host) and m.host not in seat.retired:
                t.add(m)
                if t.ready:
                    self._activate(now)
        elif isinstance(m, msg.TakeoverReject) and self.takeover is not None \
                and m.epoch == self.takeover.epoch:
            self.takeover = None
            self.election.see_round(m.promised.round)
            self.election.schedule_restart(now)

    def allows_sync(self, epoch: Epoch) -> bool:
        """Whether a Sync of ``epoch`` may be taken (a recovering host: only from a master
        at or above its floor)."""
        return self.recovery is None or self.recovery.allows(epoch)

    def synced(self, now: float) -> None:
        """A Sync was taken: a recovering host holds the log now."""
        if self.recovery is not None:
            self.recovery = None
            log = self.seat.log
            self.seat.emit("elect", now, detail_json(phase="recovered",
                                                     epoch=str(log.log_epoch),
                                                     applied=log.applied, high=log.high))

    def _on_recover_reply(self, m: msg.RecoverReply, now: float) -> None:
        r = self.recovery
        if r is None or r.verdict:
            return
        r.on_reply(m, self.seat.directory.known)
        self._decide(now)

    def _decide(self, now: float) -> None:
        r = self.recovery
        if r is None or r.verdict:
            return
        seat = self.seat
        d = seat.directory
        verdict = r.decide(lambda ret: (d.universe(ret), d.quorum(ret)))
        if verdict == BOOTSTRAP:
            self.recovery = None
            seat.emit("elect", now, detail_json(phase="bootstrap", hosts=d.universe()))
            seat.notice(f"no host holds the deployment's log ({d.universe()} hosts answered "
                        "empty): a new deployment, or every host lost its state at once; "
                        "a new sequence starts (hosts keep theirs across restarts with "
                        "--data-dir)")
        elif verdict:
            seat.emit("elect", now, detail_json(phase="recovering", floor=str(r.floor)))

    # ------------------------------------------------------------ election, takeover
    def _announce(self, start: msg.ElectStart, now: float) -> None:
        self.seat.broadcast(start)
        self.seat.send_status(now)

    def _won(self, epoch: Epoch, now: float) -> None:
        seat = self.seat
        log = seat.log
        if epoch < log.promised or (epoch == log.promised and seat.master != seat.me):
            self.election.schedule_restart(now)
            return
        seat.stats.takeovers += 1
        log.promised = epoch
        d = seat.directory
        self.takeover = TakeoverRound(seat.me, epoch, log, d.quorum(), now,
                                      seat.cfg.takeover_timeout, quorum_of=d.quorum,
                                      retired=seat.retired)
        seat.lead(epoch, now)
        seat.broadcast(self.takeover.request())
        seat.emit("elect", now, detail_json(phase="won", epoch=str(epoch), master=seat.me))
        if self.takeover.ready:
            self._activate(now)

    def _on_takeover(self, m: msg.Takeover, now: float) -> None:
        seat = self.seat
        log = seat.log
        stale = m.epoch == log.promised and m.master != seat.master
        if m.epoch < log.promised or stale:
            seat.send_to(m.master, msg.TakeoverReject(m.epoch, seat.me, log.promised))
            return
        log.promised = m.epoch
        if m.epoch != seat.epoch or seat.master != m.master:
            seat.follow(m.master, m.epoch, now)
        seat.send_to(m.master, state_reply(seat.me, m.epoch, log, m.commit, m.low))

    def _activate(self, now: float) -> None:
        seat = self.seat
        t = self.takeover
        assert t is not None
        try:
            work, resumed = t.adopt(now)
        except (StateError, RuntimeError):
            seat.stats.bad_takeovers += 1  # a forged or corrupt answer: vote again
            self.takeover = None
            self.election.schedule_restart(now)
            return
        seat.check_configuration(now)  # the adopted log may carry a snapshot's
        c = Coordinator(seat.me, t.epoch, seat.cfg, seat.log, work, now)
        for h, applied in t.answered().items():
            c.peer(h).applied = applied
            c.peer(h).heard = True
        self.takeover = None
        if work.lsn == 0:  # nobody held a log: this is the first record of a sequence
            genesis = c.append_genesis(MemberId(seat.me, 0),
                                       self.rng.getrandbits(63) + 1, now)
            seat.emit("elect", now, detail_json(phase="genesis", sequence=c.work.sequence,
                                                lsn=genesis.lsn))
            seat.notice(f"{seat.me} starts sequence {c.work.sequence:016x}")
        seat.emit("elect", now, detail_json(phase="active", epoch=str(t.epoch), master=seat.me,
                                            resumed_lsn=seat.log.high, resumed_gseq=work.gseq,
                                            uncommitted=resumed))
        seat.install(c, now)
