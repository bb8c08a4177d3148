"""An order in which a node's log can be read back: the one its group guarantees.

The durable log keeps messages in the order they first arrived, which is not the
order they were delivered in: a reply that overtook its parent, a message that came
before the one it causally follows, or (total order) any message that reached this
node before the sequencer numbered it, is stored ahead of what it was delivered
after. ``history()`` reads the log back through :func:`replay_order` so that an
application replaying it sees an order its group allows (docs/api.md):

* total order: by ``gseq``, the order every member delivered;
* otherwise, causes first: a message after its parent (S_b), after its sender's
  previous message (FIFO) and after every message its vector clock counts (causal),
  when those are in the list (retention may have evicted them); among messages free
  to come next, the stored order (arrival, which is what a node delivers in when
  nothing is missing). Causal order implies the S_b and FIFO rules, so one order
  serves every group.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from m2mc.ordering.ids import ROOT, Message, MessageId

__all__ = ["replay_order"]


def replay_order(messages: Sequence[Message]) -> list[Message]:
    """``messages`` (as stored) in an order their group's guarantee allows."""
    if messages and all(m.gseq is not None for m in messages):
        return sorted(messages, key=lambda m: m.gseq or 0)
    index = {m.mid: i for i, m in enumerate(messages)}
    waiting_on = [0] * len(messages)
    followers: dict[int, list[int]] = {}
    for i, m in enumerate(messages):
        for cause in set(_causes(m)):
            j = index.get(cause)
            if j is not None and j != i:
                waiting_on[i] += 1
                followers.setdefault(j, []).append(i)
    ready = [i for i, n in enumerate(waiting_on) if n == 0]
    heapq.heapify(ready)
    out: list[Message] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(messages[i])
        for k in followers.get(i, ()):
            waiting_on[k] -= 1
            if waiting_on[k] == 0:
                heapq.heappush(ready, k)
    if len(out) < len(messages):  # a cycle: only forged causes make one; keep the rest
        placed = {id(m) for m in out}
        out.extend(m for m in messages if id(m) not in placed)
    return out


def _causes(m: Message) -> Iterator[MessageId]:
    if m.parent != ROOT:
        yield m.parent
    if m.mid.seq > 1:
        yield MessageId(m.mid.pid, m.mid.seq - 1)
    if m.vclock:
        for pid, count in m.vclock.items():
            if pid != m.mid.pid and count > 0:
                yield MessageId(pid, count)
