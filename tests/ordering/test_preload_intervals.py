"""``preload_intervals`` (a whole interval marked delivered at once: what a restart
after eviction and a skip do) is ``preload`` of every message in it, at a cost that
does not grow with the interval; ``IntervalList.add_range`` is adding each value."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering import ROOT, CausalOrder, FifoOrder, Message, MessageId, SbOrder
from m2mc.ordering.base import CoreBase
from m2mc.ordering.intervals import IntervalList

SENDERS = ("a", "b", "c")


@given(st.lists(st.integers(1, 60), max_size=40), st.integers(1, 60), st.integers(0, 30))
def test_add_range_is_adding_each_value(values: list[int], lo: int, span: int) -> None:
    one_by_one = IntervalList(values)
    at_once = IntervalList(values)
    for v in range(lo, lo + span + 1):
        one_by_one.add(v)
    at_once.add_range(lo, lo + span)
    assert at_once.intervals() == one_by_one.intervals()


def history(n: int, rng: random.Random, causal: bool) -> list[Message]:
    out: list[Message] = []
    counts = dict.fromkeys(SENDERS, 0)
    for _ in range(n):
        sender = rng.choice(SENDERS)
        counts[sender] += 1
        parent = rng.choice([ROOT, *(m.mid for m in out[-5:])])
        clock = {p: c for p, c in counts.items() if c} if causal else None
        out.append(Message(MessageId(sender, counts[sender]), parent, b"", clock))
    return out


def make(kind: str) -> CoreBase:
    return {"sb": SbOrder, "fifo": FifoOrder, "causal": CausalOrder}[kind]()


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["sb", "fifo", "causal"]), seed=st.integers(0, 10_000),
       n=st.integers(1, 30), received=st.integers(0, 30),
       marked=st.dictionaries(st.sampled_from(SENDERS),
                              st.lists(st.tuples(st.integers(1, 12), st.integers(0, 4)),
                                       max_size=3), max_size=3))
def test_preload_intervals_is_preload_of_every_message_in_them(
        kind: str, seed: int, n: int, received: int,
        marked: dict[str, list[tuple[int, int]]]) -> None:
    rng = random.Random(seed)
    sent = history(n, rng, kind == "causal")
    arrival = list(sent)
    rng.shuffle(arrival)
    by_id = {m.mid: m for m in sent}
    digest = {pid: [(lo, lo + span) for lo, span in ivs] for pid, ivs in marked.items()}
    cores = [make(kind), make(kind)]
    got: list[list[MessageId]] = [[], []]
    for i, core in enumerate(cores):
        for m in arrival[:received]:
            got[i].extend(d.mid for d in core.receive(m))
    bulk, single = cores
    bulk.preload_intervals(digest)
    single.preload([by_id.get(MessageId(pid, s)) or Message(MessageId(pid, s), ROOT)
                    for pid, ivs in digest.items() for lo, hi in ivs for s in range(lo, hi + 1)])
    got[0].extend(d.mid for d in bulk.take_ready())
    got[1].extend(d.mid for d in single.take_ready())
    assert sorted(got[0]) == sorted(got[1])
    assert bulk.digest() == single.digest()
    assert bulk.held_messages() == single.held_messages()
    for i, core in enumerate(cores):  # and they go on alike
        for m in arrival[received:]:
            got[i].extend(d.mid for d in core.receive(m))
    assert sorted(got[0]) == sorted(got[1])
    assert len(got[0]) == len(set(got[0]))
