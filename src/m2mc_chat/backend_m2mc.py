"""The chat on the real group layer: :class:`M2MCBackend` over :class:`m2mc.api.Node`.

One :class:`~m2mc.api.Node` per chat participant, its durable log in
``<data-dir>/node-<device id>/``. The node hands out group news on one stream
and each group's messages on its own; this adapter merges them into the single
ordered stream the chat consumes (one reader task per joined group).

``M2MCBackend(config)`` with ``config.infra`` set builds the infrastructure-mode
variant, :class:`m2mc_chat.backend_infra.InfraChatBackend`, so callers never choose
a class. As ``m2mc.api.Node`` does for its own modes, the variants are a registry
(:func:`register_variant`): the variant's module registers its class when it is
imported (``m2mc chat`` imports it), and this module imports no variant.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

from m2mc.api import Group, GroupKey, GroupMessage, Node, NodeConfig
from m2mc.errors import ConfigError, UsageError
from m2mc.group.codec import GrpInfo
from m2mc.group.events import (
    CatchUpProgress,
    GroupCreated,
    GroupDiscovered,
    GroupEvent,
    Reconnected,
)
from m2mc.group.events import MemberJoined as NodeMemberJoined
from m2mc.group.events import MemberLeft as NodeMemberLeft
from m2mc.group.events import MemberNamed as NodeMemberNamed
from m2mc.transport.url import DEFAULT_CHANNEL_URL, is_iface_name
from m2mc_chat.backend import (
    FULL_FEATURES,
    BackendEvent,
    BackendLimits,
    BackendNotice,
    Delivered,
    GroupInfo,
    GroupSeen,
    MemberJoined,
    MemberLeft,
    MemberNamed,
    MemberSeen,
    SyncProgress,
)
from m2mc_chat.config import ChatConfig

__all__ = ["M2MCBackend", "describe_channel", "group_info", "register_variant"]

PRESENCE_POLL = 1.0
"""Seconds between looks at when the group layer last heard from each member
(``Group.last_heard``: status heartbeats keep silent members heard from)."""
PRESENCE_STEP = 0.5
"""A member is reported again once it was heard from this much later than last reported."""
JOIN_TIMEOUT = 5.0
"""Seconds to look for a group that was not discovered yet (Node.join)."""
BACK_IN_RANGE = "Back in range: catching up, and looking for groups made meanwhile"
"""The notice shown when the node finds it is back on the network (Reconnected)."""
MAX_PENDING_EVENTS = 4096
"""Events handed over but not yet consumed by the chat; past it the readers wait,
and the node's own bounded queues push back on the network (m2mc.api)."""


INFRA_VARIANT = "infra"
"""The variant ``M2MCBackend(config)`` builds when ``config.infra`` is set."""

_VARIANTS: dict[str, type[M2MCBackend]] = {}


def register_variant(name: str, cls: type[M2MCBackend]) -> None:
    """``cls`` is what ``M2MCBackend(config)`` builds for the variant ``name``."""
    _VARIANTS[name] = cls


def group_info(info: GrpInfo, *, authenticated: bool = False) -> GroupInfo:
    """GJLP's record (members with a joined flag) as the chat's (cMemList, lMemList).

    ``keyed`` (issue 9) is read with ``getattr`` so that records of a group layer
    without authenticated groups read as unauthenticated; ``names`` (the members'
    display names, which this chat sets to their nicks) likewise.
    """
    return GroupInfo(gid=info.gid, desc=info.desc,
                     members=tuple(m.pid for m in info.members if m.joined),
                     left=tuple(m.pid for m in info.members if not m.joined),
                     authenticated=authenticated or bool(getattr(info, "keyed", False)),
                     names=tuple(getattr(info, "names", ())))


def describe_channel(url: str) -> str:
    """``ad hoc 239.255.77.77:7777 (loopback only)`` for the title bar (``... on wlan0``
    when the URL names its interface)."""
    parts = urlsplit(url)
    iface = parse_qs(parts.query).get("iface", [""])[0]
    where = parts.netloc or url
    note = " (loopback only)" if iface.startswith("127.") or iface in ("lo", "lo0") \
        else f" on {iface}" if iface and is_iface_name(iface) else ""
    return f"ad hoc {where}{note}"


class M2MCBackend:
    """Implements :class:`~m2mc_chat.backend.ChatBackend` with an M2MC node."""

    limits: BackendLimits = FULL_FEATURES

    def __new__(cls, config: ChatConfig, *,
                node_config: NodeConfig | None = None) -> M2MCBackend:
        if cls is M2MCBackend and config.infra:
            variant = _VARIANTS.get(INFRA_VARIANT)
            if variant is None:
                raise ConfigError("the infrastructure-mode chat backend is not loaded: "
                                  "import m2mc_chat.backend_infra")
            return object.__new__(variant)
        return object.__new__(cls)

    def __init__(self, config: ChatConfig, *, node_config: NodeConfig | None = None) -> None:
        self.config = config
        self.channel = config.channel or DEFAULT_CHANNEL_URL
        self._node_config = node_config or NodeConfig(
            pid=config.device_id, channel=self.channel,
            data_dir=config.data_dir / f"node-{config.device_id}",
            trace_dir=config.trace_dir, run_id=config.run_id)
        self._node_config.pid = config.device_id
        if config.metrics is not None:
            self._node_config.metrics = config.metrics
        if config.nick:  # the group layer carries it (NodeConfig.name)
            self._node_config.name = config.nick
        self._setup(Node(self._node_config))

    def _setup(self, node: Node) -> None:
        self.node = node
        self._queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue(MAX_PENDING_EVENTS)
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._news: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        """Other tasks of a subclass, cancelled by :meth:`close`."""
        self._closed = False
        self._reported: dict[str, dict[str, float]] = {}
        """gid -> pid -> the last-heard time last reported as :class:`MemberSeen`."""

    @property
    def node_id(self) -> str:
        return self.config.device_id

    @property
    def mode(self) -> str:
        return describe_channel(self.channel)

    # -------------------------------------------------------------- lifecycle

    def set_nick(self, nick: str) -> None:
        self.node.set_name(nick)   # NodeConfig.name before start, a status after

    async def start(self) -> None:
        await self.node.start()
        self._news = asyncio.create_task(self._read_news(), name="chat-news")
        for info in self.node.joined():
            self._read_group(self.node.group(info.gid))
        # Keyed groups of the log come back only with their key (else they stay closed
        # and the browser offers them, asking for the passphrase).
        for info in self._locked():
            key = self.config.keys.get(info.gid) or self.config.keys.get(info.desc)
            if key is not None:
                self._read_group(await self.node.join(info.gid, key=key))
        self._background.append(asyncio.create_task(self._watch_presence(),
                                                    name="chat-presence"))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = [*self._readers.values(), *([self._news] if self._news else []),
                 *self._background]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.node.close()
        while not self._queue.empty():   # make room for the end mark; nobody reads these now
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def events(self) -> AsyncIterator[BackendEvent]:
        while (event := await self._queue.get()) is not None:
            yield event

    # ---------------------------------------------------------------- queries

    def joined_groups(self) -> list[GroupInfo]:
        return [group_info(info) for info in self.node.joined()]

    def known_groups(self) -> list[GroupInfo]:
        return ([group_info(info) for info in [*self.node.discovered(), *self._locked()]]
                + self.joined_groups())

    def _locked(self) -> list[GrpInfo]:
        locked = getattr(self.node, "locked", None)    # not in infrastructure mode
        return list(locked()) if callable(locked) else []

    async def history(self, gid: str) -> list[Delivered]:
        return [self._delivered(m, from_log=True) for m in self.node.history(gid)]

    # --------------------------------------------------------------- commands

    async def create_group(self, desc: str, key: GroupKey | None = None) -> GroupInfo:
        group = await self.node.create_group(desc, key=key)
        self._read_group(group)
        return self._info_of(group)

    async def join_group(self, gid: str, key: GroupKey | None = None) -> GroupInfo:
        group = await self.node.join(gid, timeout=JOIN_TIMEOUT, key=key)
        self._read_group(group)
        return self._info_of(group)

    async def leave_group(self, gid: str) -> None:
        await self.node.group(gid).leave()
        reader = self._readers.pop(gid, None)
        self._reported.pop(gid, None)
        if reader is not None:
            reader.cancel()

    async def send(self, gid: str, payload: bytes, reply_to: str | None = None) -> str:
        mid = await self.node.group(gid).send(payload, reply_to=reply_to or None)
        await self.node.sync()  # a line shown as sent survives a kill (one commit: rare)
        return str(mid)

    # --------------------------------------------------------------- presence

    async def refresh_presence(self) -> None:
        """Report every member heard from since the last report (:class:`MemberSeen`).

        Members that write nothing still send status heartbeats, which the group layer
        notes (``Group.last_heard``); a member that went away stops being heard from.
        Called every :data:`PRESENCE_POLL` seconds; tests call it to look at once.
        """
        wall = time.time()
        for gid in list(self._readers):
            try:
                heard = self.node.group(gid).last_heard()
            except UsageError:       # left meanwhile, or the node closed
                continue
            reported = self._reported.setdefault(gid, {})
            for pid, at in heard.items():
                if pid == self.node_id or at < reported.get(pid, float("-inf")) + PRESENCE_STEP:
                    continue
                reported[pid] = at
                await self._queue.put(MemberSeen(gid, pid, ago=max(0.0, wall - at)))

    async def _watch_presence(self) -> None:
        while True:
            await self.refresh_presence()
            await asyncio.sleep(PRESENCE_POLL)

    # -------------------------------------------------------------- internals

    def _info_of(self, group: Group) -> GroupInfo:
        info = group.info
        if info is None:
            raise UsageError(f"group {group.gid!r} has no record")
        return group_info(info, authenticated=bool(getattr(group, "authenticated", False)))

    @staticmethod
    def _delivered(message: GroupMessage, *, from_log: bool = False) -> Delivered:
        return Delivered(gid=message.gid, mid=str(message.mid), parent=str(message.parent),
                         author=message.sender, payload=message.data, from_log=from_log)

    def _read_group(self, group: Group) -> None:
        if group.gid in self._readers and not self._readers[group.gid].done():
            return

        async def read() -> None:
            async for message in group:
                await self._queue.put(self._delivered(message))

        self._readers[group.gid] = asyncio.create_task(read(), name=f"chat-{group.gid}")

    async def _read_news(self) -> None:
        async for event in self.node.events():
            for translated in self._translate(event):
                await self._queue.put(translated)

    def _translate(self, event: GroupEvent) -> list[BackendEvent]:
        match event:
            case GroupDiscovered(info=info):
                return [GroupSeen(group_info(info))]
            case (GroupCreated(gid=gid) | NodeMemberJoined(gid=gid) | NodeMemberLeft(gid=gid)
                  | NodeMemberNamed(gid=gid)):
                out: list[BackendEvent] = []
                if isinstance(event, NodeMemberJoined):
                    out.append(MemberJoined(gid, event.pid, event.name))
                elif isinstance(event, NodeMemberLeft):
                    out.append(MemberLeft(gid, event.pid))
                elif isinstance(event, NodeMemberNamed):
                    out.append(MemberNamed(gid, event.pid, event.name))
                with contextlib.suppress(UsageError):   # not (or no longer) a member
                    out.append(GroupSeen(self._info_of(self.node.group(gid))))
                return out
            case CatchUpProgress(gid=gid, remaining=remaining, done=done):
                return [SyncProgress(gid, 0 if done else max(0, remaining))]
            case Reconnected():
                # The node advertises and catches up by itself; new groups come as
                # GroupSeen (the browser redraws), catch-up as SyncProgress.
                return [BackendNotice(BACK_IN_RANGE)]
        return [BackendNotice(f"unexpected group event {type(event).__name__}")]
