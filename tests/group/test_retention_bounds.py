"""The group log and the gone reports are tables an outsider can fill: filled from
outside, they stop at their bounds, the oldest go first, the counters say so, and
the group goes on (docs/security.md, bounds table; docs/group.md section 8)."""

from __future__ import annotations

import random

from m2mc.group.codec import Data, Gone, encode, group_tag
from m2mc.group.config import GroupConfig
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.store import MemoryStore
from m2mc.store.retention import stored_size
from m2mc.wire.packet import fragments

from .harness import Net

G = "g"
TAG = group_tag(G)
RNG = random.Random(0)
BOUND = 50_000


def inject(net: Net, body: Data | Gone, to: str | None = None) -> None:
    for datagram in fragments(RNG.getrandbits(32), encode(TAG, body)):
        net.inject(datagram, to=to)


def group(config: GroupConfig) -> Net:
    net = Net(seed=2, config=lambda: config)
    for pid in "ab":
        net.add(pid)
    net.do("a", lambda n: n.create_group("x", net.now, "sb", gid=G))
    net.do("b", lambda n: n.join_group(G, net.now, order="sb"))
    net.run(1.0)
    return net


def test_a_flood_of_data_keeps_the_log_at_its_bound_oldest_evicted_first() -> None:
    net = group(GroupConfig(memory_log_bytes=BOUND, max_held=50))
    mine = net.send("a", G, b"the first word")
    net.run(0.5)
    payload = b"z" * 1000
    for seq in range(1, 401):  # 400 kB from an outsider, delivered (root parents)
        inject(net, Data("x", [Message(MessageId("x", seq), ROOT, payload)]))
        net.run(0.01)
    for pid in "ab":
        store = net.stores[pid]
        assert store.log_bytes(G) <= BOUND
        assert store.gone(G).ids["x"][0][0] == 1  # the oldest went first ...
        assert store.get(G, MessageId("x", 400)) is not None  # ... the newest stay
        assert store.get(G, mine) is None and store.gone(G).ids["a"] == [(1, 1)]
    # ... and 400 that can never be delivered (their parent never comes): held.
    for seq in range(1, 401):
        inject(net, Data("y", [Message(MessageId("y", seq), MessageId("w", 1), payload)]))
        net.run(0.01)
    net.run(1.0)
    for pid in "ab":
        store = net.stores[pid]
        assert isinstance(store, MemoryStore)
        held = net.nodes[pid].group_stats(G)["held"]
        assert held == 50  # max_held: the rest refused (fetched again by repair)
        assert store.log_bytes(G) <= BOUND + held * stored_size(
            Message(MessageId("y", 1), MessageId("w", 1), payload))
        assert store.evicted >= 350
        # Held messages are never evicted (the node still needs them): past the bound
        # they pushed out every delivered one, and max_held bounds them.
        assert store.gone(G).ids["x"] == [(1, 400)]
    # The group goes on.
    reply = net.send("b", G, b"still here", reply_to=mine)
    net.run(1.0)
    assert net.delivered["a"][G][-1] == reply


def test_forged_gone_reports_are_bounded_and_cannot_make_a_member_skip() -> None:
    net = group(GroupConfig(max_senders=16, max_nack_intervals=8))
    net.partition(["a"], ["b"])
    sent = [net.send("a", G, b"while b is away %d" % i) for i in range(10)]
    net.run(0.2)
    # An outsider says a's messages are gone, to b only, and floods b with reports
    # about made-up senders.
    inject(net, Gone("x", {"a": [(1, 10)]}, [], []), to="b")
    for i in range(200):
        inject(net, Gone(f"f{i}", {f"s{i}": [(1, 5), (7, 9)]}, [(1, 3)], []), to="b")
    net.run(0.5)
    retention = net.nodes["b"].groups[G].retention
    assert len(retention._reports) <= 16
    assert len(retention._gseq_reports) <= 4 * 8
    assert retention.stats.gone_reports_dropped > 0
    net.heal()  # a holds them: its statuses and repairs bring them to b, nothing skipped
    net.run(6.0)
    assert net.delivered["b"][G][-10:] == sent
    assert net.nodes["b"].group_stats(G)["skipped"] == 0


def test_a_forged_gone_for_what_a_member_holds_is_answered_with_the_messages() -> None:
    net = group(GroupConfig())
    net.partition(["a"], ["b"])
    sent = [net.send("a", G, b"m%d" % i) for i in range(5)]
    net.run(0.1)
    net.heal()
    # Before b even asks, someone claims they are gone: a hears it and sends them.
    inject(net, Gone("x", {"a": [(1, 5)]}, [], []))
    net.run(0.2)
    assert net.nodes["a"].group_stats(G)["gone_contradicted"] == 1
    net.run(3.0)
    assert net.delivered["b"][G][-5:] == sent
    assert net.nodes["b"].group_stats(G)["skipped"] == 0
