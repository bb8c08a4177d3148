"""S_b ordering: the seeds' own examples and the edge cases of the API."""

from __future__ import annotations

import pytest

from m2mc.errors import ConfigError, DecodeError
from m2mc.ordering import (
    ROOT,
    CausalOrder,
    Message,
    MessageId,
    OrderingCore,
    SbOrder,
    make_core,
)


def mid(text: str) -> MessageId:
    return MessageId.parse(text)


def msg(m: str, parent: str = "", payload: bytes = b"") -> Message:
    return Message(mid(m), mid(parent), payload)


def ids(messages: list[Message]) -> list[str]:
    return [str(m.mid) for m in messages]


# -- MessageId ---------------------------------------------------------------


def test_message_id_text_round_trip_and_root() -> None:
    assert str(MessageId("B", 3)) == "B:3"
    assert MessageId.parse("B:3") == MessageId("B", 3)
    assert MessageId.parse("host:9000:7") == MessageId("host:9000", 7)
    assert str(ROOT) == "" and MessageId.parse("") is ROOT
    assert MessageId("A", 2) < MessageId("A", 10) < MessageId("B", 1)


@pytest.mark.parametrize("text", ["B", ":3", "B:", "B:x", "B:0", "B:-1", "B:١"])
def test_message_id_parse_rejects_garbage(text: str) -> None:
    with pytest.raises(DecodeError):
        MessageId.parse(text)


def test_message_with_vclock_is_hashable() -> None:
    m = Message(MessageId("A", 1), vclock={"A": 1})
    assert hash(m) == hash(Message(MessageId("A", 1), vclock={"A": 1}))


# -- the seeds' examples -------------------------------------------------------


def test_seed003_fig7_out_of_sequence_replies_released_in_sb_order() -> None:
    """seeds/003 IV.D: A receives B1, then B3 (reply to B2), B4 (reply to B3), B2
    (reply to B1): it delivers B1 at once, holds B3 and B4, and delivers B2 B3 B4
    when B2 arrives."""
    a = SbOrder()
    assert ids(a.receive(msg("B:1"))) == ["B:1"]
    assert a.receive(msg("B:3", "B:2")) == []
    assert a.receive(msg("B:4", "B:3")) == []
    assert a.held_count == 2
    assert a.missing() == [mid("B:2")]
    assert a.digest() == {"B": [(1, 1), (3, 4)]}
    assert ids(a.receive(msg("B:2", "B:1"))) == ["B:2", "B:3", "B:4"]
    assert a.held_count == 0 and a.missing() == []
    assert a.digest() == {"B": [(1, 4)]}
    # Fig 7f: A replies to B2; its own looped-back message is delivered at once.
    assert ids(a.receive(msg("A:1", "B:2"))) == ["A:1"]
    assert a.digest() == {"A": [(1, 1)], "B": [(1, 4)]}


def test_seed000_threaded_chat_chennai_delhi() -> None:
    """seeds/000 II: C asks 'Delhi?' (C1) and 'Chennai?' (C2); A answers 'No' to
    Chennai (A1), B answers 'Yes' to Delhi (B1). D gets the answers first: each is
    shown right after the question it answers, never before it, and a question's
    arrival is not held up by the other thread."""
    delhi = Message(mid("C:1"), ROOT, b"Did you visit Delhi?")
    chennai = Message(mid("C:2"), ROOT, b"Did you visit Chennai?")
    no = Message(mid("A:1"), chennai.mid, b"No")
    yes = Message(mid("B:1"), delhi.mid, b"Yes")
    d = SbOrder()
    assert d.receive(no) == []
    assert d.receive(yes) == []
    assert d.receive(chennai) == [chennai, no]
    assert d.receive(delhi) == [delhi, yes]
    # Whatever the arrival order, an answer follows its own question.
    for arrival in ([yes, chennai, no, delhi], [delhi, no, yes, chennai]):
        shown: list[Message] = []
        core = SbOrder()
        for m in arrival:
            shown += core.receive(m)
        assert shown.index(no) > shown.index(chennai)
        assert shown.index(yes) > shown.index(delhi)


def test_seed003_fig1_sb_delivers_unrelated_later_message_causal_waits() -> None:
    """seeds/003 Fig 1. (a) Q's Y1 answers P's X1: R, getting Y1 first, holds it
    until X1. (b) Q sends Y2 after receiving X2 but unrelated to it: S_b delivers
    Y2 at once; causal order (X2 happened before Y2) makes R wait for X2."""
    x1 = Message(mid("P:1"), ROOT, b"X1", vclock={"P": 1})
    y1 = Message(mid("Q:1"), x1.mid, b"Y1", vclock={"P": 1, "Q": 1})
    r = SbOrder()
    assert r.receive(y1) == []
    assert r.receive(x1) == [x1, y1]

    x2 = Message(mid("P:2"), ROOT, b"X2", vclock={"P": 2})
    y2 = Message(mid("Q:2"), ROOT, b"Y2", vclock={"P": 2, "Q": 2})
    sb, causal = SbOrder(), CausalOrder()
    for core in (sb, causal):
        core.receive(x1)
        core.receive(y1)
    assert sb.receive(y2) == [y2]  # semantically unrelated: no waiting
    assert causal.receive(y2) == []  # causally after X2: held
    assert causal.missing() == [mid("P:2")]
    assert sb.receive(x2) == [x2]
    assert causal.receive(x2) == [x2, y2]


# -- behaviour of the API ------------------------------------------------------


def test_duplicates_of_delivered_and_held_are_ignored() -> None:
    o = SbOrder()
    o.receive(msg("A:1"))
    o.receive(msg("A:3", "A:2"))
    assert o.receive(msg("A:1")) == []
    assert o.receive(msg("A:3", "A:2")) == []
    assert o.duplicates == 2 and o.held_count == 1
    assert ids(o.receive(msg("A:2", "A:1"))) == ["A:2", "A:3"]
    assert o.receive(msg("A:2", "A:1")) == [] and o.duplicates == 3


def test_has_and_delivered() -> None:
    o = SbOrder()
    o.receive(msg("A:1"))
    o.receive(msg("B:5", "A:9"))
    assert o.delivered(mid("A:1")) and o.has(mid("A:1"))
    assert not o.delivered(mid("B:5")) and o.has(mid("B:5"))
    assert not o.has(mid("A:9")) and not o.has(mid("C:1"))
    assert o.delivered(ROOT)


def test_siblings_released_in_arrival_order_depth_first() -> None:
    o = SbOrder()
    for m in [msg("B:1", "A:1"), msg("C:1", "B:1"), msg("D:1", "A:1"), msg("C:2", "B:1")]:
        assert o.receive(m) == []
    assert ids(o.receive(msg("A:1"))) == ["A:1", "B:1", "C:1", "C:2", "D:1"]


def test_missing_lists_awaited_parents_that_are_not_held() -> None:
    o = SbOrder()
    o.receive(msg("B:1", "A:1"))
    o.receive(msg("C:1", "B:1"))  # waits on B:1, which is held, so not missing
    o.receive(msg("D:1", "Z:7"))
    assert o.missing() == [mid("A:1"), mid("Z:7")]


def test_missing_is_bounded() -> None:
    o = SbOrder(max_missing=3)
    for i in range(1, 10):
        o.receive(msg(f"B:{i}", f"A:{i}"))
    assert o.missing() == [mid("A:1"), mid("A:2"), mid("A:3")]


@pytest.mark.parametrize(
    "bad",
    [
        Message(MessageId("", 1)),
        Message(MessageId("A", 0)),
        Message(MessageId("A", -3)),
        Message(MessageId("A", 2), MessageId("A", 2)),  # its own parent
        Message(MessageId("A", 2), MessageId("A", 5)),  # reply to its sender's later message
        Message(MessageId("A", 2), MessageId("", 4)),
        Message(MessageId("A", 2), MessageId("B", 0)),
    ],
)
def test_malformed_identities_are_counted_and_dropped(bad: Message) -> None:
    o = SbOrder()
    assert o.receive(bad) == []
    assert o.malformed == 1 and o.held_count == 0 and o.digest() == {}


def test_bound_refuses_what_must_be_held_and_accepts_what_is_deliverable() -> None:
    o = SbOrder(max_held=2)
    assert o.receive(msg("B:1", "A:1")) == []
    assert o.receive(msg("B:2", "A:2")) == []
    assert o.receive(msg("B:3", "A:3")) == []  # full: refused
    assert o.refused == 1 and o.held_count == 2
    assert not o.has(mid("B:3"))  # not recorded: the group layer can fetch it again
    assert ids(o.receive(msg("C:1"))) == ["C:1"]  # deliverable: accepted while full
    assert ids(o.receive(msg("A:1"))) == ["A:1", "B:1"]  # and releases held ones
    assert o.receive(msg("B:3", "A:3")) == []  # room again: held this time
    assert o.has(mid("B:3")) and o.refused == 1
    assert ids(o.receive(msg("A:2", "A:1"))) == ["A:2", "B:2"]
    assert ids(o.receive(msg("A:3", "A:2"))) == ["A:3", "B:3"]
    assert o.held_count == 0


def test_outsider_flood_of_orphans_cannot_grow_the_store() -> None:
    o = SbOrder(max_held=100)
    for i in range(1, 5001):
        o.receive(msg(f"X:{i}", f"Ghost:{i}"))
    assert o.held_count == 100 and o.refused == 4900
    assert len(o.missing()) == 100
    # Legitimate traffic still flows.
    assert ids(o.receive(msg("A:1"))) == ["A:1"]


def test_max_held_zero_holds_nothing() -> None:
    o = SbOrder(max_held=0)
    assert o.receive(msg("B:1", "A:1")) == [] and o.refused == 1
    assert ids(o.receive(msg("A:1"))) == ["A:1"]


def test_preload_marks_delivered_without_returning() -> None:
    o = SbOrder()
    o.preload([msg("A:1"), msg("A:2", "A:1")])
    assert o.delivered(mid("A:2"))
    assert o.receive(msg("A:2", "A:1")) == [] and o.duplicates == 1
    assert ids(o.receive(msg("B:1", "A:2"))) == ["B:1"]


def test_preload_releases_held_children_through_the_next_receive() -> None:
    o = SbOrder()
    o.receive(msg("B:1", "A:1"))
    o.receive(msg("C:1", "B:1"))
    o.receive(msg("D:1", "B:1"))
    o.preload([msg("A:1"), msg("D:1", "B:1")])  # D:1 held, now counted delivered
    assert o.held_count == 0
    assert ids(o.receive(msg("E:1"))) == ["B:1", "C:1", "E:1"]
    assert o.take_ready() == []


def test_preload_ready_via_take_ready() -> None:
    o = SbOrder()
    o.receive(msg("B:1", "A:1"))
    o.preload([msg("A:1")])
    assert ids(o.take_ready()) == ["B:1"]
    assert o.receive(msg("C:1")) == [msg("C:1")]


def test_make_core_builds_each_order_and_rejects_unknown() -> None:
    for order in ("sb", "causal", "fifo", "total"):
        core = make_core(order, max_held=7)
        assert isinstance(core, OrderingCore)
        assert core.order == order
    assert make_core("total", start=5).next_gseq == 5  # type: ignore[attr-defined]
    with pytest.raises(ConfigError):
        make_core("lamport")
    with pytest.raises(ConfigError):
        make_core("sb", colour="blue")
    with pytest.raises(ConfigError):
        make_core("sb", max_held=-1)
