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
  oldest unread own messages are dropped (counted) until the rest fit (down to half
  the bound when others' messages are older than them: :meth:`Inbox._drop_oldest_own`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from m2mc.api.message import TAKE_MESSAGES, GroupMessage, make_message
from m2mc.ordering import ROOT, Message
from m2mc.ordering.ids import make_mid

__all__ = ["OWN_OVERHEAD", "Inbox"]

# What an unread own message counts for against max_queued_own_bytes besides its
# payload: about what its Message, MessageId and bytes objects take in memory.
OWN_OVERHEAD = 128

# An own message as the inbox keeps it: (seq, parent pid, parent seq, payload, gseq).
# A publisher that never reads keeps up to max_queued_own_bytes of them (73,000 of 100
# bytes by default): as Message objects the garbage collector traversed all of them,
# and their pairs of objects, in every full collection (15 to 30 ms each, measured
# 2026-11-26, the p99 latency of bench/peers.py); a tuple of numbers and bytes is
# left out of collections once it has survived one.
_Own = tuple[int, str, int, bytes, "int | None"]


class Inbox:
    """One group's delivered, unread messages, in the group's order."""

    __slots__ = ("deliver_own", "messages", "own", "own_bytes", "own_dropped", "own_limit",
                 "pid")

    def __init__(self, pid: str, *, deliver_own: bool = True,
                 own_limit: int = 16 << 20) -> None:
        self.pid = pid
        self.deliver_own = deliver_own
        self.own_limit = own_limit  # bytes (payload + OWN_OVERHEAD each) of unread own ones
        self.messages: deque[Message | _Own] = deque()
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
        if len(mine) == len(batch):
            self.messages.extend([(m.mid.seq, m.parent.pid, m.parent.seq, m.payload, m.gseq)
                                  for m in batch])
        else:
            self.messages.extend([(m.mid.seq, m.parent.pid, m.parent.seq, m.payload, m.gseq)
                                  if m.mid.pid == pid else m for m in batch])
        self.own += len(mine)
        self.own_bytes += sum([len(m.payload) for m in mine]) + OWN_OVERHEAD * len(mine)
        return self._drop_oldest_own() if self.own_bytes > self.own_limit else 0

    def pop(self, gid: str) -> GroupMessage:
        """The next message, as the application gets it."""
        m = self.messages.popleft()
        if isinstance(m, tuple):
            return self._own_message(gid, m)
        return make_message(gid, m.mid, m.parent, m.payload, m.gseq)

    def take(self, gid: str, count: int, out: list[GroupMessage]) -> None:
        """Move the next ``count`` messages to ``out`` as GroupMessages of group ``gid``:
        the per-message cost of every delivery to the application, so the constructor
        is m2mc.native's fast builder, or the loop is in C (``TAKE_MESSAGES``) when no own
        message is queued."""
        append = out.append
        make = make_message
        popleft = self.messages.popleft
        if self.own:
            own_message = self._own_message
            for _ in range(count):
                m = popleft()
                if isinstance(m, tuple):
                    append(own_message(gid, m))
                else:
                    append(make(gid, m.mid, m.parent, m.payload, m.gseq))
            return
        take = TAKE_MESSAGES
        if take is not None:  # in C (m2mc.native): all are Messages, none own
            count -= take(self.messages, count, gid, out)
        others: Callable[[], Message] = popleft  # type: ignore[assignment]  # (no own queued)
        for _ in range(count):
            m = others()
            append(make(gid, m.mid, m.parent, m.payload, m.gseq))

    def _own_message(self, gid: str, m: _Own) -> GroupMessage:
        seq, ppid, pseq, payload, gseq = m
        self.own -= 1
        self.own_bytes -= len(payload) + OWN_OVERHEAD
        return make_message(gid, make_mid(self.pid, seq),
                            make_mid(ppid, pseq) if ppid else ROOT, payload, gseq)

    def _drop_oldest_own(self) -> int:
        """Drop the oldest unread own messages until they fit ``own_limit`` again.
        The usual case, a publisher that never reads (its oldest unread messages are
        its own), costs only the messages dropped, a few at a time; otherwise one pass
        over the queue drops them down to half the bound (so that pass comes once per
        half a bound of own messages)."""
        messages = self.messages
        dropped = 0
        while self.own_bytes > self.own_limit and messages and isinstance(messages[0], tuple):
            m = messages.popleft()
            assert isinstance(m, tuple)  # (checked above)
            self.own -= 1
            self.own_bytes -= len(m[3]) + OWN_OVERHEAD
            dropped += 1
        if self.own_bytes > self.own_limit:
            dropped += self._drop_own_anywhere()
        self.own_dropped += dropped
        return dropped

    def _drop_own_anywhere(self) -> int:
        """One pass over the queue: the oldest own messages go until the rest count for
        half of ``own_limit``."""
        target = self.own_limit // 2
        kept: deque[Message | _Own] = deque()
        dropped = 0
        for m in self.messages:
            if self.own_bytes > target and isinstance(m, tuple):
                self.own -= 1
                self.own_bytes -= len(m[3]) + OWN_OVERHEAD
                dropped += 1
                continue
            kept.append(m)
        self.messages = kept
        return dropped
