"""Bad input never crashes a node: forged or malformed group messages, unknown
groups, absurd sequence numbers and huge sync requests are counted and dropped,
and every table they could fill stays within its bound."""

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
    GrpInfo,
    GrpsInfo,
    Join,
    Kind,
    MemberEntry,
    Status,
    SyncReq,
    decode_body,
    encode,
    group_tag,
    split_frame,
)
from m2mc.group.config import GroupConfig
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
