"""Total order in ad hoc mode: the group's sequencing log, committed by majorities
(docs/group.md section 5).

:class:`SeqLog` is one member's replica, put together from its concerns (each
module states its rules): the state, ballots and the sequencer's role
(:mod:`~m2mc.group.total.core`), the configuration of majorities
(:mod:`~m2mc.group.total.configuration`), replication and commit
(:mod:`~m2mc.group.total.replication`), election
(:mod:`~m2mc.group.total.election`) and persistence
(:mod:`~m2mc.group.total.persistence`).

Pure: no clocks (``now`` is passed in), no I/O; outgoing messages are collected
in :meth:`SeqLog.flush` and decided entries in :meth:`SeqLog.take_decided`.
"""

from __future__ import annotations

from m2mc.group.total.core import NO_BALLOT, Ballot, Role, SeqLogStats
from m2mc.group.total.election import Election
from m2mc.group.total.persistence import Persistence

__all__ = ["NO_BALLOT", "Ballot", "Role", "SeqLog", "SeqLogStats"]


class SeqLog(Election, Persistence):
    """One member's replica of a total-order group's sequencing log."""

