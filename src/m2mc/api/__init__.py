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
:mod:`.infra_groups`) and :mod:`.sync` (:class:`SyncNode`). The package registers
each mode's factory with :class:`Node` (:func:`~m2mc.api.node.register_mode`);
infrastructure mode's module is imported by its factory, at the first
infrastructure node, so an ad hoc program never loads it.
"""

from __future__ import annotations

from m2mc.api.adhoc import AdhocGroup, AdhocNode
from m2mc.api.config import KeyArg, NodeConfig
from m2mc.api.message import GroupMessage, ReplyTo
from m2mc.api.node import Group, Node, node_class, register_mode
from m2mc.api.streams import StreamError, StreamReader
from m2mc.errors import UsageError
from m2mc.group.config import GroupConfig
from m2mc.kinds import NodeMode, Order
from m2mc.security.keys import GroupKey

__all__ = ["AdhocGroup", "AdhocNode", "Group", "GroupConfig", "GroupKey", "GroupMessage",
           "KeyArg", "Node",
           "NodeConfig", "NodeMode", "Order", "ReplyTo", "StreamError", "StreamReader",
           "UsageError", "node_class"]


def _infra_node() -> type[Node]:
    # Imported by the first infrastructure node, not by `import m2mc.api`: its member
    # core, codec and driver would cost every ad hoc program a third more start-up
    # (~0.12 s on top of ~0.3 s, measured with compiled bytecode).
    from m2mc.api.infra import InfraNode

    return InfraNode


register_mode(NodeMode.ADHOC, lambda: AdhocNode)
register_mode(NodeMode.INFRA, _infra_node)
