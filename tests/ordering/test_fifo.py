"""FIFO ordering: per sender, sequence numbers in order from 1."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering import FifoOrder, Message, MessageId


def m(text: str) -> Message:
    return Message(MessageId.parse(text))


def ids(messages: list[Message]) -> list[str]:
    return [str(x.mid) for x in messages]


def test_fifo_holds_gaps_and_releases_runs() -> None:
    o = FifoOrder()
    assert ids(o.receive(m("A:1"))) == ["A:1"]
    assert o.receive(m("A:3")) == []
    assert o.receive(m("A:4")) == []
    assert ids(o.receive(m("B:1"))) == ["B:1"]  # other senders are independent
    assert o.missing() == [MessageId("A", 2)]
    assert o.digest() == {"A": [(1, 1), (3, 4)], "B": [(1, 1)]}
    assert ids(o.receive(m("A:2"))) == ["A:2", "A:3", "A:4"]
    assert o.held_count == 0 and o.missing() == []


def test_fifo_first_message_must_be_seq_1() -> None:
    o = FifoOrder()
    assert o.receive(m("A:2")) == []
    assert o.missing() == [MessageId("A", 1)]
    assert ids(o.receive(m("A:1"))) == ["A:1", "A:2"]


def test_fifo_duplicates_and_malformed() -> None:
    o = FifoOrder()
    o.receive(m("A:1"))
    o.receive(m("A:5"))
    assert o.receive(m("A:1")) == [] and o.receive(m("A:5")) == []
    assert o.duplicates == 2
    assert o.receive(Message(MessageId("A", 0))) == []
    assert o.receive(Message(MessageId("", 1))) == []
    assert o.malformed == 2


def test_fifo_missing_skips_held_and_is_bounded() -> None:
    o = FifoOrder(max_missing=4)
    o.receive(m("A:3"))
    o.receive(m("A:5"))
    o.receive(m("A:100"))
    assert o.missing() == [MessageId("A", s) for s in (1, 2, 4, 6)]


def test_fifo_bound() -> None:
    o = FifoOrder(max_held=2)
    o.receive(m("A:2"))
    o.receive(m("A:3"))
    assert o.receive(m("A:4")) == [] and o.refused == 1 and not o.has(MessageId("A", 4))
    assert ids(o.receive(m("B:1"))) == ["B:1"]  # deliverable: accepted while full
    assert ids(o.receive(m("A:1"))) == ["A:1", "A:2", "A:3"]
    assert ids(o.receive(m("A:4"))) == ["A:4"]


def test_fifo_preload_with_gap_skips_preloaded_later() -> None:
    o = FifoOrder()
    o.receive(m("A:4"))  # held
    o.preload([m("A:1"), m("A:2"), m("A:5")])
    assert o.take_ready() == []
    assert o.delivered(MessageId("A", 5)) and not o.delivered(MessageId("A", 3))
    assert o.receive(m("A:5")) == [] and o.duplicates == 1
    assert ids(o.receive(m("A:3"))) == ["A:3", "A:4"]
    assert ids(o.receive(m("A:6"))) == ["A:6"]


def test_fifo_preload_releases_held_run() -> None:
    o = FifoOrder()
    o.receive(m("A:2"))
    o.receive(m("A:3"))
    o.preload([m("A:1")])
    assert ids(o.receive(m("B:1"))) == ["A:2", "A:3", "B:1"]


@st.composite
def fifo_scenario(draw: st.DrawFn) -> tuple[list[Message], list[Message]]:
    senders = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(0, 12), min_size=senders, max_size=senders))
    messages = [Message(MessageId(f"p{s}", q)) for s in range(senders)
                for q in range(1, counts[s] + 1)]
    order = [messages[i] for i in draw(st.permutations(range(len(messages))))]
    if messages:
        for i in draw(st.lists(st.integers(0, len(messages) - 1), max_size=10)):
            order.insert(draw(st.integers(0, len(order))), messages[i])
    return messages, order


@settings(max_examples=300, deadline=None)
@given(scenario=fifo_scenario())
def test_fifo_random_arrivals(scenario: tuple[list[Message], list[Message]]) -> None:
    messages, arrival = scenario
    o = FifoOrder()
    delivered: list[Message] = []
    arrived: set[MessageId] = set()
    for x in arrival:
        arrived.add(x.mid)
        delivered += o.receive(x)
        # Minimal delay: each sender's delivered messages are exactly the longest
        # arrived prefix 1..k; everything else that arrived is held.
        for pid in {a.pid for a in arrived}:
            k = 0
            while MessageId(pid, k + 1) in arrived:
                k += 1
            got = [d.mid.seq for d in delivered if d.mid.pid == pid]
            assert got == list(range(1, k + 1))
        assert o.held_count == len(arrived) - len(delivered)
    assert sorted(d.mid for d in delivered) == sorted(x.mid for x in messages)
    assert o.duplicates == len(arrival) - len(messages)


def reply(text: str, parent: str) -> Message:
    return Message(MessageId.parse(text), parent=MessageId.parse(parent))


def test_fifo_keeps_s_b_a_reply_waits_for_the_message_it_answers() -> None:
    # docs/interfaces.md §5: sb_order applies to every group, FIFO ones included.
    o = FifoOrder()
    assert o.receive(reply("B:1", "A:1")) == []  # B's first message answers A:1
    assert o.missing() == [MessageId("A", 1)]
    assert o.receive(reply("B:2", "B:1")) == []  # FIFO behind B:1
    assert ids(o.receive(m("A:1"))) == ["A:1", "B:1", "B:2"]
    assert o.held_count == 0 and o.missing() == []


def test_fifo_preload_releases_replies_to_preloaded_messages() -> None:
    o = FifoOrder()
    assert o.receive(reply("B:1", "A:1")) == []
    o.preload([m("A:1")])
    assert ids(o.take_ready()) == ["B:1"]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 120), st.floats(0.0, 0.3))
def test_fifo_with_replies_random_arrivals_fifo_and_s_b_hold(seed: int, n: int,
                                                             dup: float) -> None:
    import random

    from m2mc.ordering.workload import reply_tree

    rng = random.Random(seed)
    messages = reply_tree(rng, n, senders=4)
    arrivals = list(messages) + [x for x in messages if rng.random() < dup]
    rng.shuffle(arrivals)
    o = FifoOrder()
    out: list[Message] = []
    for x in arrivals:
        out.extend(o.receive(x))
    assert sorted(ids(out)) == sorted(ids(messages))  # each exactly once
    position = {str(x.mid): i for i, x in enumerate(out)}
    last: dict[str, int] = {}
    for x in out:
        assert x.mid.seq == last.get(x.mid.pid, 0) + 1  # FIFO from 1
        last[x.mid.pid] = x.mid.seq
        if not x.parent.is_root:
            assert position[str(x.parent)] < position[str(x.mid)]  # S_b
    assert o.held_count == 0
