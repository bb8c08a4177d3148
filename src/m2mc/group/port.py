"""What a group instance needs of its node: :class:`NodePort`.

A :class:`~m2mc.group.instance.GroupInstance` (with its order strategy and its
retention) talks to the :class:`~m2mc.group.manager.GroupNode` through this narrow
port only: the node's identity, configuration, store and randomness, its
counters, and the few things the node does for every group -- send a message
(sealed in a keyed group), record a trace event, hand deliveries and events to
the application, save the group's row, join again above a stale version, send
repairs. The node implements it as plain methods (no adapter on the hot path).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Protocol

from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupEvent
from m2mc.group.gjlp import GiitRow
from m2mc.group.messages import Body
from m2mc.group.node_stats import NodeStats
from m2mc.ordering import Message
from m2mc.security.ratelimit import RateLimitConfig, RateLimitStats
from m2mc.store import GroupStore
from m2mc.trace.schema import TraceEvent

if TYPE_CHECKING:
    from m2mc.group.instance import GroupInstance


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

    def send_repairs(self, inst: GroupInstance, messages: list[Message]) -> None:
        """Send ``messages`` again, one M2MP packet per REPAIR."""

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

    def save_row(self, row: GiitRow) -> None:
        """Write the group's GIIT row (membership, version) to the store."""

    def refute(self, inst: GroupInstance, version: int, now: float) -> None:
        """News of our own leave at ``version``: join again above it."""
