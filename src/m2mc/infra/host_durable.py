"""A durable host's saves (docs/infra.md, "Durable hosts"): what changed in its log
since the last output step, as one :class:`~m2mc.infra.host_persist.HostCommit`.

The driver takes the save after the core's output and commits it before that
output leaves (m2mc.core.carry_out), so a host never sends an ``Accepted``, a
takeover answer, a ``Takeover`` of its own, a commit point or a relayed multicast
that its store does not back.

Only what an answer depends on makes a save: records added or replaced, the promise,
the log's epoch. The commit point and checkpoints ride along with the next such save
(a commit costs no write of its own): a host restarted with an older commit point
holds those records as uncommitted, and the next master's Sync commits them again.

The log in memory frees records once they are stable; the store keeps a checkpoint
of the committed tables and every record after it, so a restart can rebuild the
tables at the commit point. A new checkpoint is written once ``checkpoint_every``
freed records lie between the old one and the log's ``low``; the records below it
are then no longer live (``drop_below``): what a restart loads is bounded by the
records the log holds plus ``checkpoint_every``. The store keeps them as the host's
history until its retention drops them (:mod:`m2mc.infra.history`).
"""

from __future__ import annotations

from m2mc.core import Save
from m2mc.infra import messages as msg
from m2mc.infra.host_persist import HostCommit, LogJournal, StoredHost
from m2mc.infra.replog import ReplicaLog


class HostSaver:
    """Turns a :class:`ReplicaLog`'s changes into commits; attaches its journal."""

    def __init__(self, log: ReplicaLog, checkpoint_every: int = 4096) -> None:
        self.log = log
        self.journal = LogJournal()
        log.journal = self.journal
        self.checkpoint_every = checkpoint_every
        self.checkpoint_lsn = 0  # the stored checkpoint's position (0: none)
        self._saved = (log.promised, log.log_epoch, log.applied)
        self._dropped = 0
        self._pending_checkpoint: msg.Snapshot | None = None  # taken, not yet saved

    def restore(self, stored: StoredHost, now: float) -> None:
        """Take up what the store holds (before the core starts)."""
        self.log.restore(stored, now)
        self.journal.clear()
        self.checkpoint_lsn = stored.checkpoint.lsn if stored.checkpoint is not None else 0
        self._saved = (stored.promised, stored.log_epoch, stored.applied)
        self._dropped = min(self.log.low, self.checkpoint_lsn + 1)

    def take(self, now: float = 0.0) -> Save[HostCommit] | None:
        """What must be durable before the next output leaves (None: nothing)."""
        log, j = self.log, self.journal
        checkpoint = j.checkpoint if j.reset else None
        if j.reset:
            self.checkpoint_lsn = 0 if checkpoint is None else checkpoint.lsn
            self._dropped = 0  # the store starts over: nothing below the new log is held
            self._pending_checkpoint = None  # (of the log that was replaced)
            log.history_gap = False  # once this commit is made, the store's history is right
        if log.low - 1 - self.checkpoint_lsn >= self.checkpoint_every \
                and log.applied >= log.low - 1:
            checkpoint = log.state.snapshot()  # the committed tables, at `applied`
            self.checkpoint_lsn = checkpoint.lsn
        drop_below = min(log.low, self.checkpoint_lsn + 1)
        scalars = (log.promised, log.log_epoch, log.applied)
        if not j.changed and scalars[:2] == self._saved[:2] and not j.reset:
            # Only the commit point, a checkpoint or what may be dropped changed: nothing
            # an answer depends on. They ride along with the next save (a restart with an
            # older commit point holds those records as uncommitted, and the next master's
            # Sync commits them again), so a commit costs no write of its own.
            if checkpoint is not None:
                self._pending_checkpoint = checkpoint
            return None
        if checkpoint is None and not j.reset:
            checkpoint = self._pending_checkpoint
        self._pending_checkpoint = None
        commit = HostCommit(log.promised, log.log_epoch, log.applied, j.reset, checkpoint,
                            j.truncate_after, tuple(j.added[k] for k in sorted(j.added)),
                            drop_below if drop_below > self._dropped else 0, now)
        j.clear()
        self._saved = scalars
        self._dropped = max(self._dropped, drop_below)
        return Save(commit)
