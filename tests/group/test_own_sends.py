"""A sender's own messages are taken in by the batch (m2mc.group.node_send): what any
step of the node sees is what it would have seen had each send been taken in whole
at once (docs/decisions.md, "A sender's own messages are taken in by the batch")."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.group.events import Delivered, DeliveredBatch
from m2mc.group.manager import GroupNode
from m2mc.ordering import ROOT, MessageId

from .harness import Net, group_of_three

PIDS = ("a", "b", "c")

# A step: a burst of sends by one node in one call (what waits to be taken in), with
# each message's parent; time passing; or a query of the node's state mid-burst.
_burst = st.tuples(st.just("burst"), st.sampled_from(PIDS), st.integers(1, 12),
                   st.sampled_from(["root", "chain", "theirs", "future"]),
                   st.booleans())
_run = st.tuples(st.just("run"), st.sampled_from([0.0002, 0.001, 0.004, 0.02]))
_steps = st.lists(st.one_of(_burst, _run), min_size=1, max_size=25)


def _play(steps: list[tuple[Any, ...]], at_once: bool, seed: int, loss: float
          ) -> tuple[dict[str, Any], list[bytes]]:
    """Run ``steps`` on a fresh group of three; ``at_once``: every send is taken in
    before the next (the reference). Returns what each node delivered, its counters
    and its log, and every datagram sent, in order."""
    datagrams: list[bytes] = []
    net = Net(seed=seed, tracing=False, counter=datagrams.append)
    gid = group_of_three(net, "own")
    net.loss = loss  # (after the joins, which this test is not about)
    start = len(datagrams)
    for step in steps:
        if step[0] == "run":
            net.run(step[1])
            continue
        _, pid, count, parent_kind, query = step

        def burst(node: GroupNode, now: float = net.now, count: int = count,
                  parent_kind: str = parent_kind, query: bool = query) -> None:
            last = None
            for i in range(count):
                theirs = [m for p, ms in net.delivered[node.pid].items() if p == gid
                          for m in ms if m.pid != node.pid]
                parent = {"root": ROOT, "chain": last or ROOT,
                          "theirs": theirs[-1] if theirs else ROOT,
                          "future": MessageId("b" if node.pid != "b" else "c", 10_000)
                          }[parent_kind]
                last = node.send(gid, b"m%d" % i, now, parent)
                if at_once:
                    node.settle_sends()
                if query and i == count // 2:
                    node.group_stats(gid)  # a step of its own: takes in what waits

        net.do(pid, burst)
    net.run(2.0)
    out: dict[str, Any] = {}
    for pid in PIDS:
        node = net.nodes[pid]
        stored = [(s.message, s.delivered) for s in net.stores[pid].load_messages(gid)]
        out[pid] = (net.delivered[pid].get(gid, []), node.node_stats(),
                    node.group_stats(gid), sorted(stored, key=lambda x: x[0].mid))
    return out, datagrams[start:]


@settings(max_examples=40, deadline=None)
@given(steps=_steps, seed=st.integers(0, 1000), loss=st.sampled_from([0.0, 0.1]))
def test_sends_taken_in_by_the_batch_change_nothing_anyone_sees(
        steps: list[tuple[Any, ...]], seed: int, loss: float) -> None:
    reference, reference_datagrams = _play(steps, True, seed, loss)
    batched, batched_datagrams = _play(steps, False, seed, loss)
    assert batched == reference
    assert batched_datagrams == reference_datagrams


def test_a_burst_of_sends_is_delivered_to_the_sender_in_order_at_its_next_step() -> None:
    net = Net(seed=3, tracing=False)
    gid = group_of_three(net, "own")
    node = net.nodes["a"]
    node.events()

    def burst(n: GroupNode) -> list[MessageId]:
        mids = [n.send(gid, b"x%d" % i, net.now, None) for i in range(5)]
        mids.append(n.send(gid, b"reply", net.now, mids[2]))
        return mids

    sent: list[MessageId] = []
    net.do("a", lambda n: sent.extend(burst(n)))
    net.run(1.0)
    assert net.delivered["a"][gid][-6:] == sent
    for pid in ("b", "c"):
        assert net.delivered[pid][gid][-6:] == sent
    assert net.nodes["a"].node_stats()["delivered"] >= 6


def test_the_next_step_of_any_kind_sees_the_sends_taken_in() -> None:
    net = Net(seed=4, tracing=False)
    gid = group_of_three(net, "own")
    node = net.nodes["a"]
    node.events()
    now = net.now
    first = node.send(gid, b"one", now)
    second = node.send(gid, b"two", now, first)
    delivered: list[MessageId] = []
    for event in node.events():  # a step: both are delivered, in order
        if isinstance(event, Delivered):
            delivered.append(event.message.mid)
        elif isinstance(event, DeliveredBatch):
            delivered.extend(m.mid for m in event.messages)
    assert delivered == [first, second]
    node.send(gid, b"three", now, second)
    node.take_save(now)  # the save is of the sends taken in
    payloads = [s.message.payload for s in net.stores["a"].load_messages(gid)]
    assert payloads[-3:] == [b"one", b"two", b"three"]
    assert all(s.delivered for s in net.stores["a"].load_messages(gid))


async def test_history_right_after_send_has_the_messages_just_sent() -> None:
    from m2mc.api import Node, NodeConfig

    async with Node(NodeConfig(pid="w", channel="mem://own-history")) as node:
        group = await node.join("own", order="sb")
        first = await group.send("one")
        await group.send("two", reply_to=first)
        # No step of the node between the sends and this call.
        assert [m.text for m in node.history(group.gid)][-2:] == ["one", "two"]
