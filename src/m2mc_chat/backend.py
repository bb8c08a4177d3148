"""What the chat needs from a group layer: the :class:`ChatBackend` protocol.

It is the application side of seeds/000 IX.E: ``create_group`` is
``CreateGroup(desc)``, ``join_group`` is ``joinThisGroup``, ``leave_group`` is
``leaveThisGroup``, ``send`` is ``receiveMsgfrmAppl(midp, data, gid)``, and the
:meth:`ChatBackend.events` stream plays the part of ``ApplGrpMngrInterface``
(``displayNewGroupInfo`` -> :class:`GroupSeen`, ``sendMsg2Appl`` ->
:class:`Delivered`, ``createdNewGroup`` -> the return of ``create_group``).

Two implementations: :class:`m2mc_chat.fake.FakeBackend` (in process, for tests
and ``--demo``) and :class:`m2mc_chat.backend_m2mc.M2MCBackend` (the real group
layer). Payloads are opaque bytes here; :mod:`m2mc_chat.codec` gives them meaning.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from m2mc.security.keys import GroupKey

__all__ = [
    "FULL_FEATURES",
    "BackendEvent",
    "BackendLimits",
    "BackendNotice",
    "ChatBackend",
    "Delivered",
    "GroupInfo",
    "GroupSeen",
    "MemberJoined",
    "MemberLeft",
    "MemberNamed",
    "MemberSeen",
    "SyncProgress",
    "limits_of",
]


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A GJLP group record (``GrpInfo``: gid, desc, cMemList, lMemList).

    ``authenticated``: the group's messages carry a group key's authentication
    (issue 9); the chat marks the others as *unauthenticated*. ``key_held``: the
    node already holds that key (infrastructure mode: the hosts' deployment key,
    given when the chat started), so joining asks for none. ``names``: ``(pid,
    nick)`` of the members whose nick the group layer carries (their display
    names: known before they write; docs/group.md, "Display names").
    """

    gid: str
    desc: str
    members: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    authenticated: bool = False
    key_held: bool = False
    names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSeen:
    """A group was discovered, or its record changed (``displayNewGroupInfo``)."""

    info: GroupInfo


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message of a joined group, handed up in S_b order (``sendMsg2Appl``).

    ``parent`` is ``""`` for a message that answers nothing. ``from_log`` marks
    messages replayed from the durable log rather than received just now.
    """

    gid: str
    mid: str
    parent: str
    author: str
    payload: bytes
    from_log: bool = False


@dataclass(frozen=True, slots=True)
class MemberJoined:
    """``pid`` joined ``gid``; ``name``: its nick when the group layer carried it."""

    gid: str
    pid: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class MemberNamed:
    """The group layer says member ``pid`` of ``gid`` goes by ``name`` now (``""``: it
    announces none), before or without a message of it."""

    gid: str
    pid: str
    name: str


@dataclass(frozen=True, slots=True)
class MemberLeft:
    gid: str
    pid: str


@dataclass(frozen=True, slots=True)
class MemberSeen:
    """We heard from ``pid`` (a status heartbeat or any packet), without a message.

    ``ago``: how many seconds before the event was made the packet arrived (the
    chat adds it to its own clock, so a test clock works).
    """

    gid: str
    pid: str
    ago: float = 0.0


@dataclass(frozen=True, slots=True)
class SyncProgress:
    """Member synchronization (seeds/000 VI) still has ``pending`` messages to fetch."""

    gid: str
    pending: int


@dataclass(frozen=True, slots=True)
class BackendNotice:
    """Something the user should know (a lost connection, a refused message)."""

    text: str
    gid: str | None = field(default=None)


@dataclass(frozen=True, slots=True)
class BackendLimits:
    """What a backend cannot do that ad hoc mode does, so the chat says so instead of failing.

    A backend may expose one as its ``limits`` attribute (read with :func:`limits_of`);
    without it, everything is available.
    """

    group_keys: bool = True
    """Groups may have keys of their own (ad hoc mode). Infrastructure mode has none:
    the hosts' deployment key covers every group of the deployment."""
    named_groups: bool = False
    """A group's id is its name, and any name can be joined without discovering it
    first (infrastructure mode: the hosts know the groups; a member outside the
    deployment sees none of them)."""
    notice: str = ""
    """One line telling the user what is missing (shown above the status bar)."""


FULL_FEATURES = BackendLimits()


def limits_of(backend: object) -> BackendLimits:
    """``backend.limits`` if it has one, else :data:`FULL_FEATURES`."""
    limits = getattr(backend, "limits", None)
    return limits if isinstance(limits, BackendLimits) else FULL_FEATURES


BackendEvent = (GroupSeen | Delivered | MemberJoined | MemberLeft | MemberNamed | MemberSeen
                | SyncProgress | BackendNotice)


@runtime_checkable
class ChatBackend(Protocol):
    """A node's view of the group layer, as the chat uses it. All calls from one event loop."""

    @property
    def node_id(self) -> str:
        """This process's identity (the pid of the seeds)."""
        ...

    @property
    def mode(self) -> str:
        """A short description for the title bar, e.g. ``ad hoc 239.255.77.77:7777``."""
        ...

    def set_nick(self, nick: str) -> None:
        """The nick the others see for this participant, carried by the group layer from
        its first packet on (called before :meth:`start`; may be called again)."""

    async def start(self) -> None:
        """Open the network and the durable log."""

    async def close(self) -> None:
        """Stop; pending events are dropped. Idempotent."""

    def events(self) -> AsyncIterator[BackendEvent]:
        """Every event, in the order the group layer produced them. One consumer."""
        ...

    def joined_groups(self) -> list[GroupInfo]:
        """Groups this node belongs to (restored from the durable log after a restart)."""
        ...

    def known_groups(self) -> list[GroupInfo]:
        """Every group discovered so far, joined or not."""
        ...

    async def history(self, gid: str) -> list[Delivered]:
        """The messages of ``gid`` in the durable log, in the order they were delivered."""
        ...

    async def create_group(self, desc: str, key: GroupKey | None = None) -> GroupInfo:
        """Create a group, join it, advertise it (``CreateGroup(desc)``); keyed with ``key``."""
        ...

    async def join_group(self, gid: str, key: GroupKey | None = None) -> GroupInfo:
        """Join a discovered group; catch-up follows as events. A keyed group takes its
        ``key``; without it :class:`~m2mc.security.KeyRequiredError`."""
        ...

    async def leave_group(self, gid: str) -> None:
        """Leave ``gid`` (announced to the members)."""

    async def send(self, gid: str, payload: bytes, reply_to: str | None = None) -> str:
        """Send ``payload`` to ``gid`` answering ``reply_to``; returns the new mid ``pid:seq``."""
        ...
