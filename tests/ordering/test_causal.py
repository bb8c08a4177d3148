"""Causal broadcast ordering with vector clocks (docs/interfaces.md §6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering import CausalOrder, Message, MessageId


def c(text: str, **vclock: int) -> Message:
    mid = MessageId.parse(text)
    return Message(mid, vclock={mid.pid: mid.seq, **vclock})


def ids(messages: list[Message]) -> list[str]:
    return [str(x.mid) for x in messages]


def test_causal_waits_for_every_dependency() -> None:
    o = CausalOrder()
    b1 = c("B:1", A=2)  # B had delivered A:1 and A:2
    assert o.receive(b1) == []
    assert o.missing() == [MessageId("A", 1), MessageId("A", 2)]
    assert ids(o.receive(c("A:1"))) == ["A:1"]
    assert o.missing() == [MessageId("A", 2)]
    assert ids(o.receive(c("A:2"))) == ["A:2", "B:1"]
    assert o.clock == {"A": 2, "B": 1}
    assert o.held_count == 0


def test_causal_chain_across_senders_released_in_one_cascade() -> None:
    o = CausalOrder()
    assert o.receive(c("C:1", A=1, B=1)) == []
    assert o.receive(c("B:1", A=1)) == []
    assert o.receive(c("A:2")) == []  # A's second needs A's first
    out = ids(o.receive(c("A:1")))
    assert sorted(out) == ["A:1", "A:2", "B:1", "C:1"]
    assert out[0] == "A:1" and out[-1] == "C:1"  # C:1 needs both A:1 and B:1
    assert o.held_count == 0


def test_causal_concurrent_messages_do_not_wait_on_each_other() -> None:
    o = CausalOrder()
    assert ids(o.receive(c("B:1"))) == ["B:1"]
    assert ids(o.receive(c("A:1"))) == ["A:1"]


def test_causal_malformed_clock_is_dropped() -> None:
    o = CausalOrder()
    assert o.receive(Message(MessageId("A", 1))) == []  # no vclock
    assert o.receive(Message(MessageId("A", 1), vclock={"A": 2})) == []  # own entry wrong
    assert o.receive(Message(MessageId("A", 1), vclock={"B": 1})) == []  # own entry missing
    assert o.malformed == 3 and o.digest() == {}


def test_causal_duplicates_and_bound() -> None:
    o = CausalOrder(max_held=1)
    assert o.receive(c("A:2")) == []
    assert o.receive(c("A:2")) == [] and o.duplicates == 1
    assert o.receive(c("B:1", A=2)) == [] and o.refused == 1
    assert not o.has(MessageId("B", 1)) and o.has(MessageId("A", 2))
    assert ids(o.receive(c("A:1"))) == ["A:1", "A:2"]
    assert ids(o.receive(c("B:1", A=2))) == ["B:1"]
    assert o.receive(c("A:1")) == [] and o.duplicates == 2


def test_causal_preload_then_dependants_flow() -> None:
    o = CausalOrder()
    held = c("B:1", A=2)
    o.receive(held)
    o.preload([c("A:1"), c("A:2")])
    assert o.take_ready() == [held]
    assert o.clock == {"A": 2, "B": 1}
    assert ids(o.receive(c("A:3"))) == ["A:3"]


def test_causal_preload_with_gap_skips_preloaded_later() -> None:
    o = CausalOrder()
    o.preload([c("A:1"), c("A:3")])
    assert o.clock == {"A": 1}
    assert o.receive(c("A:3")) == [] and o.duplicates == 1
    assert ids(o.receive(c("A:2"))) == ["A:2"]
    assert o.clock == {"A": 3}
    assert ids(o.receive(c("A:4"))) == ["A:4"]


@st.composite
def causal_histories(draw: st.DrawFn, max_size: int = 30) -> list[Message]:
    """Each sender's clock is the merge of its own past and of the clocks of a few
    earlier messages it chose to have delivered, so every history is causally closed."""
    n = draw(st.integers(1, max_size))
    senders = draw(st.integers(1, 4))
    seqs = [0] * senders
    knowledge: list[dict[str, int]] = [{} for _ in range(senders)]
    out: list[Message] = []
    for i in range(n):
        s = draw(st.integers(0, senders - 1))
        known = dict(knowledge[s])
        for j in draw(st.lists(st.integers(0, i - 1), max_size=3)) if i else []:
            for k, v in (out[j].vclock or {}).items():
                known[k] = max(known.get(k, 0), v)
        seqs[s] += 1
        known[f"p{s}"] = seqs[s]
        knowledge[s] = known
        out.append(Message(MessageId(f"p{s}", seqs[s]), vclock=dict(known)))
    return out


def happened_before(x: Message, y: Message) -> bool:
    assert y.vclock is not None
    return x.mid != y.mid and y.vclock.get(x.mid.pid, 0) >= x.mid.seq


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_causal_random_histories_and_arrivals(data: st.DataObject) -> None:
    messages = data.draw(causal_histories())
    arrival = [messages[i] for i in data.draw(st.permutations(range(len(messages))))]
    for i in data.draw(st.lists(st.integers(0, len(messages) - 1), max_size=8)):
        arrival.insert(data.draw(st.integers(0, len(arrival))), messages[i])
    preds = {m.mid: [x.mid for x in messages if happened_before(x, m)] for m in messages}
    o = CausalOrder()
    delivered: list[Message] = []
    arrived: set[MessageId] = set()
    for x in arrival:
        arrived.add(x.mid)
        delivered += o.receive(x)
        done = {d.mid for d in delivered}
        # Minimal delay: delivered == the arrived messages whose causal past has arrived.
        assert done == {a for a in arrived if all(p in arrived for p in preds[a])}
        assert o.held_count == len(arrived) - len(done)
        held = {h.mid for h in o.held_messages()}
        assert set(o.missing()) == {p for h in held for p in preds[h]} - arrived
    position = {d.mid: i for i, d in enumerate(delivered)}
    assert sorted(position) == sorted(m.mid for m in messages)
    assert len(delivered) == len(messages)
    for m in messages:
        for p in preds[m.mid]:
            assert position[p] < position[m.mid]
    assert o.duplicates == len(arrival) - len(messages)
