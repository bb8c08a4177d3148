"""The application API of M2MC: an asyncio :class:`Node` with :class:`Group` handles.

>>> async def main() -> None:                                    # doctest: +SKIP
...     async with Node(NodeConfig(channel="mem://demo")) as node:
...         group = await node.create_group("threaded chat")
...         first = await group.send(b"Did you visit Delhi?")
...         await group.send(b"Yes", reply_to=first)
...         async for message in group:
...             print(message.sender, message.text)

The seed's ``ApplGrpMngrInterface`` callbacks (seeds/000 IX.E) arrive as
events from :meth:`Node.events`: :class:`~m2mc.group.events.GroupDiscovered`,
:class:`~m2mc.group.events.MemberJoined`, :class:`~m2mc.group.events.MemberLeft`,
:class:`~m2mc.group.events.MemberNamed` (a member's display name),
:class:`~m2mc.group.events.CatchUpProgress`, :class:`~m2mc.group.events.GroupCreated`,
:class:`~m2mc.group.events.Reconnected` (back in range),
:class:`~m2mc.group.events.Rejoined` (infrastructure mode: the hosts ended the membership).
Messages come from the group handles, in the group's order. For scripts
without asyncio see :mod:`m2mc.api.sync` (:class:`SyncNode`). docs/api.md
documents all of it.

This package is the API's one import path; its modules hold the parts by concern:
:mod:`.config` (:class:`NodeConfig`), :mod:`.message` (:class:`GroupMessage`),
:mod:`.node` (the :class:`Node` and :class:`Group` every mode implements, and the
registry of modes ``Node(config)`` picks from), :mod:`.adhoc` (ad hoc mode, with
:mod:`.streams` and :mod:`.inbox`), :mod:`.infra` (infrastructure mode, with
:mod:`.infra_groups`) and :mod:`.sync` (:class:`SyncNode`). Importing the package
imports both modes, which is what registers them with :class:`Node`.
"""

from __future__ import annotations

from m2mc.api import infra as infra  # registers mode "infra" (InfraNode)
from m2mc.api.adhoc import AdhocGroup, AdhocNode  # registers mode "adhoc"
from m2mc.api.config import KeyArg, NodeConfig
from m2mc.api.message import GroupMessage, ReplyTo
from m2mc.api.node import Group, Node, node_class
from m2mc.api.streams import StreamError, StreamReader
from m2mc.errors import UsageError
from m2mc.kinds import NodeMode, Order
from m2mc.security.keys import GroupKey

__all__ = ["AdhocGroup", "AdhocNode", "Group", "GroupKey", "GroupMessage", "KeyArg", "Node",
           "NodeConfig", "NodeMode", "Order", "ReplyTo", "StreamError", "StreamReader",
           "UsageError", "node_class"]
