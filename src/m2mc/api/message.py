"""The message the application API hands out, :class:`GroupMessage`, and what a
reply may name (split from :mod:`m2mc.api`, which re-exports them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from m2mc.errors import DecodeError, UsageError
from m2mc.group.stream_codec import STREAM_MAGIC
from m2mc.native import bind_group_message, fast_constructor
from m2mc.ordering import ROOT, Message, MessageId

__all__ = ["TAKE_MESSAGES", "GroupMessage", "ReplyTo", "make_message"]


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

    @property
    def is_stream(self) -> bool:
        """A message sent with ``send_stream``: its ``data`` is only a descriptor; read
        its body with ``group.stream(message)`` (docs/api.md)."""
        return self.data.startswith(STREAM_MAGIC)


GroupMessage.__module__ = "m2mc.api"  # where applications import it from

ReplyTo = GroupMessage | MessageId | str | None
make_message: Callable[[str, MessageId, MessageId, bytes, int | None], GroupMessage] = (
    fast_constructor(GroupMessage))


TAKE_MESSAGES: Callable[[Any, int, str, list[GroupMessage]], int] | None = (
    bind_group_message(GroupMessage))
"""Pops that many Messages off a deque into a list as GroupMessages of a group, in C;
returns how many (fewer at an item that is no Message). None: pure Python."""


def _parent(reply_to: ReplyTo) -> MessageId:
    if reply_to is None:
        return ROOT
    if isinstance(reply_to, GroupMessage):
        return reply_to.mid
    if isinstance(reply_to, Message):
        return reply_to.mid
    if isinstance(reply_to, str):
        try:
            return MessageId.parse(reply_to)
        except DecodeError as exc:  # the application's argument, not a peer's bytes
            raise UsageError(f"bad reply_to: {exc}") from None
    return reply_to
