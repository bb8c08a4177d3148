"""Ordering lists (seeds/003 VI.B) against a plain set."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering.intervals import IntervalList, merge_intervals


def test_seed003_fig9_cases() -> None:
    ol = IntervalList([1, 2, 3, 7, 8, 12])
    assert ol.intervals() == [(1, 3), (7, 8), (12, 12)]
    assert ol.add(5)  # new node between (1,3) and (7,8)
    assert ol.add(4)  # fills the gap: (1,3)+4+(5,5) merge
    assert ol.intervals() == [(1, 5), (7, 8), (12, 12)]
    assert ol.add(11)  # L_k = seqno + 1: extends (12,12) down
    assert ol.add(9)  # H_{k-1} = seqno - 1: extends (7,8) up
    assert ol.add(10)  # joins both neighbours
    assert ol.intervals() == [(1, 5), (7, 12)]
    assert not ol.add(8)  # already present
    assert 6 not in ol and 7 in ol and 12 in ol and 13 not in ol and 0 not in ol
    assert "7" not in ol
    assert ol.prefix() == 5 and ol.prefix(7) == 12 and ol.prefix(6) == 5
    assert ol.gaps(1, 15, 10) == [6, 13, 14, 15]
    assert ol.gaps(1, 15, 2) == [6, 13]
    assert ol.count() == 11 and len(ol) == 2
    assert merge_intervals(ol, [6, 14]) == [(1, 12), (14, 14)]


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.integers(1, 60)), probe=st.integers(0, 70),
       lo=st.integers(0, 70), hi=st.integers(0, 70), limit=st.integers(0, 80))
def test_interval_list_behaves_like_a_set(values: list[int], probe: int, lo: int, hi: int,
                                          limit: int) -> None:
    ol = IntervalList()
    model: set[int] = set()
    for v in values:
        assert ol.add(v) == (v not in model)
        model.add(v)
        assert all(h + 1 < lo2 for h, lo2 in zip(ol.highs, ol.lows[1:], strict=False))
        assert all(a <= b for a, b in zip(ol.lows, ol.highs, strict=True))
    assert (probe in ol) == (probe in model)
    assert list(ol) == sorted(model)
    assert ol.count() == len(model)
    assert ol.gaps(lo, hi, limit) == [x for x in range(lo, hi + 1) if x not in model][:limit]
    expected_prefix = 0
    while expected_prefix + 1 in model:
        expected_prefix += 1
    assert ol.prefix() == expected_prefix
