"""What an owner shows its metrics at a scrape: a frozen snapshot it makes of itself,
so that :mod:`m2mc.metrics.adhoc` and :mod:`m2mc.metrics.infra` read no node's or
driver's own attributes and import none of their classes (those import the metrics).

``AdhocNode.metrics_view()`` (:mod:`m2mc.api.adhoc`), ``InfraNode.metrics_view()``
(:mod:`m2mc.api.infra`) and ``HostDriver.metrics_view()``
(:mod:`m2mc.infra_runtime.host_driver`) make them. The cores' counters are read
through them as they are (the stats dataclasses the cores keep anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from m2mc.group.manager import GroupNode
    from m2mc.infra.host import HostCore
    from m2mc.infra.member import MemberCore
    from m2mc.infra.pieces import PieceStats
    from m2mc.transport.channel import ChannelStats

__all__ = ["AdhocView", "HostView", "MemberView"]


@dataclass(frozen=True, slots=True)
class AdhocView:
    """An ad hoc node at one scrape, as its metrics see it."""

    pid: str  # the node's, or the configured one before it started ("" for none)
    stack: GroupNode | None  # its group layer while it runs; None before start, after close
    events_dropped: int
    app_events: int  # node events not read yet
    max_queued_events: int
    unread: Mapping[str, int]  # gid -> messages delivered and not read yet
    max_queued_messages: int
    channel: ChannelStats | None  # its channel's counters (None: no driver)
    dropped_paused: int  # datagrams the channel dropped while the node was paused


@dataclass(frozen=True, slots=True)
class MemberView:
    """An infrastructure member (``Node(mode="infra")``) at one scrape."""

    pid: str
    core: MemberCore | None  # while it runs; None before start, after close
    malformed_bodies: int  # delivered bodies the API could not unpack (dropped)
    events_dropped: int
    moves: int  # cells it moved to
    bad_addresses: int
    unread: Mapping[str, int]  # gid -> messages delivered and not read yet
    max_queued_messages: int
    app_events: int  # node events not read yet
    max_queued_events: int
    pieces: PieceStats | None = None  # cell frames cut and put together


@dataclass(frozen=True, slots=True)
class HostView:
    """An infrastructure host (``m2mc host``) at one scrape."""

    host_id: str
    group: str  # the group its frames' authentication counts under
    core: HostCore | None  # None before it started
    bad_addresses: int
    untrusted_addresses: int
    backbone_refused_connections: int
    backbone_bad_streams: int
    pieces: PieceStats | None = None  # cell frames cut and put together
