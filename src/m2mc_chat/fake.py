"""An in-process stand-in for the group layer: deterministic, instant, controllable.

:class:`FakeNetwork` is one broadcast domain holding groups and their message
logs; every :class:`FakeBackend` on it is one participant. A send reaches every
member at once, in order. Tests that need a different order build the
:class:`~m2mc_chat.backend.Delivered` events themselves (:meth:`FakeNetwork.post`
with ``deliver=False``) and :meth:`FakeBackend.inject` them in any order.
:class:`FakeStore` plays the durable log, so a "restarted" backend built on
the same store gets its groups and history back.

Nicks travel as the group layer's display names do (docs/group.md, "Display
names"): a backend's nick is in its groups' records and in its join, so the others
know it before it writes; a keyed group's names are shown to its members only.

Used by the Pilot and snapshot tests and by ``m2mc chat --demo``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from m2mc.errors import UsageError
from m2mc.security import KeyRequiredError
from m2mc.security.keys import GroupKey
from m2mc_chat.backend import (
    FULL_FEATURES,
    BackendEvent,
    BackendLimits,
    Delivered,
    GroupInfo,
    GroupSeen,
    MemberJoined,
    MemberLeft,
    MemberNamed,
    SyncProgress,
)
from m2mc_chat.codec import encode_body
from m2mc_chat.model import ROOT

__all__ = ["DEMO_KEYS", "FakeBackend", "FakeNetwork", "FakeStore", "demo_network"]


@dataclass(slots=True)
class _Group:
    gid: str
    desc: str
    members: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    log: list[Delivered] = field(default_factory=list)
    next_seq: dict[str, int] = field(default_factory=dict)
    authenticated: bool = False
    names: dict[str, str] = field(default_factory=dict)  # pid -> nick (display name)

    def info(self, *, public: bool = False) -> GroupInfo:
        """The record; ``public``: as a non-member sees it (a keyed group without names)."""
        hidden = public and self.authenticated
        names = () if hidden else tuple(sorted((p, n) for p, n in self.names.items()
                                               if p in self.members and n))
        return GroupInfo(self.gid, self.desc, tuple(self.members), tuple(self.left),
                         authenticated=self.authenticated, names=names)


@dataclass(slots=True)
class FakeStore:
    """What a node keeps on disk: the groups it belongs to and what it delivered."""

    joined: dict[str, GroupInfo] = field(default_factory=dict)
    logs: dict[str, list[Delivered]] = field(default_factory=dict)
    mids: dict[str, set[str]] = field(default_factory=dict)

    def keep(self, message: Delivered) -> None:
        """Log ``message`` once."""
        mids = self.mids.setdefault(message.gid, set())
        if message.mid not in mids:
            mids.add(message.mid)
            self.logs.setdefault(message.gid, []).append(message)


class FakeNetwork:
    """Groups, their logs, and the backends attached, all in one process."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}
        self._backends: list[FakeBackend] = []
        self._created = 0

    def group_info(self, gid: str) -> GroupInfo:
        return self._group(gid).info()

    def groups(self, viewer: FakeBackend | None = None) -> list[GroupInfo]:
        """Every group's record, as ``viewer`` sees it (members of a keyed group only
        see its names)."""
        return [g.info(public=viewer is None or g.gid not in viewer.store.joined)
                for g in self._groups.values()]

    def _group(self, gid: str) -> _Group:
        try:
            return self._groups[gid]
        except KeyError:
            raise UsageError(f"no group {gid!r} on this network") from None

    def add_group(self, desc: str, creator: str, *, members: tuple[str, ...] = (),
                  authenticated: bool = False, names: Mapping[str, str] | None = None) -> str:
        """A group that exists before any backend attaches (someone else's); ``names``:
        the nicks its members announce (pid -> nick)."""
        self._created += 1
        gid = f"{creator}/{self._created}"
        self._groups[gid] = _Group(gid, desc, members=[creator, *members],
                                   authenticated=authenticated, names=dict(names or {}))
        self._show(self._groups[gid])
        return gid

    def member_joined(self, gid: str, pid: str, nick: str = "") -> None:
        """A participant without a backend here joins ``gid`` (announcing ``nick``)."""
        group = self._group(gid)
        if pid in group.left:
            group.left.remove(pid)
        if pid not in group.members:
            group.members.append(pid)
        if nick:
            group.names[pid] = nick
        self._broadcast(MemberJoined(gid, pid, nick), gid=gid)
        self._show(group)

    def rename(self, pid: str, nick: str) -> None:
        """``pid`` announces another nick (``""``: none) in every group it is in."""
        for group in self._groups.values():
            if pid not in group.members:
                continue
            group.names[pid] = nick
            self._broadcast(MemberNamed(group.gid, pid, nick), gid=group.gid)
            self._show(group)

    def post(self, gid: str, author: str, nick: str, text: str, *, parent: str = ROOT,
             ts: float = 0.0, deliver: bool = True) -> Delivered:
        """A message by a participant that has no backend here (a remote member)."""
        group = self._group(gid)
        seq = group.next_seq.get(author, 0) + 1
        group.next_seq[author] = seq
        message = Delivered(gid=gid, mid=f"{author}:{seq}", parent=parent, author=author,
                            payload=encode_body(nick, text, ts))
        group.log.append(message)
        if deliver:
            self._deliver(message)
        return message

    def member_left(self, gid: str, pid: str) -> None:
        group = self._group(gid)
        if pid in group.members:
            group.members.remove(pid)
        if pid not in group.left:
            group.left.append(pid)
        self._broadcast(MemberLeft(gid, pid), gid=gid)
        self._show(group)

    def _deliver(self, message: Delivered) -> None:
        for backend in self._backends:
            if message.gid in backend.store.joined:
                backend._push(message)

    def _broadcast(self, event: BackendEvent, *, gid: str | None = None,
                   skip: FakeBackend | None = None) -> None:
        for backend in self._backends:
            if backend is skip or (gid is not None and gid not in backend.store.joined):
                continue
            backend._push(event)

    def _show(self, group: _Group) -> None:
        """Every backend hears the group's record (``displayNewGroupInfo``)."""
        for backend in self._backends:
            backend._push(GroupSeen(group.info(public=group.gid not in backend.store.joined)))

    def _attach(self, backend: FakeBackend) -> None:
        self._backends.append(backend)
        for info in self.groups(backend):
            backend._push(GroupSeen(info))

    def _detach(self, backend: FakeBackend) -> None:
        if backend in self._backends:
            self._backends.remove(backend)


class FakeBackend:
    """One participant on a :class:`FakeNetwork`; implements :class:`ChatBackend`."""

    def __init__(self, network: FakeNetwork, node_id: str, *, nick: str = "",
                 store: FakeStore | None = None, catch_up_batch: int = 0,
                 limits: BackendLimits = FULL_FEATURES) -> None:
        self.network = network
        self.nick = nick
        """The nick this participant announces (set by the chat: :meth:`set_nick`)."""
        self.limits = limits
        """What to pretend this backend cannot do (the UI's degraded modes, in tests)."""
        self._node_id = node_id
        self.store = store if store is not None else FakeStore()
        self.catch_up_batch = catch_up_batch
        """If > 0, catch-up after a join stops after this many messages (to show progress)."""
        self.sent: list[tuple[str, str, str | None]] = []
        """``(gid, mid, reply_to)`` of every send, for tests."""
        self.keys_used: dict[str, GroupKey | None] = {}
        """The key each group was created or joined with, for tests (any key opens a
        keyed group here: the real group layer cannot tell a wrong key at join either)."""
        self._queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
        self._started = False
        self._closed = False

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def mode(self) -> str:
        return "demo (simulated group)"

    def _push(self, event: BackendEvent) -> None:
        if self._closed:
            return
        self._queue.put_nowait(event)

    def inject(self, event: BackendEvent) -> None:
        """Hand ``event`` to the chat as if the group layer produced it."""
        self._push(event)

    def set_nick(self, nick: str) -> None:
        if nick != self.nick:
            self.nick = nick
            if self._started:
                self.network.rename(self.node_id, nick)

    async def start(self) -> None:
        if not self._started:
            self._started = True
            self.network._attach(self)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.network._detach(self)
            self._queue.put_nowait(None)

    async def events(self) -> AsyncIterator[BackendEvent]:
        while (event := await self._queue.get()) is not None:
            # Logged when handed to the application, as the group layer's durable log does.
            if isinstance(event, Delivered) and event.gid in self.store.joined:
                self.store.keep(event)
            yield event

    def joined_groups(self) -> list[GroupInfo]:
        return list(self.store.joined.values())

    def known_groups(self) -> list[GroupInfo]:
        return self.network.groups(self)

    async def history(self, gid: str) -> list[Delivered]:
        return [Delivered(m.gid, m.mid, m.parent, m.author, m.payload, from_log=True)
                for m in self.store.logs.get(gid, [])]

    async def create_group(self, desc: str, key: GroupKey | None = None) -> GroupInfo:
        gid = self.network.add_group(desc, self.node_id, authenticated=key is not None,
                                     names={self.node_id: self.nick} if self.nick else None)
        self.keys_used[gid] = key
        info = self.network.group_info(gid)
        self.store.joined[gid] = info
        return info

    async def join_group(self, gid: str, key: GroupKey | None = None) -> GroupInfo:
        group = self.network._group(gid)
        if group.authenticated and key is None:
            raise KeyRequiredError(f"group {gid!r} is keyed: joining it takes its key "
                                   "(key, key_file or passphrase)")
        self.keys_used[gid] = key
        if self.node_id in group.left:
            group.left.remove(self.node_id)
        if self.node_id not in group.members:
            group.members.append(self.node_id)
        if self.nick:
            group.names[self.node_id] = self.nick
        info = group.info()
        self.store.joined[gid] = info
        self.network._broadcast(MemberJoined(gid, self.node_id, self.nick), gid=gid, skip=self)
        self.network._show(group)
        # Member synchronization: announce what is missing, then hand it over.
        known = self.store.mids.get(gid, set())
        missing = [m for m in group.log if m.mid not in known]
        if self.catch_up_batch > 0:
            missing = missing[: self.catch_up_batch]
            pending = len(group.log) - len(known) - len(missing)
        else:
            pending = 0
        self._push(SyncProgress(gid, len(group.log) - len(known)))
        for message in missing:
            self._push(message)
        self._push(SyncProgress(gid, pending))
        return info

    async def leave_group(self, gid: str) -> None:
        self.store.joined.pop(gid, None)
        self.network.member_left(gid, self.node_id)

    async def send(self, gid: str, payload: bytes, reply_to: str | None = None) -> str:
        if gid not in self.store.joined:
            raise UsageError(f"not a member of group {gid!r}")
        group = self.network._group(gid)
        seq = group.next_seq.get(self.node_id, 0) + 1
        group.next_seq[self.node_id] = seq
        message = Delivered(gid=gid, mid=f"{self.node_id}:{seq}", parent=reply_to or ROOT,
                            author=self.node_id, payload=payload)
        group.log.append(message)
        self.sent.append((gid, message.mid, reply_to))
        self.network._deliver(message)
        return message.mid


# Sender clocks of the demo world: a fixed afternoon, so screenshots do not change.
DEMO_T0 = 1_750_000_000.0
DEMO_KEYS = {"travel stories": GroupKey(passphrase="red fort")}
"""The key of the demo's keyed group, which ``m2mc chat --demo`` is given."""


def demo_network() -> tuple[FakeNetwork, dict[str, str]]:
    """The conversation of seeds/000 Fig. 3-4 and two more groups; returns (network, gids).

    "travel stories" is an authenticated group (issue 9), the others are open.
    Carol asks two questions; Bob answers the first, Dave (standing in for the
    seed's A) the second, each having selected the question, so the answers hang
    under the right question at every member. Gita is a member who never spoke
    (shown as not heard from) and Hari has left.
    """
    net = FakeNetwork()
    trip = net.add_group("travel stories", "carol", members=("bob", "dave", "gita"),
                         authenticated=True)
    delhi = net.post(trip, "carol", "carol", "Did you visit Delhi?", ts=DEMO_T0)
    chennai = net.post(trip, "carol", "carol", "Did you visit Chennai?", ts=DEMO_T0 + 20)
    no = net.post(trip, "dave", "dave", "No, the train was full", parent=chennai.mid,
                  ts=DEMO_T0 + 61)
    yes = net.post(trip, "bob", "bob", "Yes! The Red Fort at dawn.", parent=delhi.mid,
                   ts=DEMO_T0 + 62)
    net.post(trip, "carol", "carol", "Which gate did you take?", parent=yes.mid, ts=DEMO_T0 + 90)
    net.post(trip, "bob", "bob", "Lahori Gate, the main one", parent=yes.mid, ts=DEMO_T0 + 130)
    net.post(trip, "carol", "carol", "Next time then!", parent=no.mid, ts=DEMO_T0 + 140)
    net.post(trip, "dave", "dave", "Anyone up for Mumbai in March?", ts=DEMO_T0 + 300)
    net.member_left(trip, "hari")
    lunch = net.add_group("lunch", "erin", members=("bob",))
    pizza = net.post(lunch, "erin", "erin", "Pizza or curry today?", ts=DEMO_T0 + 10)
    net.post(lunch, "bob", "bob", "Curry, please", parent=pizza.mid, ts=DEMO_T0 + 50)
    release = net.add_group("m2mc release 0.2", "frank")
    net.post(release, "frank", "frank", "Tagging on Friday; last call for fixes", ts=DEMO_T0)
    net.member_left(release, "frank")
    return net, {"travel": trip, "lunch": lunch, "release": release}
