"""How an elected host becomes the coordinator (docs/infra.md, "Failover").

1. The winner sends ``Takeover(epoch, commit)``. A host that has not promised a
   newer epoch promises this one (it will refuse records of older epochs) and
   answers with its log after the winner's commit point (:func:`state_reply`).
2. With the answers of a quorum (itself included) the winner adopts the log of the
   answer with the newest ``log_epoch``, the longest among those (the rule of
   Viewstamped Replication): every record committed under any earlier master is
   in it, because a committed record is held by a quorum and every quorum shares
   a host with this one.
3. The winner's working tables are its committed tables plus the adopted records;
   sequencing resumes after the highest of them. Every host is then brought onto
   the adopted log by a Sync.

The winner's own log may start late: with seeds/001 4.1 a gateway that had no
members and was no replica freed its tables, and may win the next election. The
copies it lacks below its log are committed (every log agrees on them) but maybe
not yet stable, and members may still NACK them; so hosts also send the committed
records they hold below the winner's ``low`` and the winner takes them back
(:meth:`~m2mc.infra.replog.ReplicaLog.backfill`) before it rebuilds its norm-buffer.

With host retirements (:mod:`m2mc.infra.reconfig`) the quorum is that of the log
being adopted: the answers must hold a majority of the configuration after every
record of the best answer, its uncommitted changes included, answers from hosts
that configuration retired left out. A winner that missed a change therefore waits
for the new configuration's majority instead of deciding with the old one.
"""

from __future__ import annotations

from collections.abc import Callable

from m2mc.infra import messages as msg
from m2mc.infra.ids import Epoch
from m2mc.infra.reconfig import retired_after
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState

HISTORY_REPLY_RECORDS = 16384  # freed records an answer takes from the history, at most
# (as many as 16 Syncs at the default batch_records); past that, a snapshot


def state_reply(host: str, epoch: Epoch, log: ReplicaLog, after: int,
                want_below: int = 0) -> msg.StateReply:
    """A host's answer: its records after ``after`` (with a snapshot if it freed some),
    and in ``older`` the committed records it holds that the winner will lack: those
    below ``want_below`` (the winner's ``low``), or all of them when it sends a snapshot."""
    snapshot = None
    base = after
    top = min(want_below - 1, log.applied)
    records: tuple[msg.Record, ...] | None = None
    if log.has_from(after + 1):
        records = log.range(base + 1, log.high) if log.high > base else ()
    elif after > 0 and log.low - 1 - after <= HISTORY_REPLY_RECORDS:
        # What our log freed, from our history (a durable host's store keeps every
        # record by position): a winner that holds a log keeps its history whole, as
        # a Sync does (Coordinator._sync; docs/infra.md, "Failover").
        records = log.range_with_history(after + 1, log.high)
    if records is None:
        snapshot = log.state.snapshot()
        base = log.applied
        top = log.applied  # a winner that adopts the snapshot holds nothing below it
        records = log.range(base + 1, log.high) if log.high > base else ()
    older = log.range(log.low, top) if log.low <= top else ()
    return msg.StateReply(epoch, host, log.log_epoch, log.applied, log.high, snapshot, records,
                          older)


class TakeoverRound:
    """The winner's collection of answers."""

    def __init__(self, host: str, epoch: Epoch, log: ReplicaLog, quorum: int, now: float,
                 timeout: float, *, quorum_of: Callable[[frozenset[str]], int] | None = None,
                 retired: frozenset[str] = frozenset()) -> None:
        self.host = host
        self.epoch = epoch
        self.log = log
        self.quorum = quorum  # without ``quorum_of``: a fixed count
        self.quorum_of = quorum_of  # the quorum of a configuration (its retired hosts)
        self.retired = retired  # the winner's committed configuration
        self.deadline = now + timeout
        self.base = log.applied
        self.replies: dict[str, msg.StateReply] = {host: state_reply(host, epoch, log, log.applied)}

    def request(self) -> msg.Takeover:
        return msg.Takeover(self.epoch, self.host, self.base, self.log.low)

    def add(self, reply: msg.StateReply) -> None:
        if reply.epoch == self.epoch:
            self.replies[reply.host] = reply

    def best(self) -> msg.StateReply:
        """The answer whose log is adopted: newest ``log_epoch``, then the longest."""
        return max(self.replies.values(), key=lambda r: (r.log_epoch, r.high, r.host == self.host))

    def configuration(self) -> frozenset[str]:
        """The retired hosts once the adopted log is applied, uncommitted changes too."""
        best = self.best()
        return retired_after(self.retired, best.snapshot, best.records)

    @property
    def ready(self) -> bool:
        if self.quorum_of is None:
            return len(self.replies) >= self.quorum
        retired = self.configuration()
        counted = sum(1 for h in self.replies if h not in retired)
        return counted >= self.quorum_of(retired)

    def adopt(self, now: float) -> tuple[CoordState, int]:
        """Make our log the adopted one; return the working tables and how many
        records (beyond our commit point) we resumed with."""
        best = self.best()
        log = self.log
        if best.host != self.host:
            if not log.replace_after(self.base, best.snapshot, best.records, now):
                raise RuntimeError("adopted log does not follow on from ours")
        else:
            # Our own log wins; records others hold beyond a stale prefix are not ours.
            pass
        log.log_epoch = self.epoch
        for reply in sorted(self.replies.values(), key=lambda r: r.older[0].lsn if r.older else 0):
            log.backfill(reply.older)  # copies we freed, which members may still need
        work = log.state.copy(now)
        for lsn in range(log.applied + 1, log.high + 1):
            r = log.get(lsn)
            assert r is not None
            work.apply(r, now)
        return work, log.high - log.applied

    def answered(self) -> dict[str, int]:
        """Each host that answered, with its applied point (where its Sync starts)."""
        return {h: r.commit for h, r in self.replies.items() if h != self.host}
