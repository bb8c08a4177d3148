"""Keyed (authenticated) groups on the deterministic test network: members deliver
everything under loss, an outsider without the key changes nothing (join, forged
leave, injected history, repair storms), replays are dropped, discovery shows
keyed groups and membership news about them from discovery is ignored."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from m2mc.group.codec import (
    DISCOVERY_TAG,
    Ack,
    Body,
    Data,
    Decided,
    GrpInfo,
    GrpsInfo,
    Handover,
    Join,
    Leave,
    MemberEntry,
    Nack,
    Order,
    Prepare,
    Promise,
    Repair,
    SequencerInfo,
    Start,
    Status,
    SyncReq,
    SyncResp,
    encode,
    group_tag,
)
from m2mc.group.config import GroupConfig
from m2mc.group.groupwire import seal_frame
from m2mc.group.manager import GroupNode
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.security import GroupAuth, GroupSecret, KeyRequiredError
from m2mc.wire.m2mp import M2MPLayer
from m2mc.wire.packet import fragments

from .harness import Net

KEY = GroupSecret(bytes(range(32)))
WRONG = GroupSecret(bytes(range(1, 33)))
GID = "team"
TAG = group_tag(GID)


def keyed_net(seed: int = 1, loss: float = 0.0, members: str = "abc",
              config: Any = GroupConfig) -> Net:
    net = Net(seed=seed, loss=loss, config=config)
    for pid in members:
        net.add(pid, keys={GID: KEY})
    net.do(members[0], lambda n: n.create_group("keyed team", net.now, gid=GID))
    for pid in members[1:]:  # by name, with the description its creator gave
        net.do(pid, lambda n: n.join_group(GID, net.now, order="sb", desc="keyed team"))
    net.run(2.0)
    return net


def m2mp(payload: bytes, rng: random.Random) -> list[bytes]:
    return list(fragments(rng.getrandbits(32), payload))


def snapshot(node: GroupNode) -> dict[str, Any]:
    """What an outsider must not be able to change at a member."""
    inst = node.groups[GID]
    return {"members": inst.row.membership.entries(), "digest": inst.mop.digest(),
            "delivered": inst.delivered_count, "mirs": len(inst.msp.mirs),
            "pending_repairs": inst.repair.pending_repairs,
            "retransmitted": inst.repair.stats.retransmitted,
            "hw": dict(inst.repair.hw), "sequencer": inst.mop.seqr}


def forged_bodies(victim: str = "a") -> list[Body]:
    """Every kind of group message an outsider would forge, naming itself or a member."""
    fake = Message(MessageId(victim, 7), ROOT, b"forged history")
    stranger = Message(MessageId("mallory", 1), ROOT, b"hello from nowhere")
    huge_nack = {pid: [(1, 1 << 30)] for pid in "abc"}
    return [
        Join("mallory", 1, "sb", "x"),
        Leave(victim, 99),  # a forged leave of a real member
        Data(victim, [fake]), Data("mallory", [stranger]),
        Repair("mallory", [fake, stranger]),
        SyncResp("mallory", "b", 1, [fake, stranger], 0),
        Status("mallory", 50, {victim: 40}, (MemberEntry("mallory", 3, True),
                                             MemberEntry(victim, 50, False)), None, 0),
        Order("mallory", 9, [(1, fake.mid)]),
        Handover("mallory", SequencerInfo(9, "mallory", 1)),
        Ack(victim, 9, "mallory", 5), Prepare("mallory", 9, 0),
        Promise(victim, 9, "mallory", 0, "", 0, 0, []),
        Start("mallory", 9, 0, [(1, fake.mid)]), Decided("mallory", [(1, fake.mid)]),
        Nack("mallory", huge_nack, []), Nack(victim, huge_nack, []),
        SyncReq("mallory", 1, {}), SyncReq(victim, 5, {}),
    ]


# ------------------------------------------------------------------ delivery
def test_keyed_group_delivers_everything_in_sb_order_under_loss() -> None:
    net = keyed_net(seed=5, loss=0.2)
    rng = random.Random(5)
    sent: list[MessageId] = []
    for i in range(120):
        pid = "abc"[i % 3]
        parent = rng.choice(sent[-5:]) if sent and rng.random() < 0.7 else None
        sent.append(net.send(pid, GID, f"{pid} {i}".encode() * rng.randint(1, 40), parent))
        net.run(0.02)
    net.run(20.0)
    net.check_group(GID, list("abc"))
    for pid in "abc":
        node = net.nodes[pid]
        assert node.is_keyed(GID) and node.group_info(GID).keyed  # type: ignore[union-attr]
        stats = node.node_stats()
        assert stats["auth_failed"] == 0 and stats["sender_mismatch"] == 0
        assert stats["rate_limited"] == 0  # the repair traffic of 20% loss is not throttled
        group = node.group_stats(GID)
        assert group["auth_opened"] > 100 and group["auth_rejected"] == 0
        assert group["nacks_received"] + group["nacks_sent"] > 0  # loss was repaired


def test_every_group_message_of_a_keyed_group_is_sealed() -> None:
    net = keyed_net()
    frames: list[bytes] = []
    node = net.nodes["a"]
    output = node.output
    original = output.hand_to

    def spy(m2mp: M2MPLayer, now: float) -> None:  # every group message made, as sent
        frames.extend(output.outbox)
        original(m2mp, now)

    output.hand_to = spy  # type: ignore[method-assign]
    net.send("a", GID, b"x")
    net.run(3.0)
    group_frames = [f for f in frames if f[3:11] == TAG]
    assert group_frames and all(f[12] & 1 for f in group_frames)


def test_aead_suite_hides_the_payload_from_the_wire() -> None:
    secret = GroupSecret(bytes(range(32)), "chacha20-poly1305")
    seen: list[bytes] = []
    net = Net(seed=2, counter=seen.append)
    for pid in "ab":
        net.add(pid, keys={GID: secret})
    net.do("a", lambda n: n.create_group("secret", net.now, gid=GID))
    net.do("b", lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(1.0)
    net.send("a", GID, b"attack at dawn")
    net.run(2.0)
    net.check_group(GID, ["a", "b"])
    assert not any(b"attack at dawn" in d for d in seen)


# ------------------------------------------------------------------ outsiders
def test_outsider_without_the_key_changes_nothing_and_is_counted() -> None:
    rng = random.Random(3)
    net = keyed_net(seed=3)
    m = net.send("a", GID, b"real")
    net.run(2.0)
    before = {pid: snapshot(net.nodes[pid]) for pid in "abc"}
    evil = GroupAuth(GID, WRONG.key, "a")  # a guessed key, claiming to be a member
    forged = [encode(TAG, body) for body in forged_bodies()]
    forged += [seal_frame(evil, frame) for frame in forged]
    for _ in range(30):  # a repair storm: the same requests over and over
        forged += [encode(TAG, Nack("mallory", {"a": [(1, 1000)]}, [])),
                   encode(TAG, SyncReq("mallory", 1, {}))]
    for frame in forged:
        for datagram in m2mp(frame, rng):
            net.inject(datagram)
    net.run(5.0)
    for pid in "abc":
        node = net.nodes[pid]
        after = snapshot(node)
        assert after == before[pid], pid
        stats = node.node_stats()
        assert stats["auth_failed"] == len(forged)
        group = node.group_stats(GID)
        assert group["auth_unauthenticated"] == len(forged) - len(forged_bodies())
        assert group["auth_bad_tag"] == len(forged_bodies())
        assert node.members(GID) == ["a", "b", "c"]
    net.send("b", GID, b"still fine", reply_to=m)
    net.run(2.0)
    net.check_group(GID, list("abc"))


def test_outsider_joining_by_name_without_the_key_is_not_a_member() -> None:
    net = keyed_net(seed=4)
    eve = net.add("eve")  # no key: joins the group by name, as an open group
    net.do("eve", lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(2.0)
    net.send("eve", GID, b"let me in")
    m = net.send("a", GID, b"members only")
    net.run(3.0)
    for pid in "abc":
        node = net.nodes[pid]
        assert "eve" not in node.members(GID)
        assert MessageId("eve", 1) not in net.delivered[pid][GID]
        assert node.node_stats()["auth_failed"] > 0
    assert m not in net.delivered["eve"].get(GID, [])
    assert eve.node_stats()["sealed_refused"] > 0  # she cannot read the sealed traffic


def test_insider_cannot_speak_under_another_sealed_sender_id() -> None:
    net = keyed_net(seed=6)
    mallory = GroupAuth(GID, KEY.key, "mallory")  # holds the key, but sealed as mallory
    frame = seal_frame(mallory, encode(TAG, Leave("b", 99)))
    for datagram in m2mp(frame, random.Random(1)):
        net.inject(datagram)
    net.run(2.0)
    for pid in "ac":
        assert net.nodes[pid].node_stats()["sender_mismatch"] == 1
        assert net.nodes[pid].members(GID) == ["a", "b", "c"]


def test_replayed_frames_are_dropped() -> None:
    captured: list[bytes] = []
    net = keyed_net(seed=7)
    net.counter = captured.append
    m = net.send("a", GID, b"once")
    net.do("c", lambda n: n.leave_group(GID, net.now))
    net.run(4.0)
    net.do("c", lambda n: n.join_group(GID, net.now))
    net.run(3.0)
    net.counter = None
    assert net.nodes["b"].members(GID) == ["a", "b", "c"]
    # Long after M2MP forgot these message ids, an outsider replays everything it recorded,
    # including c's old leave.
    net.run(10.0)
    before = snapshot(net.nodes["b"])
    for datagram in captured:
        net.inject(datagram, to="b")
    net.run(3.0)
    node = net.nodes["b"]
    group = node.group_stats(GID)
    assert group["auth_replayed"] + group["auth_stale"] > 0
    assert snapshot(node) == before
    assert net.delivered["b"][GID].count(m) == 1


# ------------------------------------------------------------------ rate limits
def test_rate_limiter_refuses_a_flood_of_control_messages_but_not_members() -> None:
    config = lambda: GroupConfig(control_rate=20.0, control_burst=40.0)  # noqa: E731
    net = keyed_net(seed=8, config=config)
    insider = GroupAuth(GID, KEY.key, "mallory")  # a key holder gone rogue: only rates help
    rng = random.Random(8)
    for i in range(500):
        frame = seal_frame(insider, encode(TAG, SyncReq("mallory", i + 1, {})))
        for datagram in m2mp(frame, rng):
            net.inject(datagram, to="a")
    net.run(0.5)
    a = net.nodes["a"]
    stats = a.node_stats()
    assert 500 - 40 - 20 <= stats["rate_limited"] <= 500 - 40
    assert len(a.groups[GID].msp.mirs) <= a.config.max_mirs
    # Normal traffic is still served: a member's request is not throttled by mallory.
    net.send("b", GID, b"after the flood")
    net.run(3.0)
    net.check_group(GID, list("abc"))


def test_flood_of_invented_senders_is_held_to_the_total_rate() -> None:
    config = lambda: GroupConfig(control_total_rate=100.0, control_total_burst=200.0)  # noqa: E731
    net = Net(seed=9, config=config)
    net.add("a")
    net.do("a", lambda n: n.create_group("open", net.now, gid="open"))
    rng = random.Random(9)
    for i in range(1000):
        for datagram in m2mp(encode(group_tag("open"), Nack(f"x{i}", {"a": [(1, 5)]}, [])), rng):
            net.inject(datagram)
    net.run(0.1)
    stats = net.nodes["a"].node_stats()
    assert stats["rate_limited"] >= 1000 - 200 - 20
    assert stats["rate_limited_total"] == stats["rate_limited"]


# ------------------------------------------------------------------ discovery
def test_keyless_node_sees_a_keyed_group_but_cannot_join_without_the_key() -> None:
    net = keyed_net(seed=10, members="ab")
    net.add("d")
    net.do("d", lambda n: n.advertise(net.now))
    net.run(1.0)
    d = net.nodes["d"]
    info = d.group_info(GID)
    assert info is not None and info.keyed and info.desc == "keyed team"
    with pytest.raises(KeyRequiredError):
        d.join_group(GID, net.now)
    with pytest.raises(KeyRequiredError):
        d.join_group(GID, net.now, order="sb")
    net.do("d", lambda n: n.join_group(GID, net.now, key=KEY))
    net.run(3.0)
    assert d.members(GID) == ["a", "b", "d"] and net.nodes["a"].members(GID) == ["a", "b", "d"]
    m = net.send("d", GID, b"hi")
    net.run(2.0)
    assert m in net.delivered["a"][GID]


def test_discovery_news_about_keyed_membership_is_ignored() -> None:
    net = keyed_net(seed=11)
    forged = GrpsInfo("mallory", (GrpInfo(GID, "keyed team", "sb", (
        MemberEntry("mallory", 5, True), MemberEntry("b", 99, False))),))
    for datagram in m2mp(encode(DISCOVERY_TAG, forged), random.Random(2)):
        net.inject(datagram)
    net.run(1.0)
    for pid in "abc":
        node = net.nodes[pid]
        assert node.members(GID) == ["a", "b", "c"]
        assert node.node_stats()["gjlp_keyed_members_ignored"] >= 1


def test_sealed_frames_are_refused_by_open_groups_and_on_discovery() -> None:
    net = Net(seed=12)
    net.add("a")
    net.do("a", lambda n: n.create_group("open", net.now, gid="open"))
    auth = GroupAuth("open", KEY.key, "mallory")
    rng = random.Random(3)
    for frame in (seal_frame(auth, encode(group_tag("open"), Join("mallory", 1, "sb", ""))),
                  seal_frame(auth, encode(DISCOVERY_TAG, GrpsInfo("mallory", ())))):
        for datagram in m2mp(frame, rng):
            net.inject(datagram)
    net.run(0.5)
    a = net.nodes["a"]
    assert a.node_stats()["sealed_refused"] == 2 and a.members("open") == ["a"]


# ------------------------------------------------------------------ restarts
def test_restart_without_the_key_keeps_a_keyed_group_closed() -> None:
    net = keyed_net(seed=13)
    m = net.send("a", GID, b"before")
    net.run(2.0)
    net.crash("c")
    net.send("a", GID, b"while c is down", reply_to=m)
    net.run(1.0)
    c = net.restart("c", keys={})
    net.run(2.0)
    assert GID in c.locked and not c.is_member(GID) and c.is_keyed(GID)
    with pytest.raises(KeyRequiredError):
        c.join_group(GID, net.now)
    net.do("c", lambda n: n.join_group(GID, net.now, key=KEY))
    net.run(5.0)
    assert c.is_member(GID) and not c.locked
    net.check_group(GID, list("abc"))


def test_restart_with_the_key_continues_above_old_counters() -> None:
    net = keyed_net(seed=14)
    net.send("c", GID, b"one")
    net.run(1.0)
    net.crash("c")
    net.run(1.0)
    net.restart("c")  # same keys as before; its counter starts at the (later) clock
    net.run(2.0)
    net.send("c", GID, b"two")
    net.run(2.0)
    net.check_group(GID, list("abc"))
    for pid in "ab":
        assert net.nodes[pid].group_stats(GID)["auth_rejected"] == 0


def test_key_cannot_change_while_a_member() -> None:
    net = keyed_net(seed=15, members="ab")
    from m2mc.errors import UsageError

    with pytest.raises(UsageError):
        net.nodes["a"].set_key(GID, WRONG)
    net.nodes["a"].set_key(GID, KEY)  # the same key: nothing to do


# ------------------------------------------------------------------ open groups
def test_open_group_membership_bound_is_filled_by_forged_joins() -> None:
    """The documented limitation of open groups: forged JOINs of invented processes
    fill ``max_members``; past it new entries are refused and counted, the members
    already known still update, and the group's traffic goes on."""
    config = lambda: GroupConfig(max_members=8)  # noqa: E731
    net = Net(seed=16, config=config)
    for pid in "ab":
        net.add(pid)
    net.do("a", lambda n: n.create_group("open", net.now, gid="open"))
    net.do("b", lambda n: n.join_group("open", net.now, order="sb"))
    net.run(1.0)
    rng = random.Random(4)
    for i in range(20):
        for datagram in m2mp(encode(group_tag("open"), Join(f"fake{i}", 1, "sb", "")), rng):
            net.inject(datagram)
    net.run(1.0)
    a = net.nodes["a"]
    assert len(a.groups["open"].row.membership) == 8
    assert a.group_stats("open")["members_refused"] >= 20 - 6
    net.add("newcomer")
    net.do("newcomer", lambda n: n.join_group("open", net.now, order="sb"))
    net.run(2.0)
    assert "newcomer" not in a.members("open")  # refused at the bound
    net.do("b", lambda n: n.leave_group("open", net.now))  # a known member still updates
    net.run(1.0)
    assert "b" not in a.members("open")
    m = net.send("newcomer", "open", b"heard anyway")
    net.run(2.0)
    assert m in net.delivered["a"]["open"]  # data of a non-member is still delivered
    # The same forged JOINs at a keyed group: refused before they touch the table.
    keyed = keyed_net(seed=16, config=config)
    for i in range(20):
        for datagram in m2mp(encode(TAG, Join(f"fake{i}", 1, "sb", "")), rng):
            keyed.inject(datagram)
    keyed.run(1.0)
    assert keyed.nodes["a"].members(GID) == ["a", "b", "c"]


# ------------------------------------------------------------------ hypothesis
_BODIES = forged_bodies()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_BODIES) - 1),
                          st.sampled_from(["plain", "wrong_key", "flip", "truncate"]),
                          st.integers(0, 10_000)), min_size=1, max_size=25))
def test_any_unkeyed_or_tampered_message_changes_nothing(
        attacks: list[tuple[int, str, int]]) -> None:
    a = _hyp_member()
    before = snapshot(a)
    rejected = a.node_stats()["auth_failed"] + a.node_stats()["malformed"]
    legit = GroupAuth(GID, KEY.key, "b", counter_start=1 << 50)
    wrong = GroupAuth(GID, WRONG.key, "b")
    for index, how, where in attacks:
        frame = encode(TAG, _BODIES[index])
        if how == "plain":
            payload = frame
        elif how == "wrong_key":
            payload = seal_frame(wrong, frame)
        else:
            sealed = bytearray(seal_frame(legit, frame))
            if how == "flip":
                bit = where % (len(sealed) * 8)
                sealed[bit // 8] ^= 1 << (bit % 8)
            else:
                del sealed[max(13, where % len(sealed)):]
            payload = bytes(sealed)
        a.receiver.on_message(payload, 1.0)
    assert snapshot(a) == before
    stats = a.node_stats()
    assert stats["auth_failed"] + stats["malformed"] + stats["sealed_refused"] \
        + stats["unknown_group"] - rejected == len(attacks)


def _hyp_member() -> GroupNode:
    """A fresh member of a two-member keyed group."""
    return keyed_net(seed=17, members="ab").nodes["a"]


@settings(max_examples=40, deadline=None)
@given(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=64),
       st.lists(st.integers(0, 400), min_size=1, max_size=60),
       st.sampled_from(["hmac-sha256", "aes-256-gcm"]))
def test_a_sealed_batch_still_fits_one_m2mp_packet(pid: str, sizes: list[int],
                                                   suite: str) -> None:
    from m2mc.group.codec import Kind, decode_body
    from m2mc.group.groupwire import open_frame
    from m2mc.security import AuthConfig
    from m2mc.wire.m2mp import M2MPConfig
    from m2mc.wire.packet import MAX_FRAGMENT

    node = GroupNode(pid, rng=random.Random(1), counter_start=1 << 40,
                     m2mp_config=M2MPConfig(flow_control=False))
    node.start(0.0)
    node.create_group("g", 0.0, gid=GID, key=GroupSecret(KEY.key, suite))
    node.datagrams_to_send(0.0)
    frames: list[bytes] = []
    output = node.output
    original = output.hand_to

    def spy(m2mp: M2MPLayer, now: float) -> None:  # every group message made, as sent
        frames.extend(output.outbox)
        original(m2mp, now)

    output.hand_to = spy  # type: ignore[method-assign]
    for i, size in enumerate(sizes):
        node.send(GID, bytes(size), 0.0, MessageId(pid, i) if i else None)
    node.datagrams_to_send(0.0)
    reader = GroupAuth(GID, KEY.key, "reader", config=AuthConfig(suite))
    records = 0
    for sealed in frames:
        frame, _ = open_frame(reader, sealed)
        if frame.kind != Kind.DATA:
            continue
        body = decode_body(frame.kind, frame.body)
        assert isinstance(body, Data)
        records += len(body.records)
        # A batch fits one packet; only a record too big for one may span several.
        assert len(sealed) <= MAX_FRAGMENT or len(body.records) == 1, (len(sealed), pid)
    assert records == len(sizes)
