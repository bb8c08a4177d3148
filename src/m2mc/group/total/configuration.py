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

The sequencer's policy (``reconfigure``, at its role tick and when a record
commits): members of the gossip membership heard lately that are OUT enter,
all in one go; otherwise one IN member that left the membership or has been
silent for ``member_timeout`` is taken OUT, one record at a time. No record is
proposed while another waits for its commit, and the sequencer never removes
itself nor the last member.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping

from m2mc.group.messages import Entries, LogEntry, MemberEntry
from m2mc.group.total.core import LogCore


def apply_record(members: set[str], entry: MemberEntry) -> None:
    if entry.joined:
        members.add(entry.pid)
    else:
        members.discard(entry.pid)


def majority(members: set[str]) -> int:
    return len(members) // 2 + 1


class Configuration:
    """The configuration of majorities over the log (module docstring)."""

    __slots__ = ("_memo", "core")

    def __init__(self, core: LogCore) -> None:
        self.core = core
        # The last configuration worked out from the decided records and the log: what
        # it was worked out from (the decided records' sorted positions, a list made
        # anew whenever they change; how many of them came before; the log's records
        # before), and the members. Asked at every ACK (the commit point's
        # configuration), it changes only with a membership record.
        self._memo: tuple[list[int], int, list[tuple[int, LogEntry]], frozenset[str]] | None \
            = None

    def config_end(self) -> set[str]:
        core = self.core
        return self.config_before(max(core.high, core.known, core.emitted) + 1, core.log)

    def records_before(self, pos: int) -> int:
        """How many decided membership records come before ``pos`` (every one does by
        the time ``pos`` is delivered): a message's number is its position less these."""
        core = self.core
        if core.conf_sorted is None:
            core.conf_sorted = sorted(core.conf)
        return bisect_left(core.conf_sorted, pos)

    def decided_entries(self, lo: int, hi: int) -> Entries:
        """Membership records we know decided in ``lo..hi`` (a NACK's answer)."""
        return [(p, e) for p, e in self.core.conf.items() if lo <= p <= hi]

    def config_before(self, pos: int, log: Mapping[int, LogEntry]) -> set[str]:
        """The configuration in force at ``pos``: the decided records before it, then
        those of ``log`` before it not decided yet."""
        core = self.core
        conf_sorted = core.conf_sorted
        if conf_sorted is None:
            conf_sorted = core.conf_sorted = sorted(core.conf)
        conf = core.conf
        decided = bisect_left(conf_sorted, pos)  # the decided records before pos
        if log is core.log:  # (its records are known: no walk through the whole log)
            extra = [(p, log[p]) for p in core.records_in_log() if p < pos and p not in conf]
            memo = self._memo
            if (memo is not None and memo[0] is conf_sorted and memo[1] == decided
                    and memo[2] == extra):
                return set(memo[3])
        else:
            extra = sorted((p, e) for p, e in log.items()
                           if p < pos and type(e) is MemberEntry and p not in conf)
        members: set[str] = set()
        for p in conf_sorted[:decided]:
            apply_record(members, conf[p])
        for _, e in extra:
            assert type(e) is MemberEntry
            apply_record(members, e)
        if log is core.log:
            self._memo = (conf_sorted, decided, extra, frozenset(members))
        return members

    def reconfigure(self, now: float, propose: Callable[[LogEntry], int | None]) -> None:
        """Sequencer: bring the configuration to the members heard lately. Members
        that joined enter together; one that left or went silent leaves, one at a
        time, and only once no other membership record waits for its commit. The
        records are proposed like messages (``propose``: the replication's)."""
        core = self.core
        core.reconfig_due = False
        if not core.is_leader:
            return
        members = core.members
        if any(type(core.log.get(p)) is MemberEntry for p in range(core.commit_b + 1,
                                                                     core.high + 1)):
            return
        cfg = self.config_end()
        joining = [pid for pid in sorted(members) if pid not in cfg and core.heard(pid, now)]
        for pid in joining:
            core.stats.config_records += 1
            propose(members[pid])
        if joining:
            return
        since = max(core.lead_since, 0.0)
        for pid in sorted(cfg):
            if pid == core.pid or len(cfg) <= 1:
                continue
            entry = members.get(pid)
            silent = now - max(core.last_heard.get(pid, since), since) >= \
                core.config.member_timeout
            if entry is None or silent:
                version = entry.version if entry is not None else 0
                core.stats.config_records += 1
                propose(MemberEntry(pid, version, False))
                return
