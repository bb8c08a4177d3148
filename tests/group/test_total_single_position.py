"""The sequencer gives a message one position, whatever order its entry and its data
come in (docs/group.md section 5: it never stamps a message that already has a
position in its log, nor one repaired with its committed position).

A second position was delivered as nothing (the message had its first) and known to
no store, so a member that missed its entry asked for it in vain and delivered
nothing after it: examples/scenarios/lossy-adhoc-total.toml stalled after the heal
on seeds 5, 11 and 19 (tests/group/test_lossy_adhoc_total.py)."""

from __future__ import annotations

from m2mc.group.config import GroupConfig
from m2mc.group.messages import Ack, MemberEntry, Promise
from m2mc.group.total.mop import TotalMop
from m2mc.ordering import Message, MessageId
from m2mc.store import MemoryStore

X1, X2, Y1 = MessageId("x", 1), MessageId("x", 2), MessageId("y", 1)


def _mop(pid: str = "a") -> TotalMop:
    mop = TotalMop(pid, "g", "total", GroupConfig(), MemoryStore())
    mop.log.is_member = lambda p: True
    return mop


def test_data_of_an_entry_adopted_at_a_take_over_is_not_stamped_again() -> None:
    mop = _mop()
    log = mop.log
    log.on_decided([(1, MemberEntry("a", 1, True)), (2, MemberEntry("b", 1, True)),
                    (3, MemberEntry("c", 1, True))])
    assert mop.pump() == []
    # a takes over: b's log (of ballot (5, c)) holds x:1 and x:2, not committed, whose
    # data a has not received (they were sent on the other side of a partition).
    log.core.cand_epoch = log.core.max_epoch = 9
    log.core.promise((9, "a"))
    log.core.candidacy = {}
    log.on_promise(Promise("b", 9, "a", 5, "c", 3, 5, [(4, X1), (5, X2)]), 0.0)
    assert log.is_leader and log.high == 5
    # Their data comes, then a new message: x:1 and x:2 keep positions 4 and 5.
    for mid in (X1, X2, Y1):
        _, out = mop.accept(Message(mid, payload=b"m"))
        assert out == []  # nothing is committed before b acknowledges
    assert log.high == 6 and log.position_of(X1) == 4 and log.position_of(X2) == 5
    assert log.position_of(Y1) == 6
    log.on_ack(Ack("b", 9, "a", 6), 0.0)
    delivered = mop.pump()
    assert [(m.mid, m.gseq) for m in delivered] == [(X1, 1), (X2, 2), (Y1, 3)]


def test_a_record_repaired_with_its_position_is_put_there_not_stamped() -> None:
    mop = _mop()
    log = mop.log
    log.found(0.0, MemberEntry("a", 1, True))  # a leads, alone in the configuration
    assert mop.pump() == [] and log.is_leader and log.high == 1
    # x:1 comes back from a repair with the position a majority committed it at
    # elsewhere (a still leads a ballot the others have left behind).
    _, out = mop.accept(Message(X1, payload=b"m", gseq=3))
    assert out == [] and log.high == 1 and log.position_of(X1) is None
    assert log.missing_positions(8) == [(2, 2)]  # what comes before it is asked for
    log.on_decided([(2, Y1)])
    _, out = mop.accept(Message(Y1, payload=b"m"))
    assert [(m.mid, m.gseq) for m in out] == [(Y1, 1), (X1, 2)]
