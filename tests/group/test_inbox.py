"""The per-group inbox (m2mc.api.inbox): the node's own unread messages are bounded by
bytes, the oldest dropped first, others' messages never; whatever is kept comes out
in the group's order and exactly as delivered (own messages are kept in a compact
form, others' as they came)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.api.inbox import OWN_OVERHEAD, Inbox
from m2mc.api.message import GroupMessage
from m2mc.ordering import ROOT, Message, MessageId

GID = "g"


def message(pid: str, seq: int, reply: bool = False, gseq: int | None = None) -> Message:
    parent = MessageId("x", 7) if reply else ROOT
    return Message(MessageId(pid, seq), parent, b"%s-%05d" % (pid.encode(), seq), None, gseq)


def as_read(m: Message) -> tuple[object, ...]:
    return (m.mid, m.parent, m.payload, m.gseq)


def read(g: GroupMessage) -> tuple[object, ...]:
    return (g.mid, g.parent, g.data, g.gseq)


def test_a_publisher_that_never_reads_keeps_the_newest_up_to_the_bound() -> None:
    size = len(message("me", 1).payload) + OWN_OVERHEAD
    inbox = Inbox("me", own_limit=10 * size)
    sent = [message("me", seq) for seq in range(1, 101)]
    for m in sent:
        inbox.add([m])
        assert inbox.own_bytes <= inbox.own_limit  # never past it, dropped as it goes
    assert inbox.own_dropped == 90 and len(inbox) == 10
    out: list[GroupMessage] = []
    inbox.take(GID, len(inbox), out)
    assert [read(g) for g in out] == [as_read(m) for m in sent[-10:]]
    assert inbox.own == 0 and inbox.own_bytes == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()),
                         min_size=1, max_size=6), max_size=40),
       st.integers(1, 12), st.lists(st.integers(0, 3), max_size=40))
def test_what_is_kept_comes_out_in_order_and_unchanged(
        batches: list[list[tuple[bool, bool, bool]]], bound: int, reads: list[int]) -> None:
    size = len(message("me", 10).payload) + OWN_OVERHEAD
    inbox = Inbox("me", own_limit=bound * size)
    seqs = {"me": 10, "you": 10}
    delivered: list[Message] = []
    got: list[tuple[object, ...]] = []
    for i, batch in enumerate(batches):
        ms = []
        for own, reply, stamped in batch:
            pid = "me" if own else "you"
            seqs[pid] += 1
            ms.append(message(pid, seqs[pid], reply, seqs[pid] if stamped else None))
        delivered += ms
        inbox.add(ms)
        assert inbox.own_bytes <= inbox.own_limit
        assert inbox.others() == len(inbox) - inbox.own
        if i < len(reads) and len(inbox):
            out: list[GroupMessage] = [inbox.pop(GID)]
            inbox.take(GID, min(reads[i], len(inbox)), out)
            got += [read(g) for g in out]
    out = []
    inbox.take(GID, len(inbox), out)
    got += [read(g) for g in out]
    # Others' messages all come out; own ones only as far as they were not dropped;
    # together, in the order delivered.
    index = {as_read(m): n for n, m in enumerate(delivered)}
    assert [index[g] for g in got] == sorted(index[g] for g in got)
    assert [g for g in got if g[0].pid == "you"] == [  # type: ignore[attr-defined]
        as_read(m) for m in delivered if m.mid.pid == "you"]
    own_out = sum(1 for g in got if g[0].pid == "me")  # type: ignore[attr-defined]
    assert own_out + inbox.own_dropped == sum(1 for m in delivered if m.mid.pid == "me")
    assert inbox.own == 0 and inbox.own_bytes == 0


def test_deliver_own_off_queues_only_the_others() -> None:
    inbox = Inbox("me", deliver_own=False)
    inbox.add([message("me", 1), message("you", 1), message("me", 2)])
    assert len(inbox) == 1 and read(inbox.pop(GID)) == as_read(message("you", 1))
