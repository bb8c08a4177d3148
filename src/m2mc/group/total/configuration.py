"""Total order: the configuration of majorities, and the membership records that
change it (docs/group.md section 5, "Configuration").

Membership records (``MemberEntry``) are log entries like messages: a process
enters or leaves the configuration at the position after its record. The
configuration *at* ``p`` is the result of every record before ``p`` (the decided
ones, ``conf``, and those of our log not decided yet); position ``p`` is
committed when a majority of it holds ``p`` (:mod:`~m2mc.group.total.replication`).

A process and the configuration:

=======  =====================================================  =======
from     event                                                  to
=======  =====================================================  =======
OUT      a record ``joined=True`` of it at ``p``                IN from ``p + 1``
IN       a record ``joined=False`` of it at ``p``               OUT from ``p + 1``
=======  =====================================================  =======

The sequencer's policy (``_reconfigure``, at its role tick and when a record
commits): members of the gossip membership heard lately that are OUT enter,
all in one go; otherwise one IN member that left the membership or has been
silent for ``member_timeout`` is taken OUT, one record at a time. No record is
proposed while another waits for its commit, and the sequencer never removes
itself nor the last member.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping

from m2mc.group.messages import Entries, LogEntry, MemberEntry
from m2mc.group.total.core import LogCore


def apply_record(members: set[str], entry: MemberEntry) -> None:
    if entry.joined:
        members.add(entry.pid)
    else:
        members.discard(entry.pid)


def majority(members: set[str]) -> int:
    return len(members) // 2 + 1


class Configuration(LogCore):
    """The configuration of majorities over the log (module docstring)."""

    def config_end(self) -> set[str]:
        return self._config_before(max(self.high, self.known, self.emitted) + 1, self.log)

    def records_before(self, pos: int) -> int:
        """How many decided membership records come before ``pos`` (every one does by
        the time ``pos`` is delivered): a message's number is its position less these."""
        if self._conf_sorted is None:
            self._conf_sorted = sorted(self.conf)
        return bisect_left(self._conf_sorted, pos)

    def decided_entries(self, lo: int, hi: int) -> Entries:
        """Membership records we know decided in ``lo..hi`` (a NACK's answer)."""
        return [(p, e) for p, e in self.conf.items() if lo <= p <= hi]

    def _config_before(self, pos: int, log: Mapping[int, LogEntry]) -> set[str]:
        if self._conf_sorted is None:
            self._conf_sorted = sorted(self.conf)
        members: set[str] = set()
        for p in self._conf_sorted:
            if p >= pos:
                break
            apply_record(members, self.conf[p])
        extra = sorted(p for p, e in log.items()
                       if p < pos and type(e) is MemberEntry and p not in self.conf)
        for p in extra:
            e = log[p]
            assert type(e) is MemberEntry
            apply_record(members, e)
        return members

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

    def propose(self, entry: LogEntry) -> int | None:
        """Implemented by :class:`~m2mc.group.total.replication.Replication` (a seam:
        the sequencer's membership records are proposed like messages)."""
        raise NotImplementedError
