"""The chat in infrastructure mode: :class:`InfraChatBackend` over an infra-mode node.

``m2mc chat --infra CELLS`` attaches this participant as a member to the hosts of
seeds/001 and 004 (``m2mc host``, docs/infra.md) through the same application API
as ad hoc mode (``m2mc.api.Node(NodeConfig(mode="infra", hosts=cells))``). What
differs, and how the chat shows it (each item is part of :data:`INFRA_LIMITS`):

- **One group.** seeds/001 serves one group per deployment and has no GJLP, so the
  browser lists that group (gid ``infra``) from the start; creating a group or
  joining any name joins it.
- **No durable log.** A member delivers from its join on (seeds/001 3.3) and keeps
  nothing, so there is no catch-up of older messages and nothing after a restart.
- **Members.** The coordinator's view changes after our join arrive as
  joined/left/expelled records; members who joined earlier appear once they write.
  Hosts expel members they stop hearing from, so every member of the view counts
  as heard from, refreshed every :data:`PRESENCE_REFRESH` seconds.
- **Identity.** Each run is a fresh incarnation ``<device id>.<6 hex digits>``: the
  member numbers its messages from 1 in every run and keeps no log, so reusing the
  bare device id would reuse message ids the others already hold, and they would
  drop the new messages as duplicates.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

from m2mc.api import Group, GroupKey, Node, NodeConfig
from m2mc.errors import ConfigError, UsageError
from m2mc.group.codec import GrpInfo
from m2mc.group.events import GroupEvent
from m2mc.group.events import MemberJoined as NodeMemberJoined
from m2mc.group.events import MemberLeft as NodeMemberLeft
from m2mc_chat.backend import (
    BackendEvent,
    BackendLimits,
    BackendNotice,
    Delivered,
    GroupInfo,
    MemberSeen,
)
from m2mc_chat.backend_m2mc import M2MCBackend
from m2mc_chat.config import ChatConfig, infra_cells

__all__ = ["INFRA_DESC", "INFRA_GID", "INFRA_LIMITS", "InfraChatBackend", "describe_infra"]

INFRA_GID = "infra"
INFRA_DESC = "the hosts' group"
INFRA_LIMITS = BackendLimits(
    one_group=True, durable_history=False,
    notice="infrastructure mode: the hosts serve one group; no history from before you joined")
JOIN_TIMEOUT = 15.0
"""Seconds to wait for the coordinator to let us in (an election may be under way)."""
PRESENCE_REFRESH = 5.0
"""Seconds between refreshes of the view's members as heard from."""
MAX_LEFT = 4096
"""Members remembered as having left (a bound: the view is the hosts', not ours)."""
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
        self.pid = f"{config.device_id}.{secrets.token_hex(3)}"
        base = node_config or NodeConfig()
        self._node_config = replace(base, mode="infra", hosts=base.hosts or self.cells,
                                    pid=self.pid,
                                    infra_key=config.infra_key or base.infra_key,
                                    metrics=config.metrics or base.metrics)
        self.join_timeout = JOIN_TIMEOUT
        self._left: dict[str, None] = {}   # insertion-ordered: the oldest is dropped first
        self._leaving = False
        self._setup(Node(self._node_config))

    @property
    def node_id(self) -> str:
        return self.pid

    @property
    def mode(self) -> str:
        return describe_infra(self.cells)

    # ---------------------------------------------------------------- queries

    def _is_member(self) -> bool:
        return bool(self.node.joined())

    def _group_info(self) -> GroupInfo:
        members = tuple(self.node.members(INFRA_GID))
        left = tuple(pid for pid in self._left if pid not in members)
        # Sealed frames with a deployment key (issue 9) when the node has one.
        authenticated = getattr(self.node, "authenticated", False) is True
        return GroupInfo(INFRA_GID, INFRA_DESC, members, left, authenticated=authenticated,
                         key_held=authenticated)

    def _info_of(self, group: Group) -> GroupInfo:
        return self._group_info()

    def joined_groups(self) -> list[GroupInfo]:
        return [self._group_info()] if self._is_member() else []

    def known_groups(self) -> list[GroupInfo]:
        return [self._group_info()]

    def _locked(self) -> list[GrpInfo]:
        return []     # no group keys in infrastructure mode

    async def history(self, gid: str) -> list[Delivered]:
        return []   # no durable log in infrastructure mode (INFRA_LIMITS)

    # --------------------------------------------------------------- commands

    async def create_group(self, desc: str, key: GroupKey | None = None) -> GroupInfo:
        _no_group_key(key)
        info = await self._join()
        if desc.strip() not in ("", INFRA_DESC, INFRA_GID):
            await self._queue.put(BackendNotice(
                f"the hosts serve one group: joined it ({desc.strip()!r} is not a group "
                "of its own)", INFRA_GID))
        return info

    async def join_group(self, gid: str, key: GroupKey | None = None) -> GroupInfo:
        _no_group_key(key)
        return await self._join()

    async def leave_group(self, gid: str) -> None:
        self._leaving = True
        await super().leave_group(INFRA_GID)

    async def _join(self) -> GroupInfo:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.join_timeout
        # A LEAVE still under way would make the node report us as a member at once.
        while self._phase() in ("leaving", "closing") and loop.time() < end:
            await asyncio.sleep(_POLL)
        self._leaving = False
        group = await self.node.join(INFRA_GID, timeout=max(0.0, end - loop.time()))
        if not self._is_member():
            cells = ", ".join(urlsplit(c).netloc for c in self.cells)
            raise UsageError(f"no host let us join within {self.join_timeout:g} s "
                             f"(cells {cells}); are the hosts running, and is this the "
                             "deployment key they use (or none if they use none)? "
                             "Still trying.")
        self._read_group(group)
        return self._group_info()

    # -------------------------------------------------------------- internals

    def _phase(self) -> str:
        """The member's phase (``idle``, ``joining``, ``member``, ``leaving``, ...)."""
        core = getattr(getattr(self.node, "driver", None), "core", None)
        return str(getattr(getattr(core, "phase", None), "value", ""))

    async def _watch_presence(self) -> None:
        # The hosts expel members they stop hearing from: the view is who is heard from.
        while True:
            await asyncio.sleep(PRESENCE_REFRESH)
            if self._is_member():
                for pid in self.node.members(INFRA_GID):
                    await self._queue.put(MemberSeen(INFRA_GID, pid))

    def _translate(self, event: GroupEvent) -> list[BackendEvent]:
        out: list[BackendEvent] = []
        match event:
            case NodeMemberLeft(pid=pid):
                self._left.pop(pid, None)
                self._left[pid] = None
                if len(self._left) > MAX_LEFT:
                    del self._left[next(iter(self._left))]
                if pid == self.pid and not self._leaving:
                    out.append(BackendNotice("the hosts stopped counting this member "
                                             "(not heard from); joining again", INFRA_GID))
            case NodeMemberJoined(pid=pid):
                self._left.pop(pid, None)
        return [*super()._translate(event), *out]
