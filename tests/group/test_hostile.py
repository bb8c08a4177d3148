"""Bad input never crashes a node: forged or malformed group messages, unknown
groups, absurd sequence numbers and huge sync requests are counted and dropped,
and every table they could fill stays within its bound. Forged total-order
ballots (absurd epochs, outsiders' candidacies) cannot stall a group."""

from __future__ import annotations

import contextlib
import random

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import DecodeError
from m2mc.group.codec import (
    DISCOVERY_TAG,
    HEADER,
    MAGIC,
    VERSION,
    Ack,
    Body,
    GrpInfo,
    GrpsInfo,
    Handover,
    Join,
    Kind,
    LogState,
    MemberEntry,
    Order,
    Prepare,
    Promise,
    SequencerInfo,
    Start,
    Status,
    SyncReq,
    decode_body,
    encode,
    group_tag,
    split_frame,
)
from m2mc.group.config import GroupConfig
from m2mc.ordering import MessageId
from m2mc.wire.packet import fragments

from .harness import Net


def _m2mp(payload: bytes, rng: random.Random) -> list[bytes]:
    return list(fragments(rng.getrandbits(32), payload))


def _config() -> GroupConfig:
    return GroupConfig(max_members=64, max_mirs=8, max_pssit=32, max_senders=64, max_groups=16,
                       max_pending_repairs=500)


def test_hostile_traffic_is_counted_dropped_and_bounded() -> None:
    rng = random.Random(99)
    net = Net(seed=41, config=_config)
    for pid in ("a", "b"):
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("g", net.now)))
    net.run(0.3)
    net.do("b", lambda n: n.join_group(gid, net.now))
    net.run(1.0)
    tag = group_tag(gid)
    hostile: list[bytes] = []
    hostile += [rng.randbytes(rng.randrange(0, 600)) for _ in range(200)]  # not even M2MP
    for _ in range(200):  # M2MP messages with random content, some behind a valid header
        body = rng.randbytes(rng.randrange(0, 300))
        head = HEADER.pack(MAGIC, VERSION, tag, rng.choice(list(Kind)), 0)
        hostile += _m2mp(rng.choice([body, head + body, head[:5] + body]), rng)
    for bad_header in (HEADER.pack(MAGIC, 2, tag, 1, 0), HEADER.pack(MAGIC, VERSION, tag, 99, 0),
                       HEADER.pack(MAGIC, VERSION, tag, 1, 1), HEADER.pack(b"XX", 1, tag, 1, 0)):
        hostile += _m2mp(bad_header + msgpack.packb(["x", []]), rng)
    hostile += _m2mp(encode(group_tag("elsewhere"), Join("x", 1, "sb", "")), rng)
    for record in (["z", 1 << 45, "", 0, b"x"], ["z", 1 << 39, "", 0, b"x"],
                   ["z", 1, "", 5, b"x"], [1, 2, 3, 4, 5], ["z", 1, "", 0, "str"]):
        hostile += _m2mp(HEADER.pack(MAGIC, VERSION, tag, Kind.DATA, 0)
                         + msgpack.packb(["z", [record]]), rng)
    huge = {f"p{i}": [(1, 10), (20, 30)] for i in range(5000)}
    hostile += _m2mp(encode(tag, SyncReq("evil", 1, huge)), rng)
    for i in range(300):
        hostile += _m2mp(encode(tag, SyncReq(f"req{i}", 1, {})), rng)
        hostile += _m2mp(encode(tag, Join(f"fake{i}", 1, "sb", "")), rng)
        hostile += _m2mp(encode(tag, Status(f"st{i}", 5, {f"s{i}-{j}": 3 for j in range(20)},
                                            (), None, 0)), rng)
    hostile += _m2mp(encode(DISCOVERY_TAG, GrpsInfo("g", tuple(
        GrpInfo(f"spam/{i}", "", "sb", (MemberEntry("g", 1, True),)) for i in range(200)))),
        rng)
    for datagram in hostile:
        net.inject(datagram)
    net.run(3.0)
    for pid in ("a", "b"):
        node = net.nodes[pid]
        stats = node.node_stats()
        assert stats["malformed"] > 0
        inst = node.groups[gid]
        assert len(inst.row.membership) <= 64
        assert len(inst.repair.hw) <= 64
        assert len(inst.msp.mirs) <= 8 and len(inst.msp.pssit) <= 32
        assert inst.repair.pending_repairs <= 500
        assert len(node.gjlp.discovered) + len(node.gjlp.giit) <= 16
        assert inst.repair.stats.absurd_seq >= 1
    # The group still works for its real members.
    m = net.send("a", gid, b"still alive")
    net.send("b", gid, b"yes", reply_to=m)
    net.run(2.0)
    assert net.delivered["a"][gid][-2:] == net.delivered["b"][gid][-2:]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(list(Kind)))
def test_decoders_raise_only_decode_error(body: bytes, kind: Kind) -> None:
    with contextlib.suppress(DecodeError):
        decode_body(int(kind), body)
    frame = HEADER.pack(MAGIC, VERSION, bytes(8), int(kind), 0) + body
    with contextlib.suppress(DecodeError):
        split_frame(frame)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
                    | st.text(max_size=5) | st.binary(max_size=5),
                    lambda inner: st.lists(inner, max_size=6)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=4),
                    max_leaves=30), st.sampled_from(list(Kind)))
def test_well_formed_msgpack_of_the_wrong_shape_is_a_decode_error(obj: object, kind: Kind) -> None:
    with contextlib.suppress(DecodeError):
        decode_body(int(kind), msgpack.packb(obj))


# ------------------------------------------------------------------ total order
def _total_group(net: Net) -> str:
    for pid in ("a", "b", "c"):
        net.add(pid)
    gid = str(net.do("a", lambda n: n.create_group("t", net.now, order="total")))
    net.run(0.3)
    for pid in ("b", "c"):
        net.do(pid, lambda n: n.join_group(gid, net.now))
    net.run(1.5)
    return gid


def _chat_and_check(net: Net, gid: str, count: int, settle: float) -> None:
    for i in range(count):
        net.send("abc"[i % 3], gid, f"after {i}".encode())
        net.run(0.05)
    net.run(settle)
    net.check_group(gid, ["a", "b", "c"])
    sequences = [net.delivered[pid][gid] for pid in ("a", "b", "c")]
    assert sequences[0] == sequences[1] == sequences[2]


def test_forged_ballots_with_absurd_epochs_are_dropped_and_total_order_goes_on() -> None:
    # One forged HANDOVER with epoch 2^40 - 1 (it passes decoding) used to stall an
    # open total-order group for good: a member took over with epoch 2^40, which
    # every other member refused as malformed.
    rng = random.Random(7)
    net = Net(seed=43)
    gid = _total_group(net)
    net.send("a", gid, b"before")
    net.run(1.0)
    tag = group_tag(gid)
    top = (1 << 40) - 1
    forged: list[Body] = [
        Handover("a", SequencerInfo(top, "b", 1)),  # the sequencer's pid, spoofed
        Handover("mallory", SequencerInfo(top, "c", 1)),
        Prepare("b", top, 0), Prepare("c", top - 5, 0),
        Order("a", top, [(2, MessageId("a", 99))], 2),
        Start("c", top, 0, [(1, MessageId("c", 50))]),
        Ack("b", top, "a", 10),
        Status("a", 1, {}, (), LogState(top, "a", top, "a", 5), 3),
        Promise("b", top, "a", top - 1, "b", 0, 9, [(1, MessageId("b", 7))]),
    ]
    for body in forged:
        for datagram in _m2mp(encode(tag, body), rng):
            net.inject(datagram)
    net.run(1.0)
    for pid in ("a", "b", "c"):
        stats = net.nodes[pid].group_stats(gid)
        assert stats["absurd_epoch"] >= 5, (pid, stats["absurd_epoch"])
        assert net.nodes[pid].groups[gid].mop.log.core.max_epoch < 1000
    assert net.nodes["a"].groups[gid].mop.is_sequencer
    # Longer than sequencer_timeout: a stalled group would have shown it.
    _chat_and_check(net, gid, 30, 8.0)


def test_forged_handover_with_a_plausible_epoch_costs_one_take_over() -> None:
    # Spoofing the sequencer's own pid (an open group cannot tell) moves the role, but
    # the log goes on: nothing is lost or ordered twice, and outsiders' ballots count
    # for nothing.
    rng = random.Random(8)
    net = Net(seed=47, loss=0.05)
    gid = _total_group(net)
    for i in range(10):
        net.send("abc"[i % 3], gid, f"before {i}".encode())
    net.run(0.5)
    log = net.nodes["b"].groups[gid].mop.log
    tag = group_tag(gid)
    for body in (Handover("a", SequencerInfo(log.promised[0], "c", 1)),
                 Prepare("mallory", log.promised[0] + 3, 0)):
        for datagram in _m2mp(encode(tag, body), rng):
            net.inject(datagram)
    net.run(1.0)
    # c took over (and, being no lower than a, handed the role back to it).
    assert any(e.event == "elect" and e.node == "c" for e in net.trace.events)
    assert net.nodes["b"].group_stats(gid)["not_member"] >= 1
    _chat_and_check(net, gid, 30, 8.0)
