"""The replay table against a model: a set of accepted counters per sender."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.security.replay import ReplayTable, Verdict


@settings(max_examples=200, deadline=None)
@given(window=st.integers(1, 70),
       counters=st.lists(st.integers(0, 200), max_size=300))
def test_window_semantics_match_the_model(window: int, counters: list[int]) -> None:
    table = ReplayTable(window=window, max_senders=4)
    accepted: set[int] = set()
    for c in counters:
        high = max(accepted, default=None)
        if high is not None and c <= high - window:
            expected = Verdict.STALE
        elif c in accepted:
            expected = Verdict.REPLAY
        else:
            expected = Verdict.FRESH
        assert table.check("s", c) == expected
        assert table.admit("s", c) == expected  # records it when FRESH
        if expected == Verdict.FRESH:
            accepted.add(c)
    # Every counter is accepted at most once: never twice, whatever the order.
    assert len(accepted) <= len(counters)


def test_check_records_nothing() -> None:
    table = ReplayTable()
    assert table.check("s", 5) == Verdict.FRESH
    assert table.check("s", 5) == Verdict.FRESH
    assert "s" not in table


def test_a_big_jump_clears_the_window() -> None:
    table = ReplayTable(window=16)
    table.accept("s", 1)
    table.accept("s", 10_000)
    assert table.check("s", 9_999) == Verdict.FRESH
    assert table.check("s", 10_000) == Verdict.REPLAY
    assert table.check("s", 1) == Verdict.STALE


def test_at_the_bound_the_least_recently_heard_sender_is_forgotten() -> None:
    table = ReplayTable(window=16, max_senders=3)
    for sender in ("a", "b", "c"):
        table.accept(sender, 1)
    table.accept("a", 2)  # a is now the most recent; b the least
    assert table.admit("d", 1) == Verdict.EVICTED
    assert len(table) == 3 and table.evictions == 1
    assert "b" not in table and {"a", "c", "d"} <= {s for s in "abcd" if s in table}
    # The forgotten sender starts afresh (documented: docs/security.md).
    assert table.check("b", 1) == Verdict.FRESH
    assert table.check("a", 2) == Verdict.REPLAY


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=400))
def test_table_never_exceeds_its_bound(events: list[tuple[int, int]]) -> None:
    table = ReplayTable(window=32, max_senders=10)
    for sender, counter in events:
        if table.check(str(sender), counter) == Verdict.FRESH:
            table.accept(str(sender), counter)
        assert len(table) <= 10
