"""Total order in ad hoc mode: the group's sequencing log, committed by majorities
(docs/group.md section 5).

:class:`SeqLog` is one member's replica, the façade of its concerns (each module
states its rules), each an object: the state, ballots and the sequencer's role
(:class:`~m2mc.group.total.core.LogCore`, which every other one holds), the
configuration of majorities
(:class:`~m2mc.group.total.configuration.Configuration`), replication and commit
(:class:`~m2mc.group.total.replication.Replication`, which asks the configuration
through a port), election (:class:`~m2mc.group.total.election.Election`, which asks
the configuration and replication through ports) and persistence
(:class:`~m2mc.group.total.persistence.Persistence`).

Pure: no clocks (``now`` is passed in), no I/O; outgoing messages are collected
in :meth:`SeqLog.flush` and decided entries in :meth:`SeqLog.take_decided`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from m2mc.group.config import GroupConfig
from m2mc.group.messages import MemberEntry
from m2mc.group.total.configuration import Configuration
from m2mc.group.total.core import NO_BALLOT, Ballot, LogCore, Role, SeqLogStats
from m2mc.group.total.election import Election
from m2mc.group.total.persistence import Persistence
from m2mc.group.total.replication import Replication

__all__ = ["NO_BALLOT", "Ballot", "Role", "SeqLog", "SeqLogStats"]


class SeqLog:
    """One member's replica of a total-order group's sequencing log.

    Its calls are its concerns' methods, bound once here (no extra call per
    message); its state is :attr:`core`'s, read through the properties below (and
    the strategy's three inputs, ``last_heard``, ``is_member`` and ``may_found``,
    set through them)."""

    __slots__ = (
        "config_end", "configuration", "core", "decided_entries", "dumps", "dumps_conf",
        "election", "flush", "forget", "found", "hand_over", "handed_out", "learn", "load_log",
        "missing_positions", "next_deadline", "on_ack", "on_decided", "on_handover",
        "on_nack_positions", "on_order", "on_prepare", "on_promise", "on_start",
        "on_status", "on_timer", "pass_over", "persistence", "position_of", "proposals",
        "propose",
        "records_before", "replication", "restore", "room", "save_log", "state",
        "take_decided", "tick",
    )

    def __init__(self, pid: str, config: GroupConfig) -> None:
        self.core = core = LogCore(pid, config)
        self.configuration = configuration = Configuration(core)
        self.replication = replication = Replication(core, configuration)
        self.election = election = Election(core, configuration, replication)
        self.persistence = persistence = Persistence(core)
        # state and decided entries
        self.position_of = core.position_of
        self.state = core.state
        self.room = core.room
        self.take_decided = core.take_decided
        self.forget = core.forget
        self.handed_out = core.handed_out
        # the configuration
        self.config_end = configuration.config_end
        self.records_before = configuration.records_before
        self.decided_entries = configuration.decided_entries
        # replication and commit
        self.missing_positions = replication.missing_positions
        self.on_nack_positions = replication.on_nack_positions
        self.propose = replication.propose
        self.proposals = replication.proposals
        self.on_order = replication.on_order
        self.on_ack = replication.on_ack
        self.on_decided = replication.on_decided
        self.pass_over = replication.pass_over
        self.learn = replication.learn
        self.flush = replication.flush
        # election and the role policy
        self.found = election.found
        self.on_prepare = election.on_prepare
        self.on_promise = election.on_promise
        self.on_start = election.on_start
        self.on_handover = election.on_handover
        self.on_status = election.on_status
        self.hand_over = election.hand_over
        self.tick = election.tick
        self.next_deadline = election.next_deadline
        self.on_timer = election.on_timer
        # persistence
        self.dumps = persistence.dumps
        self.dumps_conf = persistence.dumps_conf
        self.restore = persistence.restore
        self.save_log = persistence.save_log
        self.load_log = persistence.load_log

    # ============================================================ the role
    @property
    def is_leader(self) -> bool:
        core = self.core  # (LogCore.is_leader, inlined: read per message)
        return core.leading and not core.stepped_down

    @property
    def role(self) -> Role:
        return self.core.role

    @property
    def has_decided(self) -> bool:
        return bool(self.core.decided)  # (LogCore.has_decided, inlined: read per message)

    @property
    def handover_target(self) -> str:
        return self.core.handover_to

    @property
    def elected(self) -> list[tuple[str, Ballot, int, int]]:
        """(event, ballot, base, high) of each take-over and hand-over, until cleared."""
        return self.core.elected

    # ============================================================ the log's state
    @property
    def pid(self) -> str:
        return self.core.pid

    @property
    def config(self) -> GroupConfig:
        return self.core.config

    @property
    def promised(self) -> Ballot:
        return self.core.promised

    @property
    def ballot(self) -> Ballot:
        return self.core.ballot

    @property
    def commit_b(self) -> int:
        return self.core.commit_b

    @property
    def high(self) -> int:
        return self.core.high

    @property
    def heard_high(self) -> int:
        return self.core.heard_high

    @property
    def known(self) -> int:
        return self.core.known

    @property
    def emitted(self) -> int:
        return self.core.emitted

    @property
    def conf(self) -> dict[int, MemberEntry]:
        return self.core.conf

    @property
    def stats(self) -> SeqLogStats:
        return self.core.stats

    # ============================================================ inputs
    @property
    def last_heard(self) -> Mapping[str, float]:
        """When each process was last heard from (the group's table, read live)."""
        return self.core.last_heard

    @last_heard.setter
    def last_heard(self, heard: Mapping[str, float]) -> None:
        self.core.last_heard = heard

    @property
    def is_member(self) -> Callable[[str], bool]:
        """Is this process a member (of the gossip membership)?"""
        return self.core.is_member

    @is_member.setter
    def is_member(self, test: Callable[[str], bool]) -> None:
        self.core.is_member = test

    @property
    def may_found(self) -> bool:
        """A group joined by name: its lowest member may found the log."""
        return self.core.may_found

    @may_found.setter
    def may_found(self, may: bool) -> None:
        self.core.may_found = may
