"""Per group, the messages a node delivered that its application has not read yet.

An :class:`Inbox` holds one group's unread messages as the group
layer gave them (each becomes a GroupMessage when the application takes it) and
keeps the node's *own* messages apart in its accounting:

* other members' messages are what ``NodeConfig.max_queued_messages`` bounds: at the
  bound the node stops reading the network until the application catches up
  (:meth:`Inbox.others`);
* the node's own messages never pause it (a publisher that never reads must not stop
  its node, docs/decisions.md). With ``deliver_own`` off they are not queued at all;
  with it on they are bounded on their own by ``max_queued_own_bytes``: past it the
  oldest unread own messages are dropped (counted), down to half the bound.
"""

from __future__ import annotations

from collections import deque

from m2mc.api_message import GroupMessage, make_message
from m2mc.ordering import Message

__all__ = ["OWN_OVERHEAD", "Inbox"]

# What an unread own message counts for against max_queued_own_bytes besides its
# payload: about what its Message, MessageId and bytes objects take in memory.
OWN_OVERHEAD = 128


class Inbox:
    """One group's delivered, unread messages, in the group's order."""

    __slots__ = ("deliver_own", "messages", "own", "own_bytes", "own_dropped", "own_limit",
                 "pid")

    def __init__(self, pid: str, *, deliver_own: bool = True,
                 own_limit: int = 16 << 20) -> None:
        self.pid = pid
        self.deliver_own = deliver_own
        self.own_limit = own_limit  # bytes (payload + OWN_OVERHEAD each) of unread own ones
        self.messages: deque[Message] = deque()
        self.own = 0  # own messages among ``messages``
        self.own_bytes = 0  # what they count for against own_limit
        self.own_dropped = 0  # own messages dropped unread at own_limit

    def __len__(self) -> int:
        return len(self.messages)

    def others(self) -> int:
        """Unread messages of other members: what ``max_queued_messages`` bounds."""
        return len(self.messages) - self.own

    def add(self, batch: list[Message]) -> int:
        """Queue ``batch`` (delivered in this order). Returns how many unread own
        messages were dropped to make room (0 unless past ``own_limit``)."""
        pid = self.pid
        mine = [m for m in batch if m.mid.pid == pid]
        if not mine:
            self.messages.extend(batch)
            return 0
        if not self.deliver_own:
            self.messages.extend([m for m in batch if m.mid.pid != pid])
            return 0
        self.messages.extend(batch)
        self.own += len(mine)
        self.own_bytes += sum([len(m.payload) for m in mine]) + OWN_OVERHEAD * len(mine)
        return self._drop_oldest_own() if self.own_bytes > self.own_limit else 0

    def pop(self) -> Message:
        m = self.messages.popleft()
        if self.own and m.mid.pid == self.pid:
            self.own -= 1
            self.own_bytes -= len(m.payload) + OWN_OVERHEAD
        return m

    def take(self, gid: str, count: int, out: list[GroupMessage]) -> None:
        """Move the next ``count`` messages to ``out`` as GroupMessages of group ``gid``:
        the per-message cost of every delivery to the application, so the constructor
        is m2mc.fastobj's."""
        append = out.append
        make = make_message
        if self.own:
            for _ in range(count):
                m = self.pop()
                append(make(gid, m.mid, m.parent, m.payload, m.gseq))
            return
        popleft = self.messages.popleft
        for _ in range(count):
            m = popleft()
            append(make(gid, m.mid, m.parent, m.payload, m.gseq))

    def _drop_oldest_own(self) -> int:
        """Drop the oldest unread own messages until they count for half of own_limit
        (so this pass over the queue comes once per half a bound of own messages)."""
        pid = self.pid
        target = self.own_limit // 2
        kept: deque[Message] = deque()
        dropped = 0
        for m in self.messages:
            if self.own_bytes > target and m.mid.pid == pid:
                self.own -= 1
                self.own_bytes -= len(m.payload) + OWN_OVERHEAD
                dropped += 1
                continue
            kept.append(m)
        self.messages = kept
        self.own_dropped += dropped
        return dropped
