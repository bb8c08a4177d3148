"""A keyed deployment (docs/security.md, "Infrastructure mode"): every frame sealed
with the deployment key. An outsider without it cannot join, forge NEW, NACK or the
coordinator's order (NORMAL, TRANSFER, Replicate, Sync, Commit, Takeover), nor replay
what it recorded; every refusal is counted. Rate limits hold back a flood of JOINs
and NACKs; an unkeyed deployment keeps working and refuses sealed frames."""

from __future__ import annotations

import random

import pytest
from infra_harness import Net, check_complete, check_total_order, run_workload

from m2mc.errors import DecodeError
from m2mc.infra import messages as m
from m2mc.infra.codec import encode
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.wire import INFRA_KEY_CONTEXT, SEALED_MAGIC, InfraWire, claimed_sender
from m2mc.security.auth import GroupAuth
from m2mc.sim.testing import Arrival

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))


def keyed_net(seed: int = 1, **kw: object) -> Net:
    net = Net(seed=seed, key=KEY, **kw)  # type: ignore[arg-type]
    for i in range(3):
        net.add_member(f"M{i}", net.host_ids[i])
    net.run_until(3.0)
    assert all(mc.is_member for mc in net.members.values())
    return net


def sequenced(net: Net) -> int:
    c = net.coordinator()
    assert c is not None
    core = net.hosts[c].coordinator
    assert core is not None
    return core.work.gseq


def auth_stats(core: HostCore) -> dict[str, int]:
    return core.security_stats()


# ------------------------------------------------------------------ the wire itself
def test_sealed_frames_round_trip_and_name_their_sender() -> None:
    a = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "H1"))
    b = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "H2"))
    msg = m.Beacon("H1", 7, "127.0.0.1:9", "H1")
    data = a.encode(msg)
    assert data.startswith(SEALED_MAGIC) and data != a.encode(msg)  # sealed afresh each time
    assert b.decode(data) == (msg, "H1")
    with pytest.raises(DecodeError):
        b.decode(data)  # the same bytes again: a replay
    assert b.auth is not None and b.auth.stats.replayed == 1


def test_every_claimed_identity_is_the_sealing_one() -> None:
    assert claimed_sender(m.Hello("A", "H1", None, 0)) == "A"
    assert claimed_sender(m.Normals("H1", ())) == "H1"
    assert claimed_sender(m.Vote(Epoch(1, 0.0, "H1"), "H2", "H1")) == "H2"
    assert claimed_sender(m.ElectStart(Epoch(1, 0.0, "H3"))) == "H3"
    assert claimed_sender(m.Takeover(Epoch(1, 0.0, "H1"), "H1", 0)) == "H1"
    insider = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "M9"))
    gateway = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "H1"))
    with pytest.raises(DecodeError):  # a key holder speaking as another member
        gateway.decode(insider.encode(m.Hello("M1", "H1", None, 0)))
    assert gateway.stats.wrong_sender == 1


def test_plain_frames_are_refused_by_a_keyed_wire_and_sealed_by_an_unkeyed_one() -> None:
    keyed = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "H1"))
    plain = InfraWire()
    hello = m.Hello("A", "H1", None, 0)
    with pytest.raises(DecodeError):
        keyed.decode(encode(hello))
    assert keyed.auth is not None and keyed.auth.stats.unauthenticated == 1
    with pytest.raises(DecodeError):
        plain.decode(InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "A")).encode(hello))
    assert plain.stats.unkeyed_sealed == 1
    assert plain.decode(encode(hello)) == (hello, None)


def test_the_deployment_key_is_bound_to_infrastructure_mode() -> None:
    """A group key reused as the deployment key gives unrelated subkeys."""
    group = GroupAuth("chat", KEY, "H1")
    wire = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, KEY, "H2"))
    forged = group.seal(SEALED_MAGIC + b"\x00", encode(m.Beacon("H1", 0, "u", "H1"))[7:])
    with pytest.raises(DecodeError):
        wire.decode(forged)
    assert wire.auth is not None and wire.auth.stats.bad_tag == 1


# ------------------------------------------------------------------ a keyed deployment
def test_keyed_deployment_keeps_p1_to_p7_across_a_coordinator_crash() -> None:
    net = Net(seed=5, loss=0.2, key=KEY)
    run_workload(net, members=6, rounds=80, crash_at=40)
    check_complete(net)
    for h, core in net.hosts.items():
        if net.alive[h]:
            stats = auth_stats(core)
            assert stats["auth_opened"] > 100 and stats["auth_rejected"] == 0, (h, stats)


def test_outsider_without_the_key_cannot_join() -> None:
    net = keyed_net()
    before = sequenced(net)
    mallory = MemberId("mallory", 1)
    plain = encode(m.JoinReq("mallory", "H1", 1, mallory))
    wrong = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, OTHER_KEY, "mallory")).encode(
        m.JoinReq("mallory", "H1", 1, mallory))
    for _ in range(5):
        net.inject_cell("H1", "mallory-addr", plain)
        net.inject_cell("H1", "mallory-addr", wrong)
    net.run_until(net.now + 2.0)
    stats = auth_stats(net.hosts["H1"])
    assert stats["auth_unauthenticated"] == 5 and stats["auth_bad_tag"] == 5
    assert "mallory" not in net.hosts["H1"].gateway.local  # not even greeted
    assert sequenced(net) == before  # no "has joined" was ever numbered
    assert all(mallory not in core.log.state.rows for core in net.hosts.values())


def test_outsider_cannot_forge_new_or_nack_for_a_member() -> None:
    net = keyed_net()
    victim = net.members["M0"]
    assert victim.mid is not None
    before = sequenced(net)
    forged_new = encode(m.NewReq("M0", "H1", 99, victim.mid, (m.NewItem(1, 1, b"forged"),)))
    forged_nack = encode(m.NackReq("M0", "H1", 98, victim.mid, 0, 1000))
    for _ in range(10):
        net.inject_cell("H1", "M0", forged_new)
        net.inject_cell("H1", "M0", forged_nack)
    net.run_until(net.now + 2.0)
    g = net.hosts["H1"].gateway
    assert g.stats.nacks == 0 and not g.trans  # no repair work started
    assert sequenced(net) == before
    assert all(b"forged" not in d.body for log in net.logs.values() for d in log.delivered)
    assert auth_stats(net.hosts["H1"])["auth_unauthenticated"] == 20


def test_outsider_cannot_forge_the_order_members_deliver() -> None:
    net = keyed_net()
    before = {n: list(log.delivered) for n, log in net.logs.items()}
    fake = m.Record(1, sequenced(net) + 1, m.APP, MemberId("M1", 1), 1, 1, 0, b"forged order")
    mid0 = net.members["M0"].mid
    assert mid0 is not None
    for data in (encode(m.Normals("H1", (fake,))), encode(m.Transfer("H1", mid0, (fake,))),
                 encode(m.Beacon("H1", 10**9, "elsewhere", "H1")),
                 InfraWire(GroupAuth(INFRA_KEY_CONTEXT, OTHER_KEY, "H1")).encode(
                     m.Normals("H1", (fake,)))):
        net.inject_member("M0", data)
    net.run_until(net.now + 1.0)
    m0 = net.members["M0"]
    assert m0.stats.decode_errors == 4 and m0.seen_high < 10**9
    assert m0.wire.auth is not None and m0.wire.auth.stats.unauthenticated == 3
    net.send("M1", b"real")
    net.run_until(net.now + 1.0)
    for n, log in net.logs.items():
        new = [d.body for d in log.delivered[len(before[n]):]]
        assert new == [b"real"], (n, new)
    check_total_order(net)


def test_outsider_cannot_take_over_or_rewrite_the_log_on_the_backbone() -> None:
    net = keyed_net()
    master = net.coordinator()
    assert master is not None
    victim = next(h for h in net.host_ids if h != master)
    core = net.hosts[victim]
    high, epoch = core.log.high, core.epoch
    big = Epoch(epoch.round + 100, 0.0, "evil")
    rec = m.Record(high + 1, 10**6, m.APP, MemberId("M1", 1), 1, 1, 0, b"forged")
    for frame in (m.Takeover(big, "evil", 0), m.Replicate(big, high + 1, (rec,)),
                  m.Sync(big, high + 1, 0, None, (rec,)), m.Commit(big, high + 1, high + 1),
                  m.ElectStart(big)):
        net.inject_backbone(victim, master, encode(frame))  # claims to come from the master
        stolen_id = InfraWire(GroupAuth(INFRA_KEY_CONTEXT, OTHER_KEY, master)).encode(frame)
        net.inject_backbone(victim, master, stolen_id)
    net.run_until(net.now + 2.0)
    assert core.epoch == epoch and core.master == master
    assert core.log.promised <= epoch and core.log.by_gseq(10**6) is None
    stats = auth_stats(core)
    assert stats["auth_unauthenticated"] == 5 and stats["auth_bad_tag"] == 5
    net.send("M2", b"still fine")
    net.run_until(net.now + 1.0)
    assert all(log.delivered[-1].body == b"still fine" for log in net.logs.values())


def test_recorded_frames_replayed_are_refused() -> None:
    """An outsider records members' sealed NEWs and greetings and the gateways' sealed
    NORMALs and plays them back where they went: the replay windows refuse them all,
    so nothing is done or delivered twice."""
    net = keyed_net()
    up: list[tuple[str, str, bytes]] = []
    down: list[tuple[str, bytes]] = []

    def tap(frame: Arrival) -> None:  # what reached a gateway's uplink, or a member
        if frame.node.id in net.hosts and frame.src.id in net.members:
            up.append((frame.node.id, frame.src.id, frame.data))
        elif frame.node.id in net.members:
            down.append((frame.node.id, frame.data))

    with net.tapped(tap):
        net.send("M0", b"once")
        net.run_until(net.now + 1.0)
    assert up and down
    delivered = {n: len(log.delivered) for n, log in net.logs.items()}
    for h, node, data in up:
        net.inject_cell(h, node, data)
    for node, data in down:
        net.inject_member(node, data)
    net.run_until(net.now + 1.0)
    assert {n: len(log.delivered) for n, log in net.logs.items()} == delivered
    refused = sum(auth_stats(c)["auth_replayed"] + auth_stats(c)["auth_stale"]
                  for c in net.hosts.values())
    assert refused == len(up)
    members = [mc.wire.auth for mc in net.members.values()]
    assert sum(a.stats.replayed + a.stats.stale for a in members if a) == len(down)


def test_a_backbone_frame_replayed_to_another_host_is_refused() -> None:
    """Frames for one host are sealed for it: the Commit the master sent to one host,
    played to another (which never saw that counter), is refused as misdirected."""
    net = keyed_net()
    master = net.coordinator()
    assert master is not None
    a, b = (h for h in net.host_ids if h != master)
    sent: list[tuple[str, bytes]] = []

    def tap(frame: Arrival) -> None:  # what the master's backbone frames brought
        if frame.src.id == master and frame.node.id in net.hosts:
            sent.append((frame.node.id, frame.data))

    with net.tapped(tap):
        net.send("M0", b"x")
        net.run_until(net.now + 0.5)
    for_a = [data for dst, data in sent if dst == a and data[3] > 0]  # sealed for a
    assert for_a
    for data in for_a:
        net.inject_backbone(b, master, data)
    assert auth_stats(net.hosts[b])["frames_misdirected"] == len(for_a)


# ------------------------------------------------------------------ rate limits
def test_a_flood_of_joins_and_nacks_is_rate_limited_per_computer() -> None:
    cfg = InfraConfig(control_rate=5.0, control_burst=10.0)
    net = Net(seed=2, cfg=cfg)  # unkeyed: anybody's frames are processed, up to the limit
    net.add_member("M0", "H1")
    net.run_until(3.0)
    g = net.hosts["H1"].gateway
    forwarded = g.stats.forwarded
    for i in range(200):
        net.inject_cell("H1", "x", encode(m.JoinReq("X", "H1", i + 1, MemberId("X", i))))
        net.inject_cell("H1", "x", encode(m.NackReq("X", "H1", i + 1, MemberId("X", 0), 0, 99)))
    assert g.stats.rate_limited >= 380  # about burst (10) passed, the rest was refused
    assert g.stats.forwarded - forwarded <= 10  # ... before costing the coordinator work
    net.send("M0", b"unaffected")
    net.run_until(net.now + 1.0)
    assert net.logs["M0"].delivered[-1].body == b"unaffected"


def test_invented_senders_are_held_by_the_total_budget() -> None:
    cfg = InfraConfig(control_total_rate=20.0, control_total_burst=50.0)
    net = Net(seed=2, cfg=cfg)
    net.run_until(2.0)
    g = net.hosts["H2"].gateway
    for i in range(500):
        node = f"X{i}"
        net.inject_cell("H2", node, encode(m.JoinReq(node, "H2", 1, MemberId(node, i))))
    assert g.limiter.stats.limited_total >= 440 and g.stats.forwarded <= 60


def test_members_join_and_deliver_under_the_default_limits_with_heavy_loss() -> None:
    net = Net(seed=3, loss=0.3, key=KEY)
    run_workload(net, members=6, rounds=60)
    check_complete(net)
    assert all(core.gateway.stats.rate_limited == 0 for core in net.hosts.values())


def test_host_core_without_wire_is_unkeyed() -> None:
    core = HostCore(HostIdentity("H1"), InfraConfig(), random.Random(1))
    assert not core.wire.keyed
    core.receive_cell("a", b"garbage", 0.0)
    assert core.stats.decode_errors == 1 and core.security_stats()["frames_malformed"] == 1
