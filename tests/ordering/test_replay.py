"""history()'s read-back order (m2mc.ordering.replay): whatever order the log stored a
node's messages in, they come back in an order their group's guarantee allows."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from m2mc.ordering import ROOT, Message, MessageId
from m2mc.ordering.replay import replay_order


def a_chat(seed: int, senders: int, count: int, causal: bool) -> list[Message]:
    """A group's messages in an order they could be delivered in (causes first): each
    answers an earlier one or nobody; with ``causal``, each carries its vector clock."""
    rng = random.Random(seed)
    pids = [f"p{i}" for i in range(senders)]
    seen: dict[str, int] = dict.fromkeys(pids, 0)
    out: list[Message] = []
    for _ in range(count):
        pid = rng.choice(pids)
        seen[pid] += 1
        parent = rng.choice(out).mid if out and rng.random() < 0.6 else ROOT
        out.append(Message(MessageId(pid, seen[pid]), parent,
                           vclock=dict(seen) if causal else None))
    return out


def causes_first(order: list[Message], causal: bool) -> bool:
    place = {m.mid: i for i, m in enumerate(order)}
    for i, m in enumerate(order):
        causes = [m.parent, MessageId(m.mid.pid, m.mid.seq - 1)]
        if causal and m.vclock:
            causes += [MessageId(p, c) for p, c in m.vclock.items() if p != m.mid.pid]
        if any(place.get(c, -1) > i for c in causes):
            return False
    return True


@given(st.integers(0, 10**6), st.integers(1, 5), st.integers(0, 40), st.booleans(),
       st.floats(0, 1))
def test_any_stored_order_reads_back_causes_first(seed: int, senders: int, count: int,
                                                  causal: bool, evicted: float) -> None:
    delivered = a_chat(seed, senders, count, causal)
    rng = random.Random(seed + 1)
    stored = [m for m in delivered if rng.random() >= evicted * 0.3]  # retention's gaps
    rng.shuffle(stored)  # arrival order: anything
    back = replay_order(stored)
    assert sorted(back, key=str) == sorted(stored, key=str)  # every one, once
    assert causes_first(back, causal)


def test_nothing_missing_reads_back_as_stored() -> None:
    delivered = a_chat(7, 3, 30, causal=True)
    assert replay_order(delivered) == delivered


def test_total_order_reads_back_by_gseq() -> None:
    stored = [Message(MessageId("b", 1), gseq=3), Message(MessageId("a", 1), gseq=1),
              Message(MessageId("a", 2), gseq=2)]
    assert [m.gseq for m in replay_order(stored)] == [1, 2, 3]


def test_a_reply_stored_before_its_parent_comes_after_it() -> None:
    parent = Message(MessageId("a", 1))
    reply = Message(MessageId("b", 1), parent.mid)
    other = Message(MessageId("c", 1))
    assert replay_order([reply, other, parent]) == [other, parent, reply]
