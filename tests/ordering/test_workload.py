"""The synthetic streams used by bench/ordering.py and the simulator."""

from __future__ import annotations

import random

import pytest

from m2mc.ordering import make_core
from m2mc.ordering.workload import (
    causal_history,
    early_arrivals,
    fifo_stream,
    parent_index,
    previous_index,
    reply_tree,
    total_stream,
)


@pytest.mark.parametrize("order", ["sb", "causal", "fifo", "total"])
def test_early_arrivals_is_a_permutation_with_the_asked_fraction_early(order: str) -> None:
    rng = random.Random(7)
    n = 2000
    if order == "sb":
        sent = reply_tree(rng, n, senders=5)
        pred = parent_index(sent)
    elif order == "causal":
        sent = causal_history(rng, n, senders=5)
        pred = previous_index(sent)
    elif order == "fifo":
        sent = fifo_stream(rng, n, senders=5)
        pred = previous_index(sent)
    else:
        sent = total_stream(rng, n, senders=5)
        pred = list(range(-1, n - 1))
    arrival = early_arrivals(sent, pred, 0.1, rng)
    assert sorted(map(id, arrival)) == sorted(map(id, sent))
    position = {id(m): i for i, m in enumerate(arrival)}
    early = sum(1 for i, p in enumerate(pred)
                if p >= 0 and position[id(sent[i])] < position[id(sent[p])])
    assert early == 200
    core = make_core(order)
    delivered = [d for m in arrival for d in core.receive(m)]
    assert len(delivered) == n and core.held_count == 0 and core.malformed == 0


def test_generators_are_deterministic_for_a_seed() -> None:
    assert reply_tree(random.Random(3), 50) == reply_tree(random.Random(3), 50)
    assert causal_history(random.Random(3), 50) == causal_history(random.Random(3), 50)
