"""The narrow ports through which the parts of an infrastructure member see it
(issue 36): :class:`~m2mc.infra.member.MemberCore` implements each of them with its
plain attributes and methods, and the parts (:mod:`.member_groups`,
:mod:`.member_history`, :mod:`.member_nack`, :mod:`.member_moves`,
:mod:`.member_lost`, :mod:`.member_durable`) import these Protocols, never the
core, so no part imports its member back. Each port names what its part reads,
writes or asks of the member, and nothing else. Sans-IO.
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Protocol

from m2mc.infra import messages as msg
from m2mc.infra.config import InfraConfig
from m2mc.infra.ids import MemberId
from m2mc.infra.member_events import Control, MemberEvent, MemberStats, Phase, Uplink
from m2mc.infra.reliable import ReliableSender
from m2mc.trace.schema import TraceSink


class OwnSaved(Protocol):
    """The member's own messages as its durable side tracks them (what the parts tell
    it: taken by the total order, or given up)."""

    def sequenced(self, nseq: int) -> None: ...

    def release(self, done: Callable[[msg.NewItem], bool]) -> None: ...


class MemberBase(Protocol):
    """What every part reads of the member."""

    node: str
    cfg: InfraConfig
    stats: MemberStats
    trace: TraceSink
    phase: Phase
    mid: MemberId | None

    def emit(self, event: str, now: float, *, mid: str | None = None, gseq: int | None = None,
             bytes: int | None = None, detail: str | None = None,
             group: str | None = None) -> None:
        """A trace event (held for the save that makes it true, with a store)."""
        ...

    def pump(self, now: float) -> None:
        """Start the next uplink frame if none is outstanding (A1)."""
        ...


class NackSeat(MemberBase, Protocol):
    """What the NACKs read of the member (figure 6), and its uplink's sender."""

    seen_high: int
    mystable: int
    mybuf: dict[int, msg.Record | None]
    paused: bool
    catchup: tuple[int, int] | None
    sender: ReliableSender


class ResendSeat(MemberBase, Protocol):
    """What sending our own NEWs again reads and changes: those acked but not seen in
    the order, those queued, and how far the member got."""

    seen_high: int
    mystable: int
    confirmed: int
    news: deque[msg.NewItem]
    unconfirmed: OrderedDict[int, tuple[msg.NewItem, float]]


class MovesSeat(Protocol):
    """Where the member is and what it knows of the cells (to ask for a move)."""

    cfg: InfraConfig
    cell: str | None
    gateway: str | None
    directory: tuple[msg.CellInfo, ...]
    configured: tuple[str, ...]
    event_queue: list[MemberEvent]


class LostSeat(MemberBase, Protocol):
    """What ending a membership without its end delivered reads and does."""

    mystable: int
    power_on: bool
    sender: ReliableSender
    sequence: int
    last_high: int
    join_groups: tuple[str, ...]

    def deliver(self, r: msg.Record, now: float) -> None: ...

    def join(self, now: float, groups: tuple[str, ...] | list[str] | None = None
             ) -> MemberId: ...


class GroupsSeat(MemberBase, Protocol):
    """The member's group tables, its numbering of own items and its uplink queues
    (joining the deployment starts a membership afresh)."""

    group: str
    rng: random.Random
    groups: dict[str, int]
    views: dict[str, set[str]]
    group_ops: dict[int, tuple[int, str]]
    join_groups: tuple[str, ...]
    known_groups: dict[str, None]
    resume_from: int | None
    mystable: int
    mynew: int
    app_seq: int
    confirmed: int
    last_high: int
    old_join_id: int | None
    power_on: bool
    leave_requested: bool
    sender: ReliableSender
    news: deque[msg.NewItem]
    unconfirmed: OrderedDict[int, tuple[msg.NewItem, float]]
    control: deque[Control]
    event_queue: list[MemberEvent]

    @property
    def durable(self) -> OwnSaved | None: ...

    @property
    def pending_sends(self) -> int: ...

    def in_flight(self) -> tuple[msg.NewItem, ...]: ...

    def reset_membership(self) -> None: ...

    def queue_new(self, item: msg.NewItem) -> None: ...

    def join(self, now: float, groups: tuple[str, ...] | list[str] | None = None
             ) -> MemberId: ...

    def leave(self, now: float) -> None: ...


class ReadsSeat(MemberBase, Protocol):
    """What the history reads and the catch-up after a return read and change."""

    gateway: str | None
    gateway_addr: str
    groups: dict[str, int]
    views: dict[str, set[str]]
    group_ops: dict[int, tuple[int, str]]
    deliver_until: int | None
    paused: bool
    catchup: tuple[int, int] | None
    catchup_gap: tuple[int, int] | None
    resume_from: int | None
    resume_sequenced: set[int]
    resume_upto: int
    mynew: int
    confirmed: int
    news: deque[msg.NewItem]
    uplinks: list[Uplink]
    event_queue: list[MemberEvent]

    @property
    def durable(self) -> OwnSaved | None: ...

    def can_send(self) -> bool: ...

    def queue_new(self, item: msg.NewItem) -> None: ...

    def deliver_ready(self, now: float) -> None: ...

    def maybe_nack(self, now: float) -> None: ...


class DurableSeat(Protocol):
    """What is saved of the member, and taken up again at power-on."""

    node: str
    group: str
    stats: MemberStats
    phase: Phase
    mid: MemberId | None
    mystable: int
    seen_high: int
    last_high: int
    mynew: int
    app_seq: int
    confirmed: int
    leave_requested: bool
    sequence: int
    groups: dict[str, int]
    views: dict[str, set[str]]
    group_ops: dict[int, tuple[int, str]]
    catchup: tuple[int, int] | None
    resume_sequenced: set[int]
    resume_upto: int
    resume_from: int | None
    restore_problem: str
    old_join_id: int | None
    power_on: bool
    news: deque[msg.NewItem]
    control: deque[Control]

    def join(self, now: float, groups: tuple[str, ...] | list[str] | None = None
             ) -> MemberId: ...


__all__ = ["DurableSeat", "GroupsSeat", "LostSeat", "MemberBase", "MovesSeat", "NackSeat",
           "OwnSaved", "ReadsSeat"]
