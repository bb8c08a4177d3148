"""The message the application API hands out, :class:`GroupMessage`, and what a
reply may name (split from :mod:`m2mc.api`, which re-exports them)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from m2mc.group.fastobj import fast_constructor, slot_twin
from m2mc.ordering import ROOT, Message, MessageId

__all__ = ["GroupMessage", "ReplyTo"]


@dataclass(frozen=True, slots=True)
class GroupMessage:
    """A message delivered to the application (``sendMsg2Appl``)."""

    gid: str
    mid: MessageId
    parent: MessageId
    data: bytes
    gseq: int | None = None

    @property
    def sender(self) -> str:
        return self.mid.pid

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")

    @property
    def is_reply(self) -> bool:
        return not self.parent.is_root


ReplyTo = GroupMessage | MessageId | str | None
_make_message: Callable[[str, MessageId, MessageId, bytes, int | None], GroupMessage] = (
    fast_constructor(GroupMessage))
_GroupMessageTwin = slot_twin(GroupMessage)


def _take_messages(queue: deque[Message], gid: str, count: int, out: list[GroupMessage]) -> None:
    """Move ``count`` messages of group ``gid`` from ``queue`` to ``out`` as GroupMessages:
    the per-message cost of every delivery to the application, so the constructor
    is inline (fastobj's twin of GroupMessage)."""
    popleft = queue.popleft
    append = out.append
    twin = _GroupMessageTwin
    if twin is None:  # pragma: no cover - GroupMessage without slots
        for _ in range(count):
            m = popleft()
            append(_make_message(gid, m.mid, m.parent, m.payload, m.gseq))
        return
    for _ in range(count):
        m = popleft()
        g = twin()
        g.gid = gid
        g.mid = m.mid
        g.parent = m.parent
        g.data = m.payload
        g.gseq = m.gseq
        g.__class__ = GroupMessage
        append(g)


def _parent(reply_to: ReplyTo) -> MessageId:
    if reply_to is None:
        return ROOT
    if isinstance(reply_to, GroupMessage):
        return reply_to.mid
    if isinstance(reply_to, Message):
        return reply_to.mid
    if isinstance(reply_to, str):
        return MessageId.parse(reply_to)
    return reply_to
