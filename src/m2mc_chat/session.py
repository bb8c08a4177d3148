"""One chat participant: a backend, the groups it belongs to, and their thread trees.

Both front ends drive this class: the Textual app (:mod:`m2mc_chat.app`) and the
headless script runner (:mod:`m2mc_chat.script`). It turns backend events into
model updates and tells listeners what changed; it knows nothing about screens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from m2mc.errors import DecodeError, UsageError
from m2mc.security import KeyRequiredError
from m2mc.security.keys import DEFAULT_SUITE, GroupKey
from m2mc_chat.backend import (
    BackendEvent,
    BackendLimits,
    BackendNotice,
    ChatBackend,
    Delivered,
    GroupInfo,
    GroupSeen,
    MemberJoined,
    MemberLeft,
    MemberNamed,
    MemberSeen,
    SyncProgress,
    limits_of,
)
from m2mc_chat.codec import clean_nick, decode_body, encode_body, validate_nick
from m2mc_chat.model import ROOT, AddResult, ChatMessage, ThreadTree
from m2mc_chat.presence import PresenceTable
from m2mc_chat.state import GroupUiState, UiStateStore

__all__ = [
    "UNREADABLE_TEXT",
    "ChatSession",
    "GroupView",
    "GroupsChanged",
    "MembersChanged",
    "MessageAdded",
    "Notice",
    "SessionChange",
    "SyncChanged",
]

UNREADABLE_TEXT = "(unreadable message)"
MAX_NICKS = 4096
"""Nicks remembered across groups (a bound: a hostile peer could invent pids)."""


@dataclass(frozen=True, slots=True)
class GroupsChanged:
    """The discovered groups or the joined groups changed."""


@dataclass(frozen=True, slots=True)
class MessageAdded:
    gid: str
    mid: str
    restructured: bool
    unread: bool


@dataclass(frozen=True, slots=True)
class MembersChanged:
    gid: str


@dataclass(frozen=True, slots=True)
class SyncChanged:
    gid: str
    pending: int


@dataclass(frozen=True, slots=True)
class Notice:
    text: str
    gid: str | None = None


SessionChange = GroupsChanged | MessageAdded | MembersChanged | SyncChanged | Notice


@dataclass(slots=True)
class GroupView:
    """A joined group as the user sees it."""

    info: GroupInfo
    tree: ThreadTree
    presence: PresenceTable
    pending_sync: int = 0
    cursor: str | None = None
    """The message the user was on (the UI keeps it; it is saved across restarts)."""


class ChatSession:
    """Glue between a :class:`ChatBackend` and the per-group models.

    ``clock`` gives wall-clock seconds (stamped on sent messages, used for
    presence); tests inject a fixed one. ``ui_state`` remembers read marks and
    collapsed threads across restarts.
    """

    def __init__(self, backend: ChatBackend, nick: str, *,
                 clock: Callable[[], float] = time.time,
                 ui_state: UiStateStore | None = None,
                 silent_after: float = 30.0,
                 keys: Mapping[str, GroupKey] | None = None,
                 key_suite: str = DEFAULT_SUITE) -> None:
        self.backend = backend
        self.key_suite = key_suite
        """The suite of passphrases the user types in (``--key-suite``)."""
        self.keys: dict[str, GroupKey] = dict(keys or {})
        """Keys of keyed groups by description or gid (config, flags, passphrases typed)."""
        self.nick = validate_nick(nick)
        self.clock = clock
        self.ui_state = ui_state
        self.silent_after = silent_after
        self.groups: dict[str, GroupInfo] = {}
        self.views: dict[str, GroupView] = {}
        self.undecodable = 0
        """Messages whose chat payload could not be decoded (shown as unreadable)."""
        self._nicks: dict[str, str] = {}
        """pid -> the nick it last wrote under, in any group (for groups not joined)."""
        self._announced: dict[str, str] = {}
        """pid -> the nick the group layer last announced for it, in any group (its
        display name: known before it writes); wins over :attr:`_nicks`."""
        self._listeners: list[Callable[[SessionChange], None]] = []
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def node_id(self) -> str:
        return self.backend.node_id

    @property
    def limits(self) -> BackendLimits:
        """What this backend cannot do (the UI shows ``limits.notice``)."""
        return limits_of(self.backend)

    # ------------------------------------------------------------ subscribing

    def subscribe(self, listener: Callable[[SessionChange], None]) -> None:
        self._listeners.append(listener)

    def _emit(self, change: SessionChange) -> None:
        for listener in list(self._listeners):
            listener(change)
        self._wake()

    def _wake(self) -> None:
        """Let :meth:`wait_until` look again (the models changed, maybe invisibly)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds after some change; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return predicate()
        return True

    # -------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the backend and restore the groups it already belongs to."""
        self.backend.set_nick(self.nick)   # the others see it before we write
        await self.backend.start()
        for info in self.backend.known_groups():
            self.groups[info.gid] = info
            self._announce_all(info)
        for info in self.backend.joined_groups():
            self.groups[info.gid] = info
            await self._open_view(info)
        self._emit(GroupsChanged())

    async def run(self) -> None:
        """Apply backend events until the backend stops."""
        async for event in self.backend.events():
            self.apply(event)

    async def close(self) -> None:
        self.save_ui_state()
        await self.backend.close()

    def save_ui_state(self) -> None:
        if self.ui_state is None:
            return
        for gid, view in self.views.items():
            self.ui_state.put(gid, self._ui_state_of(view))
        self.ui_state.save()

    @staticmethod
    def _ui_state_of(view: GroupView) -> GroupUiState:
        return GroupUiState(unread=view.tree.unread_mids(), collapsed=view.tree.collapsed_mids(),
                            cursor=view.cursor)

    async def _open_view(self, info: GroupInfo) -> GroupView:
        view = self.views.get(info.gid)
        if view is None:
            presence = PresenceTable(self.node_id, silent_after=self.silent_after)
            presence.set_members(info.members, info.left)
            presence.joined(self.node_id, self.clock())
            presence.heard(self.node_id, self.clock(), self.nick)
            view = self.views[info.gid] = GroupView(info=info, tree=ThreadTree(),
                                                   presence=presence)
            for pid in (*info.members, *info.left):    # nicks announced in other groups
                if pid in self._announced:
                    presence.announce_nick(pid, self._announced[pid])
            self._announce_all(info)
        saved = self.ui_state.get(info.gid) if self.ui_state else GroupUiState()
        for delivered in await self.backend.history(info.gid):
            self._add_delivered(view, delivered, unread=delivered.mid in saved.unread)
        for mid in saved.collapsed:
            view.tree.set_collapsed(mid, True)
        if saved.cursor is not None and saved.cursor in view.tree:
            view.cursor = saved.cursor
        return view

    # --------------------------------------------------------------- commands

    def key_for(self, gid_or_desc: str) -> GroupKey | None:
        """The key configured for a group, by gid, else by its description."""
        key = self.keys.get(gid_or_desc)
        info = self.groups.get(gid_or_desc)
        if key is None and info is not None:
            key = self.keys.get(info.desc)
        return key

    def passphrase_key(self, passphrase: str) -> GroupKey:
        """A key from a passphrase the user typed (kept in memory only, never saved)."""
        return GroupKey(passphrase=passphrase, suite=self.key_suite)

    def needs_key(self, gid: str) -> bool:
        """A keyed group we have no key for: joining it takes one (ask the user)."""
        info = self.groups.get(gid)
        return (info is not None and info.authenticated and not info.key_held
                and gid not in self.views and self.key_for(gid) is None)

    async def create_group(self, desc: str, key: GroupKey | None = None) -> GroupInfo:
        """Create ``desc``; keyed with ``key``, or with the key configured for ``desc``."""
        desc = desc.strip()
        if not desc:
            raise UsageError("a group needs a description")
        key = key or self.keys.get(desc)
        info = await self.backend.create_group(desc, key=key) if key else \
            await self.backend.create_group(desc)
        if key is not None:
            self.keys.setdefault(info.gid, key)
        self.groups[info.gid] = info
        await self._open_view(info)
        self._emit(GroupsChanged())
        return info

    async def join_group(self, gid: str, key: GroupKey | None = None) -> GroupInfo:
        """Join ``gid``; a keyed group with ``key``, or the key configured for it.

        Raises :class:`~m2mc.security.KeyRequiredError` for a keyed group without one.
        """
        if gid in self.views:
            return self.views[gid].info
        key = key or self.key_for(gid)
        if key is None and self.needs_key(gid):
            raise KeyRequiredError(
                f"group {self.groups[gid].desc!r} is keyed: give its key "
                f"(--key-file NAME=FILE, --key-passphrase NAME=PASSPHRASE, or [keys] in "
                "chat.toml)")
        info = await self.backend.join_group(gid, key=key) if key else \
            await self.backend.join_group(gid)
        if key is not None:
            self.keys.setdefault(gid, key)
        self.groups[gid] = info
        await self._open_view(info)
        self._emit(GroupsChanged())
        return info

    async def leave_group(self, gid: str) -> None:
        if gid not in self.views:
            raise UsageError(f"not a member of group {gid!r}")
        await self.backend.leave_group(gid)
        view = self.views.pop(gid)
        if self.ui_state is not None:
            self.ui_state.put(gid, self._ui_state_of(view))
        self._emit(GroupsChanged())

    async def send(self, gid: str, text: str, reply_to: str | None = None) -> str:
        """Send ``text`` to ``gid``, answering ``reply_to``; returns the new mid."""
        view = self.views.get(gid)
        if view is None:
            raise UsageError(f"not a member of group {gid!r}")
        if reply_to and reply_to not in view.tree:
            raise UsageError(f"no message {reply_to!r} to reply to")
        ts = self.clock()
        payload = encode_body(self.nick, text, ts)
        mid = await self.backend.send(gid, payload, reply_to or None)
        # Show our own message at once; the copy the group layer may hand back is a duplicate.
        self.apply(Delivered(gid=gid, mid=mid, parent=reply_to or ROOT, author=self.node_id,
                             payload=payload))
        return mid

    def nick_of(self, pid: str) -> str:
        """The nick of ``pid``: the one the group layer announced (in any group), else
        the one it writes under, as learned from messages of any group we hold (history
        included); the pid itself when unknown."""
        if pid == self.node_id:
            return self.nick
        return self._announced.get(pid) or self._nicks.get(pid, pid)

    def _learn_nick(self, pid: str, nick: str) -> None:
        if nick:
            _remember(self._nicks, pid, nick)

    def _announce(self, gid: str, pid: str, name: str, *, clears: bool) -> bool:
        """The group layer says ``pid`` (a member of ``gid``) goes by ``name``; ``clears``:
        an empty or unusable name means it announces none (its own word). True if the
        nick shown for it may have changed."""
        if pid == self.node_id:
            return False
        nick = clean_nick(name)
        if not nick and not clears:
            return False
        if nick:
            _remember(self._announced, pid, nick)
        else:
            self._announced.pop(pid, None)
        if (view := self.views.get(gid)) is not None:
            view.presence.announce_nick(pid, nick)
        return True

    def _announce_all(self, info: GroupInfo) -> None:
        """The names a group record carries (what the group layer knows of them)."""
        for pid, name in info.names:
            self._announce(info.gid, pid, name, clears=False)

    def find_group(self, desc_or_gid: str) -> GroupInfo | None:
        """A discovered group by gid, else by description (the first one, by gid).

        Where groups are known by name (``limits.named_groups``) any name finds its group.
        """
        if desc_or_gid in self.groups:
            return self.groups[desc_or_gid]
        matches = sorted((g for g in self.groups.values() if g.desc == desc_or_gid),
                         key=lambda g: g.gid)
        if not matches and self.limits.named_groups and desc_or_gid.strip():
            return GroupInfo(desc_or_gid, desc_or_gid)
        return matches[0] if matches else None

    # ----------------------------------------------------------------- events

    def apply(self, event: BackendEvent) -> None:
        """Fold one backend event into the models and tell the listeners."""
        now = self.clock()
        match event:
            case GroupSeen(info=info):
                self.groups[info.gid] = info
                self._announce_all(info)
                view = self.views.get(info.gid)
                if view is not None:
                    view.info = info
                    view.presence.set_members(info.members, info.left)
                    view.presence.set_members([self.node_id], [])
                    self._emit(MembersChanged(info.gid))
                self._emit(GroupsChanged())
            case Delivered(gid=gid):
                view = self.views.get(gid)
                if view is None:
                    return  # a straggler of a group we left
                unread = event.author != self.node_id and not event.from_log
                result = self._add_delivered(view, event, unread=unread)
                if result.added:
                    self._emit(MessageAdded(gid, event.mid, result.restructured, unread))
                    self._emit(MembersChanged(gid))
            case MemberJoined(gid=gid, pid=pid, name=name):
                self._announce(gid, pid, name or self._announced.get(pid, ""), clears=False)
                if (view := self.views.get(gid)) is not None:
                    view.presence.joined(pid, now)
                    self._emit(MembersChanged(gid))
            case MemberNamed(gid=gid, pid=pid, name=name):
                if self._announce(gid, pid, name, clears=True):
                    if gid in self.views:
                        self._emit(MembersChanged(gid))
                    self._emit(GroupsChanged())     # the browser names members too
            case MemberLeft(gid=gid, pid=pid):
                if (view := self.views.get(gid)) is not None:
                    view.presence.left(pid)
                    self._emit(MembersChanged(gid))
            case MemberSeen(gid=gid, pid=pid, ago=ago):
                if (view := self.views.get(gid)) is not None:
                    was = view.presence.state(pid, now) if pid in view.presence else None
                    view.presence.heard(pid, now - max(0.0, ago))
                    if view.presence.state(pid, now) is not was:
                        self._emit(MembersChanged(gid))
                    else:
                        self._wake()
            case SyncProgress(gid=gid, pending=pending):
                if (view := self.views.get(gid)) is not None:
                    view.pending_sync = max(0, pending)
                    self._emit(SyncChanged(gid, view.pending_sync))
            case BackendNotice(text=text, gid=gid):
                self._emit(Notice(text, gid))

    def _add_delivered(self, view: GroupView, event: Delivered, *, unread: bool) -> AddResult:
        try:
            body = decode_body(event.payload)
            nick, text, ts = body.nick, body.text, body.ts
        except DecodeError:
            # Keep the node: replies to it must still hang in the right place.
            self.undecodable += 1
            nick, text, ts = view.presence.nick(event.author), UNREADABLE_TEXT, 0.0
        message = ChatMessage(mid=event.mid, parent=event.parent, author=event.author,
                              nick=nick, text=text, sent_at=ts)
        result = view.tree.add(message, unread=unread)
        if result.added:
            view.presence.learn_nick(event.author, nick)
            if text is not UNREADABLE_TEXT:
                self._learn_nick(event.author, nick)
            if not event.from_log:
                view.presence.heard(event.author, self.clock())
        return result


def _remember(table: dict[str, str], pid: str, nick: str) -> None:
    """``table[pid] = nick`` as the most recent entry; past :data:`MAX_NICKS` the least
    recently learned entry is forgotten (a hostile peer could invent pids)."""
    if table.get(pid) == nick:
        return
    table.pop(pid, None)
    if len(table) >= MAX_NICKS:
        del table[next(iter(table))]
    table[pid] = nick
