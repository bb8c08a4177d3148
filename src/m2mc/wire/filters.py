"""The message filters of :class:`~m2mc.wire.m2mp.M2MPLayer` (seeds/002 2.3): the
prefixes a message must start with to be delivered here, and the IDs of messages
filtered out at their first fragment (their later fragments are counted as
filtered, not as duplicates); and who is told of each message turned away (the group
layer learns so of groups never described to it: m2mc.group.unknown_groups). One
object, shared by the layer's receive loop, its run ends (:mod:`m2mc.wire.run_end`)
and its streams (:mod:`m2mc.wire.stream_layer`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["MessageFilters"]


class MessageFilters:
    """The filters, and the IDs of the messages they turned away (bounded)."""

    __slots__ = ("_filtered_order", "_list", "_remembered", "accept_all", "filtered_ids",
                 "longest", "prefixes", "watcher")

    def __init__(self, remembered: int) -> None:
        self._list: list[bytes] = []
        self.prefixes: tuple[bytes, ...] = ()  # the filters, as bytes.startswith takes them
        self.longest = 0  # the longest filter's length
        self.accept_all = False  # an empty filter: every message matches
        # IDs of messages filtered out at their first fragment (at most `remembered`,
        # oldest forgotten first).
        self.filtered_ids: set[int] = set()
        self._filtered_order: deque[int] = deque()
        self._remembered = remembered
        # Told of each message turned away, once: (its first bytes, at least ``longest``
        # of them, or the whole message; the time).
        self.watcher: Callable[[bytes, float], None] | None = None

    def add(self, prefix: bytes) -> None:
        """Register a message filter; an empty prefix matches everything."""
        if prefix not in self._list:
            self._list.append(bytes(prefix))
            self._refresh()

    def remove(self, prefix: bytes) -> None:
        if prefix in self._list:
            self._list.remove(prefix)
            self._refresh()

    @property
    def registered(self) -> tuple[bytes, ...]:
        return tuple(self._list)

    def matches(self, message: bytes) -> bool:
        if self.accept_all:
            return True
        return message.startswith(self.prefixes)

    def _refresh(self) -> None:
        self.prefixes = tuple(self._list)
        self.accept_all = b"" in self._list
        self.longest = max((len(p) for p in self._list), default=0)

    def remember_filtered(self, message_id: int, head: bytes, now: float) -> None:
        """``message_id`` was filtered out (``head``: its first bytes, at least ``longest``
        or all of it): its later fragments are not duplicates."""
        if message_id in self.filtered_ids:
            return
        if self.watcher is not None:
            self.watcher(head, now)
        self.filtered_ids.add(message_id)
        self._filtered_order.append(message_id)
        if len(self._filtered_order) > self._remembered:
            self.filtered_ids.discard(self._filtered_order.popleft())
