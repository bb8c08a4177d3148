"""What an infrastructure member's :class:`~m2mc.api.infra.InfraNode` keeps per
group (docs/infra.md, "Groups" and "History"): the application's queue, its history,
and the translation of the member core's events into the API's; and the API's body
of a message in the deployment's order (:func:`pack_body`, :func:`unpack_body`).

**History.** ``Node.history(gid)`` is synchronous, as in ad hoc mode: it answers from
what the node holds. When the member is in a group from position ``p`` on (it joined
it there, or powered on having delivered up to ``p``), the node asks the hosts for the
group's history up to ``p`` (:meth:`~m2mc.infra.member.MemberCore.request_history`,
newest first, at most ``InfraConfig.history_bytes``); every message it delivers after
``p`` is appended. ``history(gid)`` is the first part, then the second, oldest first,
at most ``history_bytes`` of the newest (the oldest go first). ``create_group`` and
``join`` return once the history is there (or their timeout), so a ``history`` right
after them is whole. What the hosts' retention dropped before the oldest message they
hold is told as a ``MessagesSkipped`` event (``count``: how many of the group's
messages) and a log line.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from m2mc.api.config import NodeConfig
from m2mc.api.message import GroupMessage
from m2mc.errors import DecodeError
from m2mc.group.events import GroupEvent, MemberJoined, MemberLeft, MessagesSkipped, Rejoined
from m2mc.infra.config import InfraConfig
from m2mc.infra.member import (
    Delivered,
    GroupJoined,
    GroupLeft,
    GroupRefused,
    HistoryLoaded,
    Left,
    MemberEvent,
    MessagesLost,
    ViewChange,
)
from m2mc.kinds import RejoinReason, ViewKind
from m2mc.ordering import ROOT, MessageId

if TYPE_CHECKING:
    from logging import Logger, LoggerAdapter

    from m2mc.infra_runtime.member_driver import MemberDriver

_PARENT = struct.Struct(">H")


def pack_body(data: bytes, parent: MessageId) -> bytes:
    """The application payload with its S_b parent (``\\x00`` + data, or ``\\x01`` +
    length + parent id + data)."""
    if parent.is_root:
        return b"\x00" + data
    p = str(parent).encode()
    return b"\x01" + _PARENT.pack(len(p)) + p + data


def unpack_body(body: bytes) -> tuple[bytes, MessageId]:
    """Inverse of :func:`pack_body`. Anything :func:`pack_body` could not have made (no
    prefix, an unknown one, a parent id cut short, not UTF-8 or not ``pid:seq``)
    raises :class:`~m2mc.errors.DecodeError`: a member of an unauthenticated
    deployment, or an insider, may send any body."""
    kind = body[:1]
    if kind == b"\x00":
        return body[1:], ROOT
    if kind != b"\x01" or len(body) < 3:
        raise DecodeError("application body: no valid prefix")
    (n,) = _PARENT.unpack_from(body, 1)
    if n == 0 or len(body) < 3 + n:
        raise DecodeError("application body: parent id missing or cut short")
    try:
        text = body[3:3 + n].decode()
    except UnicodeDecodeError:
        raise DecodeError("application body: parent id is not UTF-8") from None
    return body[3 + n:], MessageId.parse(text)  # DecodeError if not "pid:seq"


class MemberNode(Protocol):
    """What this module reads and changes of its node, an
    :class:`m2mc.api.infra.InfraNode` (whose code this is, split for size; typed by
    its shape, so that the node's module imports this one and not the other way)."""

    config: NodeConfig
    infra_config: InfraConfig
    groups: dict[str, GroupState]
    driver: MemberDriver | None
    log: LoggerAdapter[Logger]
    malformed_bodies: int
    lost: int
    _pid: str
    _lost_seen: int
    _refused_seen: int

    def _push_event(self, event: GroupEvent) -> None: ...


_OVERHEAD = 64  # bytes a held message counts beyond its payload


@dataclass(slots=True)
class GroupState:
    """One group of this member, as the API sees it."""

    queue: deque[GroupMessage] = field(default_factory=deque)
    older: deque[GroupMessage] = field(default_factory=deque)  # from the hosts, up to `since`
    newer: deque[GroupMessage] = field(default_factory=deque)  # delivered here
    held: int = 0  # bytes of both
    since: int | None = None  # the position the history was asked up to (None: not yet)
    loaded: bool = False  # the hosts' answer came
    refused: bool = False  # the coordinator refused our joining it

    def keep(self, m: GroupMessage, bound: int) -> None:
        """A delivered message for ``history``."""
        self.newer.append(m)
        self.held += _size(m)
        self._trim(bound)

    def set_older(self, older: list[GroupMessage], bound: int) -> None:
        self.held -= sum(_size(m) for m in self.older)
        self.older = deque(older)
        self.held += sum(_size(m) for m in older)
        self._trim(bound)

    def _trim(self, bound: int) -> None:
        """At most ``bound`` bytes: the oldest go first (always one message kept)."""
        while self.held > bound and len(self.older) + len(self.newer) > 1:
            self.held -= _size(self.older.popleft() if self.older else self.newer.popleft())

    def history(self) -> list[GroupMessage]:
        return [*self.older, *self.newer]


def _size(m: GroupMessage) -> int:
    return len(m.data) + _OVERHEAD


def message_of(node: MemberNode, ev: Delivered) -> GroupMessage | None:
    """The API's message for a delivered record (None: a body the API never made)."""
    try:
        data, parent = unpack_body(ev.body)
    except DecodeError:
        node.malformed_bodies += 1  # dropped: not a body pack_body made
        return None
    return GroupMessage(ev.group, MessageId(ev.sender, ev.app_seq), parent, data, ev.gseq)


def on_events(node: MemberNode, events: list[MemberEvent]) -> None:
    """The member core's events, in order, as the API's."""
    skip_own = not node.config.deliver_own
    bound = node.infra_config.history_bytes
    for ev in events:
        if isinstance(ev, Delivered):
            st = node.groups.get(ev.group)
            gm = message_of(node, ev) if st is not None else None
            if st is None or gm is None:
                continue
            st.keep(gm, bound)  # (after `since`: the hosts' part holds what came before)
            if not (skip_own and ev.sender == node._pid):
                st.queue.append(gm)
        elif isinstance(ev, ViewChange):
            cls = MemberJoined if ev.kind == ViewKind.JOINED else MemberLeft
            node._push_event(cls(ev.group, ev.member.node))
        elif isinstance(ev, GroupJoined):
            joined(node, ev.group, ev.gseq)
        elif isinstance(ev, GroupLeft):
            node._push_event(MemberLeft(ev.group, node._pid))
            node.groups.pop(ev.group, None)
            if ev.expelled:
                node.log.warning("no longer in group %s: the hosts expelled this member",
                                 ev.group)
        elif isinstance(ev, GroupRefused):
            refused(node, ev)
        elif isinstance(ev, MessagesLost):
            node.lost += ev.count
            node._push_event(MessagesSkipped(ev.group, {}, [(ev.after + 1, ev.before - 1)],
                                             ev.count))
            node.log.warning("group %s: %d messages between positions %d and %d are lost to "
                             "this member: it was away, and the hosts' retention dropped "
                             "them before it came back", ev.group, ev.count, ev.after,
                             ev.before)
        elif isinstance(ev, HistoryLoaded):
            loaded(node, ev)
        elif isinstance(ev, Left) and ev.expelled:
            expelled(node, ev)


def expelled(node: MemberNode, ev: Left) -> None:
    """Our membership ended without our leave: say why, once (the member joins again
    with its groups by itself)."""
    stats = node.driver.core.stats if node.driver is not None else None
    reason = RejoinReason.EXPELLED
    if stats is not None and stats.sequence_lost > node._lost_seen:
        node._lost_seen = stats.sequence_lost
        reason = RejoinReason.SEQUENCE_LOST
        node.log.warning("the hosts lost their log (every host restarted without its state): "
                         "%s ended at gseq %d, what the old sequence held after it is lost; "
                         "joining the new sequence with its groups", ev.mid, ev.gseq)
    elif stats is not None and stats.resumes_refused > node._refused_seen:
        node._refused_seen = stats.resumes_refused
        reason = RejoinReason.RESUME_REFUSED
        node.log.warning("power-on: the hosts no longer hold %s (expelled while off): joining "
                         "again with its groups, catching up from the hosts' log", ev.mid)
    else:
        node.log.warning("%s was expelled at gseq %d (no host heard it for member_timeout, or "
                         "it delivered nothing for longer than max_backlog_bytes/"
                         "max_backlog_age allow): joining again with its groups, catching up "
                         "from the hosts' log", ev.mid, ev.gseq)
    node._push_event(Rejoined(str(ev.mid), reason, ev.gseq))


def joined(node: MemberNode, group: str, gseq: int) -> None:
    """We are in ``group`` from ``gseq``: its history up to there from the hosts."""
    st = node.groups.setdefault(group, GroupState())
    st.refused = False
    node._push_event(MemberJoined(group, node._pid))
    ask_history(node, group, gseq)


def ask_history(node: MemberNode, group: str, upto: int) -> None:
    st = node.groups.setdefault(group, GroupState())
    st.since = upto
    st.loaded = False
    assert node.driver is not None
    node.driver.core.request_history(group, upto, node.driver.now())


def loaded(node: MemberNode, ev: HistoryLoaded) -> None:
    st = node.groups.get(ev.group)
    if st is None or st.since != ev.upto:
        return
    st.set_older([gm for d in ev.messages if (gm := message_of(node, d)) is not None],
                 node.infra_config.history_bytes)
    st.loaded = True
    if ev.gone:
        node._push_event(MessagesSkipped(ev.group, {}, [(1, ev.messages[0].gseq - 1
                                                         if ev.messages else ev.upto)],
                                         ev.gone))
        node.log.info("group %s: the hosts' retention dropped its first %d messages; its "
                      "history starts after them", ev.group, ev.gone)


def refused(node: MemberNode, ev: GroupRefused) -> None:
    if ev.sent:
        node.log.warning("a message to group %s was not sequenced: this member was not in "
                         "it when the coordinator took it", ev.group)
        return
    st = node.groups.setdefault(ev.group, GroupState())
    st.refused = True
    node.log.warning("the hosts refused this member's joining group %s (max_groups, "
                     "max_member_groups, or its name)", ev.group)


__all__ = ["GroupState", "MemberNode", "ask_history", "on_events", "pack_body", "unpack_body"]
