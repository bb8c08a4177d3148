"""A repair of more than one M2MP packet goes with two copies of each packet
(``REPAIR_COPIES``): a group node sends each packet once, and M2MP loses a message
whole when any of its packets is lost, so at 10% loss a 24 KB record would come back
whole in 0.6% of its repairs (docs/decisions.md, "Repairs of many packets go
twice"). On the in-process network, one copy of each packet, as real nodes send."""

from __future__ import annotations

import itertools
import random

from m2mc.group.node_output import REPAIR_COPIES

from .harness import Net, group_of_three


def _twins(datagrams: list[bytes]) -> int:
    """Datagrams sent right after an identical one: the second copies."""
    return sum(a == b for a, b in itertools.pairwise(datagrams))


def _lossy_group(seed: int, loss: float) -> tuple[Net, str, list[bytes]]:
    """A group of three, then ``loss``; the datagrams sent from then on."""
    net = Net(seed=seed)
    gid = group_of_three(net)
    net.loss = loss
    sent: list[bytes] = []
    net.counter = sent.append
    return net, gid, sent


def test_a_large_message_at_10_percent_loss_is_repaired_everywhere() -> None:
    net, gid, sent = _lossy_group(31, 0.1)
    body = random.Random(31).randbytes(24_000)  # 49 packets
    net.send("a", gid, body)
    first = len(sent)
    net.run(60.0)
    net.check_group(gid, ["a", "b", "c"])  # delivered everywhere, once
    assert _twins(sent[:first]) == 0  # the message itself went once
    assert REPAIR_COPIES == 2 and _twins(sent[first:]) >= 49  # a repair went twice


def test_small_repairs_go_once() -> None:
    net, gid, sent = _lossy_group(32, 0.2)
    for number in range(40):
        net.send("a", gid, b"small %d" % number)
        net.run(0.01)
    net.run(30.0)
    net.check_group(gid, ["a", "b", "c"])
    assert _twins(sent) == 0
