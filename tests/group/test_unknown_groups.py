"""Discovery's repair (m2mc/group/unknown_groups.py, docs/group.md section 4): a node that
missed every description of a group (its own start ADV went out before the group existed,
and it lost the group's announcements) learns of it from the group's own traffic, which
reaches it all the time; at a bounded cost, whatever an outsider sends.

On the sans-IO core in virtual time (tests/group/harness.py), with the default status
interval, so that a group's statuses are the traffic a newcomer hears.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from m2mc.api import Node, NodeConfig
from m2mc.group.codec import Status, encode, group_tag
from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupDiscovered
from m2mc.group.unknown_groups import HOLDOFF_FIRST, HOLDOFF_MAX
from m2mc.wire.packet import fragments

from .harness import Net, group_of_three


def discovered(net: Net, pid: str) -> list[str]:
    return [e.info.gid for e in net.events.get(pid, []) if isinstance(e, GroupDiscovered)]


def advs(net: Net, pid: str) -> tuple[int, int]:
    stats = net.nodes[pid].gjlp.stats
    return stats.unknown_group_advs, stats.unknown_group_advs_suppressed


def group_then_late(net: Net, late: list[str]) -> str:
    """a makes "ops", b and c join, while ``late`` nodes start cut off (their start ADV
    and every announcement of "ops" lost); then the network heals."""
    net.partition(late)
    for pid in late:
        net.add(pid)
    gid = group_of_three(net, "ops")
    net.run(3.5)  # past the announcements at 1 and 3 s
    assert not any(discovered(net, pid) for pid in late)
    net.heal()
    return gid


def test_a_node_that_missed_every_description_learns_of_the_group_from_its_traffic() -> None:
    net = Net(seed=5)
    gid = group_then_late(net, ["d"])
    net.run(30.0)  # a few status keepalives of the group
    assert discovered(net, "d") == [gid]
    assert advs(net, "d") == (1, 0)  # one ADV was enough
    net.do("d", lambda n: n.join_group(gid, net.now))
    net.send("a", gid, b"hello")
    net.run(3.0)
    net.check_group(gid, ["a", "b", "c", "d"])


def test_it_holds_on_a_lossy_network_for_every_seed() -> None:
    for seed in range(1, 21):
        net = Net(seed=seed, loss=0.2)
        gid = group_then_late(net, ["d"])
        net.run(60.0)
        assert gid in discovered(net, "d"), seed
        assert advs(net, "d")[0] <= 4, (seed, advs(net, "d"))


def test_a_short_absence_without_an_interface_signal_still_finds_the_group_made_meanwhile(
        ) -> None:
    """Away for 20 s (under the 35 s silence that counts as a return, and no interface
    change): a group created meanwhile is found through its messages once back."""
    net = Net(seed=13)
    net.add("d")
    ops = group_of_three(net, "ops")
    net.do("d", lambda n: n.join_group(ops, net.now))
    net.run(3.5)
    net.partition(["d"])
    news = str(net.do("b", lambda n: n.create_group("news", net.now)))
    net.run(0.5)
    net.do("c", lambda n: n.join_group(news, net.now))
    net.run(19.5)
    net.heal()
    assert news not in discovered(net, "d")
    for _ in range(10):
        net.send("c", news, b"in the news")
        net.run(1.0)
    assert news in discovered(net, "d")
    assert not net.nodes["d"].reconnect.stats.reconnects  # no return was noticed
    assert advs(net, "d")[0] + advs(net, "d")[1] >= 1


def test_a_crowd_of_newcomers_costs_about_one_advertisement() -> None:
    late = [f"n{i}" for i in range(20)]
    net = Net(seed=7)
    gid = group_then_late(net, late)
    net.run(30.0)
    assert all(discovered(net, pid) == [gid] for pid in late)
    sent = sum(advs(net, pid)[0] for pid in late)
    assert 1 <= sent <= 3, sent  # the first one's replies described the group to all


def test_known_groups_cost_nothing_whether_discovered_rejected_or_left() -> None:
    net = Net(seed=9)
    for pid in "abcd":
        net.add(pid)
    ops = str(net.do("a", lambda n: n.create_group("ops", net.now)))
    news = str(net.do("b", lambda n: n.create_group("news", net.now)))
    misc = str(net.do("c", lambda n: n.create_group("misc", net.now)))
    net.run(1.0)
    for pid in "bc":
        net.do(pid, lambda n: n.join_group(ops, net.now))
    net.do("a", lambda n: n.join_group(news, net.now))
    net.do("d", lambda n: n.join_group(misc, net.now))
    net.run(2.0)
    net.do("d", lambda n: n.leave_group(misc, net.now))  # left: a LEFT row
    net.do("d", lambda n: n.reject_group(news))  # rejected: an N/A row
    # ops stays discovered, not joined
    for i in range(600):
        net.send("abc"[i % 3], ops, b"x")
        net.run(0.1)
    assert net.nodes["d"].m2mp.stats.filtered_out > 500  # turned away by its filters
    assert advs(net, "d") == (0, 0)
    assert net.nodes["d"].gjlp.stats.advertisements_sent == 1  # its start's


@pytest.mark.parametrize("nodes", [1, 10])
def test_an_outsider_spraying_tags_gets_a_few_advertisements_at_most(nodes: int) -> None:
    """Made-up tags that no reply will ever describe, 20 a second for 10 minutes: the
    network (one node, or ten) advertises 2, 4, ... 64 s apart, then every 64 s."""
    rng = random.Random(3)
    net = Net(seed=11)
    pids = [f"n{i}" for i in range(nodes)]
    for pid in pids:
        net.add(pid)
    net.run(1.0)
    seconds, every, ramp = 600.0, 0.05, 200.0

    def sent() -> int:
        return sum(advs(net, pid)[0] for pid in pids)

    for i in range(int(seconds / every)):
        tag = group_tag(f"nobody/{rng.randrange(1 << 30)}")
        for datagram in fragments(i, encode(tag, Status("x", 1, {}, (), None, 0))):
            net.inject(datagram)
        net.run(every)
        if i == int(ramp / every):
            ramped = sent()
    # The ramp: 2, 4, ... 32 s apart; in a crowd each node doubles its own holdoff, the
    # ones that suspected less often later: up to twice as many (13 with 20 nodes over 200 s).
    assert 6 <= ramped <= 16, ramped
    # Then one per 64 s (+2: two that crossed in flight).
    assert sent() - ramped <= (seconds - ramp) / HOLDOFF_MAX + 2, (ramped, sent())
    assert HOLDOFF_FIRST * 2 ** 5 == HOLDOFF_MAX
    assert sum(net.nodes[pid].gjlp.stats.advertisements_sent for pid in pids) == sent() + nodes


async def test_through_the_api_a_newcomer_finds_a_group_it_was_never_told_of() -> None:
    """The asyncio runtime over mem://: d starts without advertising (as if its start's
    ADV were lost) after the group's announcements are over, and still finds it."""
    channel = f"mem://unknown-{uuid.uuid4().hex[:8]}"
    async with Node(NodeConfig(pid="a", channel=channel)) as a:
        ops = await a.create_group("ops")
        while a._node().gjlp.next_deadline() is not None:  # announcements still to come
            await asyncio.sleep(0.05)
        silent = GroupConfig(advertise_on_start=False)
        async with Node(NodeConfig(pid="d", channel=channel, group=silent)) as d:
            assert d.discovered() == []
            async for event in d.events():  # a's statuses, then d's ADV and a's reply
                if isinstance(event, GroupDiscovered):
                    assert event.info.gid == ops.gid
                    break
            joined = await d.join(ops.gid)
            await ops.send(b"hello")
            assert (await joined.receive(timeout=10.0)).data == b"hello"
            assert d.stats()["gjlp_unknown_group_advs"] == 1
