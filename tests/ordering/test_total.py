"""Total order: the sequencer and the gseq-ordered receiver."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering import Message, MessageId, MissingGseqError, TotalOrder


def t(text: str, gseq: int) -> Message:
    return Message(MessageId.parse(text), gseq=gseq)


def ids(messages: list[Message]) -> list[str]:
    return [str(x.mid) for x in messages]


def test_total_order_holds_back_until_the_gap_fills() -> None:
    o = TotalOrder()
    assert o.receive(t("B:1", 2)) == []
    assert o.receive(t("A:2", 4)) == []
    assert o.missing_gseqs() == [1, 3]
    assert o.missing() == []
    assert o.digest() == {"A": [(2, 2)], "B": [(1, 1)]}
    assert ids(o.receive(t("A:1", 1))) == ["A:1", "B:1"]
    assert o.next_gseq == 3
    assert ids(o.receive(t("C:1", 3))) == ["C:1", "A:2"]
    assert o.next_gseq == 5 and o.held_count == 0


def test_total_order_duplicates_restamps_and_conflicts() -> None:
    o = TotalOrder()
    o.receive(t("A:1", 1))
    assert o.receive(t("A:1", 1)) == []  # gseq already delivered
    o.receive(t("B:1", 3))
    assert o.receive(t("B:1", 3)) == []  # gseq already held
    assert o.receive(t("X:9", 3)) == [] and o.conflicts == 1  # first one under gseq 3 kept
    # A:1 stamped again under gseq 2 by a sequencer that forgot it: a no-op slot.
    assert ids(o.receive(t("A:1", 2))) == ["B:1"]
    assert o.next_gseq == 4
    assert o.duplicates == 4


def test_total_order_same_identity_held_under_two_gseqs_delivered_once() -> None:
    o = TotalOrder()
    o.receive(t("B:1", 4))
    o.receive(t("B:1", 2))
    o.receive(t("C:1", 3))
    assert ids(o.receive(t("A:1", 1))) == ["A:1", "B:1", "C:1"]
    assert o.next_gseq == 5 and o.held_count == 0


def test_total_order_requires_gseq() -> None:
    o = TotalOrder()
    with pytest.raises(MissingGseqError):
        o.receive(Message(MessageId("A", 1)))
    with pytest.raises(MissingGseqError):
        o.preload([Message(MessageId("A", 1))])
    assert o.receive(t("A:1", 0)) == [] and o.malformed == 1


def test_total_order_bound() -> None:
    o = TotalOrder(max_held=2)
    o.receive(t("A:2", 2))
    o.receive(t("A:3", 3))
    assert o.receive(t("A:4", 4)) == [] and o.refused == 1 and not o.has(MessageId("A", 4))
    assert ids(o.receive(t("A:1", 1))) == ["A:1", "A:2", "A:3"]
    assert ids(o.receive(t("A:4", 4))) == ["A:4"]


def test_total_order_flood_far_ahead_is_bounded() -> None:
    o = TotalOrder(max_held=10, max_missing=5)
    for g in range(10**9, 10**9 + 100):
        o.receive(t(f"X:{g}", g))
    assert o.held_count == 10 and o.refused == 90
    assert o.missing_gseqs() == [1, 2, 3, 4, 5]
    assert ids(o.receive(t("A:1", 1))) == ["A:1"]


def test_total_order_start_preload_and_skip() -> None:
    o = TotalOrder(start=7)
    assert o.receive(t("A:1", 3)) == [] and o.duplicates == 1  # before this member
    o.receive(t("B:1", 9))
    o.preload([t("A:5", 7), t("A:6", 8)])
    assert ids(o.take_ready()) == ["B:1"]  # held gseq 9 follows the preloaded 8
    assert o.next_gseq == 10
    o.receive(t("B:3", 12))
    assert o.missing_gseqs() == [10, 11]
    assert ids(o.skip_to(12)) == ["B:3"]  # 10 and 11 lost for good
    assert o.next_gseq == 13


@st.composite
def stamped_streams(draw: st.DrawFn) -> list[Message]:
    n = draw(st.integers(1, 30))
    seqs: dict[str, int] = {}
    out: list[Message] = []
    for gseq in range(1, n + 1):
        pid = draw(st.sampled_from("ABCD"))
        seqs[pid] = seqs.get(pid, 0) + 1
        out.append(Message(MessageId(pid, seqs[pid]), gseq=gseq))
    return out


@settings(max_examples=200, deadline=None)
@given(data=st.data(), receivers=st.integers(2, 4))
def test_every_receiver_delivers_the_same_sequence(data: st.DataObject, receivers: int) -> None:
    messages = data.draw(stamped_streams())
    sequences = []
    for _ in range(receivers):
        arrival = [messages[i] for i in data.draw(st.permutations(range(len(messages))))]
        for i in data.draw(st.lists(st.integers(0, len(messages) - 1), max_size=6)):
            arrival.insert(data.draw(st.integers(0, len(arrival))), messages[i])
        o = TotalOrder()
        delivered: list[Message] = []
        seen: set[int] = set()
        for x in arrival:
            assert x.gseq is not None
            seen.add(x.gseq)
            delivered += o.receive(x)
            prefix = 0
            while prefix + 1 in seen:
                prefix += 1
            assert len(delivered) == prefix  # minimal delay: the arrived gseq prefix
            assert o.held_count == len(seen) - prefix
        assert o.duplicates == len(arrival) - len(messages)
        sequences.append(delivered)
    assert all(seq == messages for seq in sequences)


def test_fill_passes_over_a_position_without_a_message() -> None:
    o = TotalOrder()
    assert o.receive(t("B:1", 3)) == []
    assert o.fill(2) == []
    assert o.missing_gseqs() == [1]
    assert ids(o.receive(t("A:1", 1))) == ["A:1", "B:1"]
    assert o.next_gseq == 4 and o.held_count == 0
    assert o.fill(4) == [] and o.next_gseq == 5
    assert o.fill(4) == [] and o.fill(1) == [] and o.duplicates == 2
    bounded = TotalOrder(max_held=1)
    assert bounded.fill(3) == [] and bounded.fill(4) == [] and bounded.refused == 1
    assert bounded.held_message(MessageId("A", 1)) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.randoms(use_true_random=False),
       st.integers(0, 10))
def test_fill_and_receive_in_any_order_deliver_the_messages_in_position_order(
        kinds: list[bool], rnd: Any, copies: int) -> None:
    # Position p (from 1) holds a message when kinds[p - 1], else nothing (a record).
    items = [(p, t(f"S:{p}", p) if is_message else None)
             for p, is_message in enumerate(kinds, start=1)]
    arrivals = items + [rnd.choice(items) for _ in range(copies)]
    rnd.shuffle(arrivals)
    o = TotalOrder()
    out: list[Message] = []
    for p, m in arrivals:
        got = o.fill(p) if m is None else o.receive(m)
        out.extend(got)
        # Never past a position that has not arrived.
        assert all(x.gseq is not None and x.gseq < o.next_gseq for x in got)
    assert [m.gseq for m in out] == [p for p, m in items if m is not None]
    assert o.next_gseq == len(kinds) + 1 and o.held_count == 0
