"""Feedback back-off grows with the group (group/backoff.py): the copies of a NACK or
a sync response that many members would send stay near one whatever the group's size,
and a small group draws as it always did."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from m2mc.group.backoff import suppression_backoff

LIMIT = 0.05  # nack_backoff
DELAY = 0.004  # what the others take to hear the first copy (the simulator's median)


def copies_sent(group: int, wanting: int, uniform: bool = False,
                trials: int = 2000) -> float:
    """The mean number of members that send: those whose back-off ends before the
    first copy reaches them (``uniform``: as a small group draws, whatever its size)."""
    rng = random.Random(7)
    total = 0
    for _ in range(trials):
        draws = sorted(suppression_backoff(rng, LIMIT, 8 if uniform else group, 8, True)
                       for _ in range(wanting))
        total += sum(1 for d in draws if d < draws[0] + DELAY)
    return total / trials


def test_a_group_of_up_to_eight_draws_uniformly_as_before() -> None:
    ours, uniform = random.Random(3), random.Random(3)
    for size in range(0, 9):
        assert suppression_backoff(ours, LIMIT, size, 8, widen=True) \
            == uniform.uniform(0.0, LIMIT)


@given(st.integers(min_value=9, max_value=100_000), st.booleans(), st.integers(0, 2**32))
def test_a_large_group_draws_within_its_window(size: int, widen: bool, seed: int) -> None:
    window = LIMIT * (math.log(size) + 1.0) if widen else LIMIT
    draw = suppression_backoff(random.Random(seed), LIMIT, size, 8, widen)
    assert 0.0 <= draw <= window


def test_copies_stay_near_one_as_the_group_grows() -> None:
    # 10% of the members lost the same message: uniform back-offs send about 1.8 NACKs
    # at 100 members and 9 at 1,000; the widened exponential about one at both.
    assert copies_sent(100, 10, uniform=True) > 1.5
    assert copies_sent(1000, 100, uniform=True) > 5.0
    for group, wanting in ((30, 3), (100, 10), (1000, 100)):
        assert copies_sent(group, wanting) < 1.2
