"""Rate limits of control traffic in the group layer (docs/security.md, Rate limits).

Discovery (ADV, GRPS_INFO) has a limiter of its own, keyed by the sender the
message claims; each group has its own for SYNC_REQ and NACK, applied after
the tag verified in a keyed group. So an outsider who floods discovery in a
member's name costs that member no token of its group.
"""

from __future__ import annotations

import random

from m2mc.group.codec import (
    DISCOVERY_TAG,
    Adv,
    GrpInfo,
    GrpsInfo,
    MemberEntry,
    Nack,
    encode,
    group_tag,
)
from m2mc.group.config import GroupConfig
from m2mc.group.events import GroupDiscovered
from m2mc.wire.packet import fragments

from .harness import Net
from .test_keyed import GID, KEY

RATE, BURST = 10.0, 20.0


def small_limits() -> GroupConfig:
    return GroupConfig(control_rate=RATE, control_burst=BURST)


def inject(net: Net, frame: bytes, rng: random.Random, to: str | None = None) -> None:
    for datagram in fragments(rng.getrandbits(32), frame):
        net.inject(datagram, to=to)


def test_discovery_flood_claiming_a_member_costs_the_member_nothing() -> None:
    """ADVs claiming "c" at 500/s used to empty c's bucket at the other members, so
    c's sealed sync request after rejoining was refused and c never caught up."""
    net = Net(seed=21)
    for pid in "abc":
        net.add(pid, keys={GID: KEY})
    net.do("a", lambda n: n.create_group("keyed team", net.now, gid=GID))
    for pid in "bc":
        net.do(pid, lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(2.0)
    net.do("c", lambda n: n.leave_group(GID, net.now))
    net.run(4.0)  # c's linger ends
    for i in range(30):
        net.send("a", GID, f"while c was away {i}".encode())
    net.run(1.0)
    rng = random.Random(21)
    adv = encode(DISCOVERY_TAG, Adv("c"))
    answered = {pid: net.nodes[pid].groups[GID].msp.stats.requests_answered for pid in "ab"}

    def flood(seconds: float) -> None:
        for _ in range(int(seconds * 500)):
            inject(net, adv, rng, to="a")
            inject(net, adv, rng, to="b")
            net.run(1 / 500)

    # From here on c's discovery bucket at a and b stays empty: one ADV in ten takes the
    # token each refill brings. (The 10 ms off the refill's phase keeps c's request from
    # arriving exactly when a token has just come back, which would hide the bug.)
    flood(1.01)
    net.do("c", lambda n: n.join_group(GID, net.now))
    flood(3.0)  # c's request (and any NACK) arrives during the flood
    for pid in "ab":
        node = net.nodes[pid]
        stats = node.node_stats()
        assert stats["rate_limited_discovery"] > 1000, stats
        assert stats["rate_limited_control"] == 0, stats
    assert sum(net.nodes[pid].groups[GID].msp.stats.requests_answered - answered[pid]
               for pid in "ab") >= 1
    catchup = net.nodes["c"].groups[GID].msp.catchup
    assert catchup is not None and catchup.responses >= 1 and catchup.done
    net.check_group(GID, list("abc"))  # c got the 30 messages while the flood went on


def test_adv_is_rate_limited_per_sender() -> None:
    net = Net(seed=22, config=small_limits)
    a = net.add("a")
    net.do("a", lambda n: n.create_group("open", net.now, gid="open"))
    net.run(1.0)
    heard = a.gjlp.stats.advertisements_heard
    rng = random.Random(22)
    for _ in range(300):  # at one instant: no refill
        inject(net, encode(DISCOVERY_TAG, Adv("mallory")), rng)
    net.run(0.01)
    assert a.gjlp.stats.advertisements_heard - heard == BURST
    stats = a.node_stats()
    assert stats["rate_limited"] == stats["rate_limited_sender"] == 300 - BURST
    assert stats["rate_limited_total"] == 0
    # Another sender has a bucket of its own: a newcomer's advertisement is answered.
    z = net.add("z")
    net.run(1.0)
    assert a.gjlp.stats.advertisements_heard - heard == BURST + 1
    assert "open" in {info.gid for info in z.discovered()}


def test_grps_info_is_rate_limited_per_sender() -> None:
    net = Net(seed=23, config=small_limits)
    z = net.add("z")
    net.run(1.0)
    rng = random.Random(23)

    def grps_info(sender: str, gid: str) -> bytes:
        info = GrpInfo(gid, "", "sb", (MemberEntry(sender, 1, True),))
        return encode(DISCOVERY_TAG, GrpsInfo(sender, (info,)))

    for i in range(100):
        inject(net, grps_info("mallory", f"spam/{i}"), rng)
    net.run(0.01)
    spam = [info.gid for info in z.discovered() if info.gid.startswith("spam/")]
    assert len(spam) == BURST
    assert z.node_stats()["rate_limited_sender"] == 100 - BURST
    assert z.gjlp.stats.groups_dropped == 0  # refused by the limiter, not by the table
    inject(net, grps_info("honest", "real/1"), rng)
    net.run(0.01)
    assert "real/1" in {info.gid for info in z.discovered()}
    discovered = [e.info.gid for e in net.events["z"] if isinstance(e, GroupDiscovered)]
    assert "real/1" in discovered and len(discovered) == BURST + 1


def test_nacks_are_rate_limited_per_sender_within_their_group() -> None:
    net = Net(seed=24, config=small_limits)
    a = net.add("a")
    net.add("b")
    net.do("a", lambda n: n.create_group("open", net.now, gid="open"))
    net.do("b", lambda n: n.join_group("open", net.now, order="sb"))
    net.run(1.0)
    for i in range(5):
        net.send("a", "open", f"m{i}".encode())
    net.run(1.0)
    repair = a.groups["open"].repair
    received = repair.stats.nacks_received
    rng = random.Random(24)
    nack = encode(group_tag("open"), Nack("mallory", {"a": [(1, 5)]}, []))
    for _ in range(200):
        inject(net, nack, rng, to="a")
    net.run(0.01)
    assert repair.stats.nacks_received - received == BURST
    stats = a.node_stats()
    assert stats["rate_limited_control"] == stats["rate_limited_sender"] == 200 - BURST
    assert stats["rate_limited_total"] == 0
    # b's own NACK is still served: a retransmits what it asks for.
    retransmitted = repair.stats.retransmitted
    inject(net, encode(group_tag("open"), Nack("b", {"a": [(3, 3)]}, [])), rng, to="a")
    net.run(0.5)
    assert repair.stats.nacks_received - received == BURST + 1
    assert repair.stats.retransmitted > retransmitted


def test_messages_claiming_our_own_pid_spend_no_tokens() -> None:
    net = Net(seed=25, config=small_limits)
    a = net.add("a")
    net.do("a", lambda n: n.create_group("open", net.now, gid="open"))
    net.run(1.0)
    rng = random.Random(25)
    echo = a.stats.own_echo
    for _ in range(50):
        inject(net, encode(DISCOVERY_TAG, Adv("a")), rng)
        inject(net, encode(group_tag("open"), Nack("a", {"a": [(1, 1)]}, [])), rng)
    net.run(0.01)
    stats = a.node_stats()
    assert stats["own_echo"] - echo == 100
    assert stats["rate_limited"] == 0
    assert len(a.discovery_limiter) == 0 and len(a.groups["open"].limiter) == 0
