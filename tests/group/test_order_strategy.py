"""Total order is a strategy chosen once per group (docs/architecture.md, "The
group package"): a group of another order never builds a sequencing log, and the
log's messages sent to it are counted as a wrong kind and change nothing."""

from __future__ import annotations

import random

import pytest

from m2mc.group.codec import Ack, Order, Prepare, encode
from m2mc.group.events import Delivered, DeliveredBatch
from m2mc.group.manager import GroupNode
from m2mc.group.mop import Mop
from m2mc.group.order_strategy import NoSequencer
from m2mc.group.total import seqlog
from m2mc.group.total.mop import TotalMop
from m2mc.group.total.strategy import TotalOrderStrategy
from m2mc.ordering import MessageId


@pytest.fixture
def seqlogs_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pids of every SeqLog built while the test runs."""
    built: list[str] = []
    original = seqlog.SeqLog.__init__

    def counting(self: seqlog.SeqLog, pid: str, *args: object, **kwargs: object) -> None:
        built.append(pid)
        original(self, pid, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(seqlog.SeqLog, "__init__", counting)
    return built


@pytest.mark.parametrize("order", ["sb", "causal", "fifo"])
def test_a_group_of_another_order_never_builds_a_sequencing_log(
        order: str, seqlogs_built: list[str]) -> None:
    node = GroupNode("a", rng=random.Random(1))
    node.start(0.0)
    gid = node.create_group("g", 0.0, order=order)
    node.send(gid, b"hello", 0.1)
    node.on_timer(5.0)
    node.datagrams_to_send(5.0)
    inst = node.groups[gid]
    assert isinstance(inst.ordering, NoSequencer)
    assert type(inst.mop) is Mop and not hasattr(inst.mop, "log")
    assert seqlogs_built == []
    assert inst.mop.digest() == {"a": [(1, 1)]}


def test_a_total_order_group_builds_one_log_with_its_strategy(seqlogs_built: list[str]) -> None:
    node = GroupNode("a", rng=random.Random(1))
    node.start(0.0)
    gid = node.create_group("g", 0.0, order="total")
    inst = node.groups[gid]
    assert isinstance(inst.ordering, TotalOrderStrategy)
    assert isinstance(inst.mop, TotalMop) and inst.mop.is_sequencer
    assert seqlogs_built == ["a"]


@pytest.mark.parametrize("order", ["sb", "causal", "fifo"])
def test_sequencing_log_messages_in_another_order_are_a_wrong_kind(order: str) -> None:
    node = GroupNode("a", rng=random.Random(1))
    node.start(0.0)
    gid = node.create_group("g", 0.0, order=order)
    inst = node.groups[gid]
    node.events()
    before = node.group_stats(gid)
    wrong = node.stats.wrong_kind
    for body in (Ack("b", 1, "b", 3), Prepare("b", 2, 0),
                 Order("b", 1, [(1, MessageId("b", 1))], 1)):
        node.receiver.on_message(encode(inst.tag, body), 1.0)
    assert node.stats.wrong_kind == wrong + 3
    assert node.group_stats(gid) == before
    assert not any(isinstance(e, Delivered | DeliveredBatch) for e in node.events())
