"""The chat in infrastructure mode: :class:`InfraChatBackend` over an infra-mode node.

``m2mc chat --infra CELLS`` attaches this participant as a member to the hosts of
seeds/001 and 004 (``m2mc host``, docs/infra.md) through the same application API
as ad hoc mode (``m2mc.api.Node(NodeConfig(mode="infra", hosts=cells))``). What
differs, and how the chat shows it (each item is part of :data:`INFRA_LIMITS`):

- **Groups.** The hosts serve any number of groups, known by name: creating a group
  makes (or joins) the group of that name, and the browser lists the groups this
  member saw in the deployment's order. Groups have no keys of their own: the
  hosts' deployment key (``--key-file``) covers them all.
- **History.** The hosts keep each group's messages for their retention
  (docs/infra.md, "History"): joining a group shows its conversation so far, and a
  restarted chat shows it again. The member keeps its state in
  ``<data-dir>/infra-<device id>/`` (its membership, groups and message numbering),
  so a restart resumes it under the same id; away longer than the hosts wait, it
  joins again and catches up from their log, and is told what their retention had
  dropped.
- **Members.** A group's members as the hosts named them at the join, then its
  joins and leaves. Hosts expel members they stop hearing from, so every member of
  a view counts as heard from, refreshed every :data:`PRESENCE_REFRESH` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

from m2mc.api import Group, GroupKey, Node, NodeConfig
from m2mc.errors import ConfigError, UsageError
from m2mc.group.codec import GrpInfo
from m2mc.group.events import GroupEvent, MessagesSkipped, Rejoined
from m2mc.group.events import MemberJoined as NodeMemberJoined
from m2mc.group.events import MemberLeft as NodeMemberLeft
from m2mc.kinds import RejoinReason
from m2mc_chat.backend import (
    BackendEvent,
    BackendLimits,
    BackendNotice,
    Delivered,
    GroupInfo,
    MemberSeen,
)
from m2mc_chat.backend_m2mc import INFRA_VARIANT, M2MCBackend, group_info, register_variant
from m2mc_chat.config import ChatConfig, infra_cells

__all__ = ["INFRA_LIMITS", "InfraChatBackend", "describe_infra"]

INFRA_LIMITS = BackendLimits(
    group_keys=False, named_groups=True,
    notice="infrastructure mode: groups have no keys of their own; history as far back as "
           "the hosts keep it")
JOIN_TIMEOUT = 15.0
"""Seconds to wait for the coordinator to let us in (an election may be under way)."""
HISTORY_WAIT = 5.0
"""Seconds a view waits for a group's history from the hosts before it opens without."""
PRESENCE_REFRESH = 5.0
"""Seconds between refreshes of the view's members as heard from."""
MAX_LEFT = 4096
"""Members remembered as having left, per group (a bound: the view is the hosts')."""
_POLL = 0.05


def _no_group_key(key: GroupKey | None) -> None:
    if key is not None:
        raise UsageError("infrastructure mode has no group keys (the hosts' deployment key "
                         "is the node's, NodeConfig.infra_key)")


def describe_infra(cells: Sequence[str]) -> str:
    """``infra 239.255.20.1:7711 +2 cells (loopback only)`` for the title bar."""
    first = urlsplit(cells[0]).netloc if cells else "?"
    extra = len(cells) - 1
    more = f" +{extra} cell{'s' if extra > 1 else ''}" if extra > 0 else ""
    loopback = all(parse_qs(urlsplit(c).query).get("iface", [""])[0].startswith("127.")
                   for c in cells)
    return f"infra {first}{more}" + (" (loopback only)" if loopback else "")


class InfraChatBackend(M2MCBackend):
    """:class:`~m2mc_chat.backend.ChatBackend` on the hosts; built by ``M2MCBackend(config)``."""

    limits = INFRA_LIMITS

    def __init__(self, config: ChatConfig, *, node_config: NodeConfig | None = None) -> None:
        self.config = config
        try:
            self.cells = infra_cells(config.infra)
        except UsageError as exc:
            raise ConfigError(str(exc)) from None
        if not self.cells:
            raise ConfigError("--infra needs the hosts' cells: GROUP:PORT[,GROUP:PORT...]")
        self.channel = self.cells[0]
        base = node_config or NodeConfig()
        # Its own data_dir keeps the membership and the numbering of its messages: the
        # device id is its member id across restarts (docs/infra.md, "Switch-off").
        self._node_config = replace(
            base, mode="infra", hosts=base.hosts or self.cells, pid=config.device_id,
            data_dir=base.data_dir or config.data_dir / f"infra-{config.device_id}",
            infra_key=config.infra_key or base.infra_key,
            metrics=config.metrics or base.metrics)
        self.join_timeout = JOIN_TIMEOUT
        self._left: dict[str, dict[str, None]] = {}  # gid -> members gone, oldest first
        self._setup(Node(self._node_config))

    @property
    def node_id(self) -> str:
        return self.config.device_id

    @property
    def mode(self) -> str:
        return describe_infra(self.cells)

    # ---------------------------------------------------------------- queries

    def _info(self, info: GrpInfo) -> GroupInfo:
        out = group_info(info)
        left = tuple(pid for pid in self._left.get(info.gid, ()) if pid not in out.members)
        # Sealed frames with a deployment key (issue 9) when the node has one.
        keyed = getattr(self.node, "authenticated", False) is True
        return replace(out, left=left, authenticated=keyed, key_held=keyed)

    def _info_of(self, group: Group) -> GroupInfo:
        info = group.info
        if info is None:
            raise UsageError(f"group {group.gid!r} has no record")
        return self._info(info)

    def joined_groups(self) -> list[GroupInfo]:
        return [self._info(info) for info in self.node.joined()]

    def known_groups(self) -> list[GroupInfo]:
        return [self._info(info) for info in self.node.discovered()]

    def _locked(self) -> list[GrpInfo]:
        return []     # no group keys in infrastructure mode

    async def history(self, gid: str) -> list[Delivered]:
        """The group's conversation from the hosts' log (their retention), once the
        node has it (at most :data:`HISTORY_WAIT` seconds)."""
        ready = getattr(self.node, "history_ready", None)
        loop = asyncio.get_running_loop()
        end = loop.time() + HISTORY_WAIT
        while callable(ready) and not ready(gid) and loop.time() < end:
            await asyncio.sleep(_POLL)
        return await super().history(gid)

    # --------------------------------------------------------------- commands

    async def create_group(self, desc: str, key: GroupKey | None = None) -> GroupInfo:
        _no_group_key(key)
        return await self._join(desc.strip(), create=True)

    async def join_group(self, gid: str, key: GroupKey | None = None) -> GroupInfo:
        _no_group_key(key)
        return await self._join(gid, create=False)

    async def leave_group(self, gid: str) -> None:
        await super().leave_group(gid)

    async def _join(self, gid: str, *, create: bool) -> GroupInfo:
        if not gid:
            raise UsageError("a group needs a name")
        node = self.node
        group = await (node.create_group(gid) if create
                       else node.join(gid, timeout=self.join_timeout))
        loop = asyncio.get_running_loop()
        end = loop.time() + self.join_timeout
        while gid not in {g.gid for g in node.joined()} and loop.time() < end:
            await asyncio.sleep(_POLL)  # (create_group waits 5 s: an election may be slower)
        if gid not in {g.gid for g in node.joined()}:
            cells = ", ".join(urlsplit(c).netloc for c in self.cells)
            raise UsageError(f"no host let us join within {self.join_timeout:g} s "
                             f"(cells {cells}); are the hosts running, and is this the "
                             "deployment key they use (or none if they use none)? "
                             "Still trying.")
        self._read_group(group)
        return self._info_of(group)

    # -------------------------------------------------------------- internals

    async def _watch_presence(self) -> None:
        # The hosts expel members they stop hearing from: the view is who is heard from.
        while True:
            await asyncio.sleep(PRESENCE_REFRESH)
            for info in self.node.joined():
                for pid in self.node.members(info.gid):
                    await self._queue.put(MemberSeen(info.gid, pid))

    def _translate(self, event: GroupEvent) -> list[BackendEvent]:
        match event:
            case NodeMemberLeft(gid=gid, pid=pid):
                left = self._left.setdefault(gid, {})
                left.pop(pid, None)
                left[pid] = None
                if len(left) > MAX_LEFT:
                    del left[next(iter(left))]
            case NodeMemberJoined(gid=gid, pid=pid):
                self._left.get(gid, {}).pop(pid, None)
            case MessagesSkipped(gid=gid, count=count):
                return [BackendNotice(f"{count} earlier message{'s' if count != 1 else ''} "
                                      "of this group are gone: the hosts no longer keep them",
                                      gid)]
            case Rejoined(reason=RejoinReason.SEQUENCE_LOST):
                return [BackendNotice("the hosts lost their log (every one restarted without "
                                      "its data): joined again, older messages are gone")]
            case Rejoined():
                return [BackendNotice("the hosts had let this device go (asleep or not "
                                      "reading for too long): joined again, catching up")]
        return super()._translate(event)


register_variant(INFRA_VARIANT, InfraChatBackend)  # M2MCBackend(config) builds it for --infra
