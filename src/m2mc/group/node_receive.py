"""What a group node receives: :class:`NodeReceive`, the receive side of
:class:`~m2mc.group.manager.GroupNode`, an object of its own whose
:meth:`~NodeReceive.on_message` the node binds once and calls per M2MP message.

Each M2MP message is routed by its group tag and kind, after the checks that
keep bad input from changing any state (each counted in ``NodeStats``): its
size; a keyed group's seal (opened before anything else looks at the message:
no tag, a bad tag, a replay, a sender other than the one that sealed it); the
frame and the body's decoding; our own pid (``own_echo``); then the per-sender
rate limiter of control messages -- the node's discovery limiter for ADV and
GRPS_INFO, the group's own for SYNC_REQ, NACK and GONE. Discovery goes to GJLP;
a group's message to its :class:`~m2mc.group.instance.GroupInstance`. Hearing
anyone after a silence may mean we are back in range (:mod:`m2mc.group.reconnect`).

It holds its own references to what it reads per message (the node's counters,
configuration, group tables and keys, which the node shares, not copies) and
the output side's bound methods for what it hands on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from m2mc.errors import DecodeError
from m2mc.group import groupwire
from m2mc.group.codec import (
    DISCOVERY_TAG,
    FILTER_SIZE,
    FLAG_AUTH,
    HEADER_SIZE,
    MAGIC,
    VERSION,
    Adv,
    Body,
    GrpsInfo,
    Kind,
    decode_body,
    split_frame,
)
from m2mc.group.events import GroupDiscovered, MemberJoined, MemberLeft, MemberNamed
from m2mc.group.reconnect import SILENCE
from m2mc.group.views import view_change
from m2mc.kinds import ReconnectReason
from m2mc.security.errors import AuthError

if TYPE_CHECKING:
    from m2mc.group.config import GroupConfig
    from m2mc.group.gjlp import Gjlp
    from m2mc.group.instance import GroupInstance
    from m2mc.group.node_output import NodeOutput
    from m2mc.group.node_stats import NodeStats
    from m2mc.group.reconnect import Reconnect
    from m2mc.group.streams import GroupStreams
    from m2mc.group.unknown_groups import UnknownGroups
    from m2mc.security.auth import GroupAuth
    from m2mc.security.ratelimit import RateLimiter

_FLAGS_AT = HEADER_SIZE - 1  # offset of the flags byte in a group message
_TAG_AT = slice(3, 11)  # the group tag, after magic and version
_GROUP_PREFIX = MAGIC + bytes((VERSION,))
_RATE_LIMITED = frozenset((int(Kind.NACK), int(Kind.SYNC_REQ), int(Kind.GONE),
                           int(Kind.STREAM_NACK)))  # + discovery
_STREAMS = frozenset((int(Kind.STREAM), int(Kind.STREAM_NACK), int(Kind.STREAM_ACK)))
_DISCOVERY_KINDS = frozenset((int(Kind.ADV), int(Kind.GRPS_INFO)))


class NodeReceive:
    """The node's receive side (module docstring)."""

    def __init__(self, *, pid: str, config: GroupConfig, stats: NodeStats,
                 groups: dict[str, GroupInstance], by_tag: dict[bytes, GroupInstance],
                 auth_by_tag: dict[bytes, GroupAuth], gjlp: Gjlp, reconnect: Reconnect,
                 unknown: UnknownGroups, discovery_limiter: RateLimiter,
                 streams: GroupStreams, output: NodeOutput,
                 back: Callable[[float, ReconnectReason, float | None], None]) -> None:
        self.pid = pid
        self.config = config
        self.stats = stats
        # The node's tables (shared, not copied: the node adds and drops groups).
        self.groups = groups
        self._by_tag = by_tag
        self._auth_by_tag = auth_by_tag
        self.gjlp = gjlp
        self.reconnect = reconnect
        self.unknown = unknown  # traffic of groups never described to us: advertise
        self.discovery_limiter = discovery_limiter
        self.streams = streams
        self._emit = output.emit
        self._save_row = output.save_row
        self._trace = output.trace
        self._back = back  # the node: we are back in range (if it has started)
        # Where a frame's body becomes a message: m2mc.group.codec.decode_body, or what the
        # driver puts in its place with the same result (the simulator decodes a datagram
        # once for all its receivers: m2mc.sim.decode_memo).
        self.decode_body: Callable[..., Body] = decode_body

    def _heard_again(self, now: float) -> None:
        """A message of another process after ``reconnect.silence`` or more of hearing
        nobody: "back" if we are in a group with others, whose keepalives we missed."""
        silent_for = self.reconnect.heard(now)
        if silent_for is not None and any(
                inst.row.membership.current_count() > 1 for inst in self.groups.values()
                if not inst.lingering):
            self._back(now, SILENCE, silent_for)

    def on_message(self, payload: bytes, now: float) -> None:
        """One M2MP message: checked, then routed (module docstring)."""
        stats = self.stats
        if len(payload) > self.config.max_message_bytes:
            stats.oversized += 1
            return
        sealed_by: str | None = None  # the authenticated sender of a keyed group's message
        by_tag = self._auth_by_tag
        if len(payload) > _FLAGS_AT and payload[_FLAGS_AT] & FLAG_AUTH:
            auth = by_tag.get(payload[_TAG_AT])
            if auth is None:  # an open group of ours, discovery, or a group we are not in
                if payload[_TAG_AT] in self._by_tag or payload[_TAG_AT] == DISCOVERY_TAG:
                    stats.sealed_refused += 1
                else:
                    stats.unknown_group += 1
                    self.unknown.heard(bytes(payload[_TAG_AT]), now)
                return
            try:
                frame, sealed_by = groupwire.open_frame(auth, payload)
            except AuthError:
                stats.auth_failed += 1
                return
            except DecodeError:
                stats.malformed += 1
                return
        else:
            try:
                frame = split_frame(payload)
            except DecodeError:
                stats.malformed += 1
                return
            if by_tag and frame.tag in by_tag:  # a keyed group: a message without a tag
                with contextlib.suppress(AuthError):
                    by_tag[frame.tag].unauthenticated()  # counts it in the group's stats
                stats.auth_failed += 1
                return
        if frame.tag == DISCOVERY_TAG:
            if frame.kind not in (Kind.ADV, Kind.GRPS_INFO):
                stats.wrong_kind += 1
                return
            try:
                body = self.decode_body(frame.kind, frame.body, max_seq=self.config.max_seq)
            except DecodeError:
                stats.malformed += 1
                return
            if body.sender == self.pid:  # our own (or a forgery of it): nothing to do
                stats.own_echo += 1
                return
            if not self.discovery_limiter.allow(body.sender, now):
                stats.rate_limited += 1
                return
            if now - self.reconnect.heard_at > self.reconnect.silence:
                self._heard_again(now)
            self.reconnect.heard_at = now
            self._on_discovery(body, now)
            return
        inst = self._by_tag.get(frame.tag)
        if inst is None:
            stats.unknown_group += 1
            self.unknown.heard(frame.tag, now)
            return
        kind = frame.kind
        if kind in _DISCOVERY_KINDS:
            stats.wrong_kind += 1
            return
        try:
            body = self.decode_body(kind, frame.body, max_seq=self.config.max_seq)
        except DecodeError:
            stats.malformed += 1
            return
        if sealed_by is not None and body.sender != sealed_by:
            stats.sender_mismatch += 1
            return
        if body.sender == self.pid:  # our own (or a forgery of it): never processed
            stats.own_echo += 1
            return
        # After authentication (a keyed group's sender is the sealing one), in the
        # group's own limiter: neither discovery nor another group spends its tokens.
        if kind in _RATE_LIMITED and not inst.limiter.allow(body.sender, now):
            stats.rate_limited += 1
            return
        reconnect = self.reconnect
        if now - reconnect.heard_at > reconnect.silence:
            self._heard_again(now)
        reconnect.heard_at = now
        if kind in _STREAMS:
            self.streams.on_body(inst, body, now)  # type: ignore[arg-type]
            return
        inst.on_body(body, now)

    def turned_away(self, head: bytes, now: float) -> None:
        """A message the M2MP filters turned away (``head``: its first bytes): one of a
        group we are not in, or another application's. A group's tells UnknownGroups."""
        if len(head) >= FILTER_SIZE and head[:3] == _GROUP_PREFIX:
            self.unknown.heard(bytes(head[_TAG_AT]), now)

    def _on_discovery(self, body: Body, now: float) -> None:
        if isinstance(body, Adv):
            self.reconnect.overheard_adv(now)
            self.unknown.advertisement(now)
            self.gjlp.on_adv(body, now)
        elif isinstance(body, GrpsInfo):
            if body.sender == self.pid:
                return
            self.reconnect.overheard_reply()
            new, changed, renamed = self.gjlp.on_grps_info(body)
            for info in new:
                self._emit(GroupDiscovered(info))
            announced: set[tuple[str, str]] = set()
            for gid, entries in changed:
                inst = self.groups.get(gid)
                if inst is not None:  # GJLP merged the entries into the row already
                    self._save_row(inst.row, [e.pid for e in entries])
                    for e in entries:
                        if e.pid == self.pid:
                            continue
                        if e.joined:
                            announced.add((gid, e.pid))
                            self._emit(MemberJoined(gid, e.pid, inst.row.names.get(e.pid)))
                        else:
                            self._emit(MemberLeft(gid, e.pid))
                    self._trace("view", gid, detail=view_change(inst.row,
                                                                (e.pid for e in entries)))
            for gid, pid in renamed:
                inst = self.groups.get(gid)
                if inst is not None and (gid, pid) not in announced:
                    self._emit(MemberNamed(gid, pid, inst.row.names.get(pid)))
