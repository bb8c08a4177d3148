"""The narrow ports between a group node and its group instances:
:class:`NodePort` and :class:`InstancePort`.

A :class:`~m2mc.group.instance.GroupInstance` (with its order strategy and its
retention) talks to the :class:`~m2mc.group.manager.GroupNode` through
:class:`NodePort` only: the node's identity, configuration, store and randomness,
its counters, and the few things the node does for every group -- send a message
(sealed in a keyed group), record a trace event, hand deliveries and events to
the application, save the group's row, join again above a stale version, send
repairs. The node implements it with its output side's bound methods, bound once
(no adapter on the hot path).

The parts a group instance holds (its order strategy, its retention) and the node,
where an instance hands itself over (``send_repairs``, ``refute``), see the instance
through :class:`InstancePort`: what they read of it, never the class itself, so
that this module and theirs sit below ``instance.py`` (no import cycle).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Protocol

from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupEvent
from m2mc.group.gjlp import GiitRow
from m2mc.group.messages import Body
from m2mc.group.mop import Mop
from m2mc.group.msp import Msp
from m2mc.group.node_stats import NodeStats
from m2mc.group.repair import Repair
from m2mc.group.seqsets import Intervals
from m2mc.kinds import Order
from m2mc.ordering import Message
from m2mc.security.ratelimit import RateLimitConfig, RateLimitStats
from m2mc.store import GroupStore
from m2mc.trace.schema import TraceEvent


class NodePort(Protocol):
    """The node as its group instances see it."""

    pid: str
    name: str  # our display name ("" for none)
    run_id: str
    config: GroupConfig
    store: GroupStore
    rng: random.Random
    stats: NodeStats
    tracing: bool  # trace events are recorded (else trace() is a no-op)
    limit_config: RateLimitConfig  # each group's control-message limiter
    control_limits: RateLimitStats  # ... counting into these, shared by the groups
    window_bytes: int  # each group's send window (group/window.py), fitted to the channel

    def send_body(self, tag: bytes, body: Body) -> None:
        """Send ``body`` to the group of ``tag`` (sealed if the group is keyed)."""

    def send_repairs(self, inst: InstancePort, messages: list[Message], *,
                     repeat: bool = False) -> None:
        """Send ``messages`` again, one M2MP packet per REPAIR; ``repeat``: unasked, in
        place of the status after sending (group/repeats.py; the trace says so)."""

    def trace(self, event: str, gid: str | None, m: Message | None = None, *,
              peer: str | None = None, detail: str | None = None) -> None:
        """Record a trace event (written once the store's commit made it true)."""

    def record_traces(self, events: list[TraceEvent]) -> None:
        """Record trace events made up by the caller (as :meth:`trace`)."""

    def deliver(self, gid: str, m: Message) -> None:
        """Hand one delivered message to the application."""

    def deliver_many(self, gid: str, messages: list[Message]) -> None:
        """Hand delivered messages to the application, in order (the list is given up)."""

    def emit(self, event: GroupEvent) -> None:
        """Hand an event (membership, catch-up, skip) to the application."""

    def save_row(self, row: GiitRow, changed: Iterable[str] | None = None) -> None:
        """Write the group's GIIT row (membership, version) to the store; ``changed``:
        the only members whose entries changed since the row was last saved."""

    def refute(self, inst: InstancePort, version: int, now: float) -> None:
        """News of our own leave at ``version``: join again above it."""


class RecordsIn(Protocol):
    """The one thing retention asks of the order strategy (order_strategy.py)."""

    def records_in(self, gseqs: Intervals) -> Intervals:
        """Positions less the membership records known at them."""


class InstancePort(Protocol):
    """A group instance as its order strategy, its retention and its node see it
    (read-only: they change its parts, never rebind them)."""

    @property
    def pid(self) -> str: ...
    @property
    def gid(self) -> str: ...
    @property
    def tag(self) -> bytes: ...
    @property
    def order(self) -> Order: ...
    @property
    def config(self) -> GroupConfig: ...
    @property
    def node(self) -> NodePort: ...
    @property
    def row(self) -> GiitRow: ...
    @property
    def mop(self) -> Mop: ...
    @property
    def repair(self) -> Repair: ...
    @property
    def msp(self) -> Msp: ...
    @property
    def ordering(self) -> RecordsIn: ...
    @property
    def last_heard(self) -> dict[str, float]: ...  # pid -> when last heard (shared, not copied)
    @property
    def lingering_until(self) -> float | None: ...
    @property
    def lingering(self) -> bool: ...
    @property
    def batch_budget(self) -> int: ...  # bytes of records one DATA or REPAIR carries

    def deliver(self, m: Message) -> None:
        """Hand one message to the application (not the receive hot path's way)."""

    def high_waters(self) -> dict[str, int]:
        """The highest seqno known of each sender, ours included."""
