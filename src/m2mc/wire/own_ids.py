"""The message IDs a layer has sent, kept to spot their looped-back copies, which are
never delivered to ourselves (seeds/002 2.3), and forgotten when they can no longer come.

A copy of one of our packets comes back within milliseconds of being sent (loopback,
the daemon, a second interface). An ID is therefore forgotten, oldest first:

* once ``cap`` IDs are kept (``own_id_cache``), as before, whatever their age; and
* once every packet of its message had been handed to the driver more than ``age``
  ago (the message timeout: a receiver abandons a message whose next packet is
  later than that, so a copy that late would be abandoned by anyone).

The second rule keeps a long-lived sender's memory flat: without it a node kept the
last 65,536 IDs whatever its rate, which a chat fills in hours and holds for good
(docs/decisions.md, "Caches of message IDs forget by age too"). The layer cannot
see when each message's last packet leaves, only when its send queue is empty, so
it reports that moment (:meth:`OwnIds.queue_empty`): every message registered before
an empty queue had all its packets handed over by then, except one still being
written in pieces (a stream), which stays.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Container

__all__ = ["OwnIds"]


class OwnIds:
    """Our message IDs (:attr:`ids`, a live set for the receive path), oldest first."""

    __slots__ = ("_age", "_forgotten", "_marks", "_writing", "cap", "ids", "next_check",
                 "order")

    def __init__(self, cap: int, age: float, writing: Container[int]) -> None:
        # The layer's send path adds to both itself (inline: once per message), then
        # calls forget_oldest past cap.
        self.ids: set[int] = set()
        self.order: deque[int] = deque()
        self.cap = cap
        self._age = age
        self._writing = writing  # IDs of messages still being written (kept past age)
        # IDs popped from order so far: the one at order[0] is the (_forgotten + 1)th
        # registered, and _forgotten + len(order) have been registered in all.
        self._forgotten = 0
        # (time the send queue was seen empty, IDs registered by then), oldest first.
        self._marks: deque[tuple[float, int]] = deque()
        # The layer calls queue_empty only from this time on (a mark every age/4).
        self.next_check = float("-inf")

    def __len__(self) -> int:
        return len(self.ids)

    def new(self, rng: random.Random, taken: Container[int] = ()) -> int:
        """A fresh random 32-bit ID, neither ours already nor in ``taken``; kept."""
        ids = self.ids
        getrandbits = rng.getrandbits
        message_id = getrandbits(32)
        while message_id in ids or message_id in taken:
            message_id = getrandbits(32)
        ids.add(message_id)
        self.order.append(message_id)
        if len(self.order) > self.cap:
            self.forget_oldest()
        return message_id

    def queue_empty(self, now: float) -> None:
        """The layer's send queue is empty at ``now`` (call when ``now >= next_check``):
        mark it, and forget the IDs registered before a mark older than ``age``."""
        marks = self._marks
        marks.append((now, self._forgotten + len(self.order)))
        self.next_check = now + self._age / 4
        horizon = now - self._age
        sent = -1
        while marks[0][0] <= horizon:
            sent = marks.popleft()[1]
        if sent > self._forgotten:
            self._forget_until(sent)

    def forget_oldest(self) -> None:
        """Forget the oldest IDs past ``cap``."""
        order, ids = self.order, self.ids
        while len(order) > self.cap:
            ids.discard(order.popleft())
            self._forgotten += 1

    def _forget_until(self, position: int) -> None:
        order, ids, writing = self.order, self.ids, self._writing
        while self._forgotten < position and order:
            message_id = order.popleft()
            self._forgotten += 1
            if message_id in writing:  # a stream still being written: keep it, as new
                order.append(message_id)
            else:
                ids.discard(message_id)
