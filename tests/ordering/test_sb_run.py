"""``SbOrder.receive_run``, the receive hot path's batch form, is ``receive`` record by
record: whatever the batches (in order, out of order, duplicated, replies across
senders, malformed identities), a core fed by ``receive_run`` then ``receive`` for
the rest delivers the same messages in the same order and ends in the same state as
a core fed by ``receive`` alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.ordering import ROOT, Message, MessageId, SbOrder

PIDS = ("A", "B", "C")


@st.composite
def batches(draw: st.DrawFn) -> list[list[Message]]:
    """Batches of records as senders send them (mostly runs of one sender's next
    messages, each answering the root or its predecessor), then shuffled, cut,
    duplicated or damaged a little."""
    sent: list[Message] = []
    next_seq = dict.fromkeys(PIDS, 1)
    for _ in range(draw(st.integers(0, 40))):
        pid = draw(st.sampled_from(PIDS))
        seq = next_seq[pid]
        next_seq[pid] += 1
        kind = draw(st.sampled_from(("root", "previous", "other", "bad")))
        if kind == "root" or (seq == 1 and kind == "previous"):
            parent = ROOT
        elif kind == "previous":
            parent = MessageId(pid, seq - 1)
        elif kind == "other" and sent:
            parent = draw(st.sampled_from(sent)).mid
        else:
            parent = MessageId(pid, seq + draw(st.integers(0, 2)))  # a cycle: malformed
        sent.append(Message(MessageId(pid, seq), parent, b"%d" % seq))
    stream = list(sent)
    for _ in range(draw(st.integers(0, 6))):  # duplicates and reordering
        if stream and draw(st.booleans()):
            stream.insert(draw(st.integers(0, len(stream))), draw(st.sampled_from(sent)))
        elif len(stream) > 1:
            i = draw(st.integers(0, len(stream) - 2))
            stream[i], stream[i + 1] = stream[i + 1], stream[i]
    out: list[list[Message]] = []
    while stream:
        size = draw(st.integers(1, 8))
        out.append(stream[:size])
        stream = stream[size:]
    return out


def state(core: SbOrder) -> tuple[object, ...]:
    return (core.digest(), sorted(map(str, (m.mid for m in core.held_messages()))),
            core.missing(), core.duplicates, core.malformed, core.held_count)


@settings(max_examples=400, deadline=None)
@given(batches())
def test_a_run_then_receive_is_receive_record_by_record(batches: list[list[Message]]) -> None:
    by_run, one_by_one = SbOrder(), SbOrder()
    got_run: list[Message] = []
    got_one: list[Message] = []
    for batch in batches:
        count = by_run.receive_run(batch)
        got_run += batch[:count]
        for message in batch[count:]:
            got_run += by_run.receive(message)
        for message in batch:
            got_one += one_by_one.receive(message)
        assert got_run == got_one
        assert state(by_run) == state(one_by_one)


def test_a_sender_s_next_messages_in_order_are_taken_as_one_run() -> None:
    core = SbOrder()
    first = Message(MessageId("A", 1), ROOT, b"1")
    assert core.receive_run([first]) == 0  # a sender not heard yet: receive() decides
    assert core.receive(first) == [first]
    run = [Message(MessageId("A", 2), MessageId("A", 1), b"2"),
           Message(MessageId("A", 3), ROOT, b"3"),
           Message(MessageId("A", 5), ROOT, b"5"),  # a gap: the run stops here
           Message(MessageId("A", 4), ROOT, b"4")]
    assert core.receive_run(run) == 2
    assert core.digest() == {"A": [(1, 3)]}
