"""Fuzz targets of the group layer (bench/fuzz.py, docs/security.md).

* ``group.frame``: a group message's framing and body decoder;
* ``group.stream_head``: a streamed message's descriptor;
* ``group.node``: a stream of group messages fed to a :class:`~m2mc.group.manager.GroupNode`
  in three groups (open S_b, open total order, keyed), time advancing: nothing may
  raise, and no table an outsider fills may pass its bound.

Registered in :data:`m2mc.fuzz_targets.PROVIDERS` as ``m2mc.fuzz_group:targets``;
split from :mod:`m2mc.fuzz_targets` (the registry and the other layers' targets).
"""

from __future__ import annotations

import random
from typing import Any

import msgpack

from m2mc.fuzz_targets import (
    STREAM_MAX_LEN,
    ByteReader,
    FuzzTarget,
    check_bound,
    claimed_sender,
    group_examples,
)
from m2mc.kinds import Order


def targets() -> list[FuzzTarget]:
    from m2mc.group import codec
    from m2mc.group.stream_codec import (
        STREAM_MAGIC,
        Descriptor,
        decode_descriptor,
        encode_descriptor,
    )

    def frame(data: bytes) -> object:
        f = codec.split_frame(data)
        return codec.decode_body(f.kind, f.body)

    def seeds() -> list[bytes]:
        tag = codec.group_tag("g")
        out = group_examples(codec, tag)
        for kind in codec.Kind:
            header = codec.HEADER.pack(codec.MAGIC, codec.VERSION, tag, kind, 0)
            for body in (["p"], ["p", 1], ["p", 1, {"q": [1, 2]}], ["p", [["p", 1, "", 0, b"x"]]],
                         ["p", 1, "sb", ""], ["p", "q", 1, [], 0]):
                out.append(header + msgpack.packb(body, use_bin_type=True))
        return out

    def stream_head(data: bytes) -> object:
        return decode_descriptor(STREAM_MAGIC + data)

    def head_seeds() -> list[bytes]:
        return [encode_descriptor(Descriptor(16000, size, window))[len(STREAM_MAGIC):]
                for size in (None, 0, 1 << 40) for window in (None, 262)]

    return [FuzzTarget("group.frame", frame, seeds),
            FuzzTarget("group.stream_head", stream_head, head_seeds), _group_node_target()]


def _group_node_target() -> FuzzTarget:
    """``group.node``: a stream of group messages fed to a :class:`GroupNode` that is a
    member of an open S_b group, an open total-order group and a keyed group, with
    time advancing. Per chunk of input: a flags byte, a 2-byte length, then a kind
    byte and a msgpack body. Flags: bits 0-1 the destination (open S_b, total,
    keyed, discovery), bit 2 a raw datagram instead (the chunk as is), bit 3 seal
    the message with the keyed group's key under the sender its body names (so
    mutations reach the keyed group's logic), bits 4-7 the time step. The target
    wraps each message into M2MP fragments. Nothing may raise, and after every
    chunk every table an outsider fills must be within its bound.
    """
    from m2mc.group import codec, groupwire
    from m2mc.group.config import GroupConfig
    from m2mc.group.manager import GroupNode
    from m2mc.security.auth import AuthConfig, GroupAuth
    from m2mc.security.keys import GroupSecret
    from m2mc.wire.m2mp import M2MPConfig
    from m2mc.wire.packet import fragments

    key = bytes(range(32))
    cfg = GroupConfig(max_members=4, max_senders=6, max_groups=6, max_mirs=2, max_pssit=4,
                      max_pending_repairs=8, max_nack_intervals=4, max_digest_intervals=4,
                      max_status_senders=4, max_unstamped=4, max_held=8, max_sync_messages=8,
                      max_sync_bytes=4000, control_burst=40.0, control_total_burst=80.0,
                      memory_log_bytes=2000, stream_chunk_bytes=64, stream_window=4,
                      max_streams=2, max_streams_waiting=2, max_stream_repairs=4,
                      stream_store_bytes=4000)
    m2mp = M2MPConfig(message_timeout=1.0, max_partial_messages=8, max_partial_bytes=8192,
                      max_message_bytes=6000, completed_cache=64, own_id_cache=64)
    gids = ("open", "tot", "keyed")
    tags = [codec.group_tag(g) for g in gids] + [codec.DISCOVERY_TAG]
    auth_config = AuthConfig(replay_window=64, max_senders=cfg.max_senders)

    def node_for_input() -> GroupNode:
        node = GroupNode("me", rng=random.Random(1), config=cfg, m2mp_config=m2mp,
                         keys={"keyed": GroupSecret(key)}, counter_start=1)
        node.start(0.0)
        node.create_group("o", 0.0, Order.SB, gid="open")
        node.create_group("t", 0.0, Order.TOTAL, gid="tot")
        node.create_group("k", 0.0, Order.SB, gid="keyed")
        node.send("open", b"mine", 0.0)
        node.datagrams_to_send(0.0)
        node.events()
        return node

    def run(data: bytes) -> None:
        node = node_for_input()
        senders: dict[str, GroupAuth] = {}
        now = 0.0
        reader = ByteReader(data)
        mid = 0
        while reader.more():
            flags = reader.u8()
            chunk = reader.take(reader.u16() % 1200)
            now += (flags >> 4) / 16
            if flags & 4:
                datagrams = [chunk]
            else:
                tag = tags[flags & 3]
                frame = codec.HEADER.pack(codec.MAGIC, codec.VERSION, tag, chunk[:1][0]
                                          if chunk else 0, 0) + chunk[1:]
                if flags & 8 and tag == tags[2]:
                    sender = claimed_sender(codec, frame) or "x"
                    auth = senders.get(sender)
                    if auth is None:
                        auth = senders[sender] = GroupAuth("keyed", key, sender,
                                                           config=auth_config)
                    frame = groupwire.seal_frame(auth, frame)
                mid += 1
                datagrams = list(fragments(mid, frame))
            for datagram in datagrams:
                node.receive_datagram(datagram, now)
            node.on_timer(now)
            node.datagrams_to_send(now)
            node.events()
            _check_group_node(node, cfg, m2mp)

    def seeds() -> list[bytes]:
        from m2mc.group.stream_codec import LAST, StreamAck, StreamData, StreamNack
        from m2mc.ordering import ROOT, Message, MessageId

        def chunk(flags: int, tag: bytes, body: Any) -> bytes:
            frame = codec.encode(tag, body)
            payload = frame[codec.HEADER_SIZE - 2:codec.HEADER_SIZE - 1] + \
                frame[codec.HEADER_SIZE:]
            return bytes((flags,)) + len(payload).to_bytes(2, "big") + payload

        rec = [Message(MessageId("p", 1), ROOT, b"hi"), Message(MessageId("p", 3), ROOT, b"x")]
        bodies = [codec.Join("p", 1, Order.SB, "d"), codec.Join("n", 1, Order.SB, "d", "Nina"),
                  codec.Data("p", rec),
                  codec.SyncReq("p", 1, {}), codec.Nack("p", {"me": [(1, 1)], "p": [(2, 2)]}, []),
                  codec.Status("p", 3, {"q": 2}, (codec.MemberEntry("p", 1, True),), None, 0),
                  codec.Status("p", 3, {}, (codec.MemberEntry("p", 1, True),), None, 0, "Pia"),
                  codec.Order("p", 1, [(1, MessageId("p", 1))]), codec.Leave("p", 2),
                  codec.Gone("p", {"q": [(1, 5)]}, [(1, 3)], [Message(MessageId("q", 2),
                                                                      ROOT, b"")]),
                  StreamData("p", "p", 5, 0, 64, bytes(64)),
                  StreamData("p", "p", 5, 2, 64, b"end", LAST, 131, bytes(32)),
                  StreamNack("p", "me", 1, [(0, 9)]), StreamAck("p", "me", 1, 3)]
        out = []
        for dest in range(3):
            for flags in (0x10 | dest, 0x18 | dest):
                out.append(b"".join(chunk(flags, tags[dest], b) for b in bodies))
        out.append(chunk(0x13, tags[3], codec.Adv("p")) + chunk(0x13, tags[3], codec.GrpsInfo(
            "p", tuple(codec.GrpInfo(f"s{i}", "", Order.SB, ()) for i in range(8)))))
        named = (codec.MemberEntry("p", 1, True), codec.MemberEntry("q", 1, True))
        out.append(chunk(0x13, tags[3], codec.GrpsInfo("p", tuple(
            codec.GrpInfo(g, "", Order.SB, named, False, (("p", "Pia"), ("q", "Quinn")))
            for g in ("open", "keyed", "new")))))
        return out

    return FuzzTarget("group.node", run, seeds, expected=(), max_len=STREAM_MAX_LEN)


def _check_group_node(node: Any, cfg: Any, m2mp: Any) -> None:
    """Every bound of the group layer an outsider can fill (docs/security.md)."""
    layer = node.m2mp
    check_bound(layer.partial_messages <= m2mp.max_partial_messages, "M2MP partial messages")
    check_bound(layer.partial_bytes <= m2mp.max_partial_bytes, "M2MP partial bytes")
    gjlp = node.gjlp
    check_bound(len(gjlp.giit) + len(gjlp.discovered) <= cfg.max_groups, "max_groups")
    check_bound(len(node.discovery_limiter) <= cfg.max_senders, "discovery limiter")
    for auth in node.keyring.auths():
        check_bound(len(auth.replay) <= cfg.max_senders, "replay windows")
    for info in gjlp.discovered.values():
        current = {e.pid for e in info.members if e.joined}
        check_bound(all(pid in current for pid, _ in info.names), "names of discovered groups")
    for inst in node.groups.values():
        check_bound(len(inst.row.membership) <= cfg.max_members, "max_members")
        check_bound(len(inst.row.names) <= cfg.max_members, "member names")
        repair, msp, mop = inst.repair, inst.msp, inst.mop
        check_bound(len(repair.hw) <= cfg.max_senders + cfg.max_members, "max_senders (repair)")
        check_bound(repair.pending_repairs <= cfg.max_pending_repairs, "max_pending_repairs")
        check_bound(repair.holdoff_senders <= cfg.max_senders, "hold-offs")
        check_bound(repair.holdoff_ranges <= 4 * cfg.max_nack_intervals, "hold-off ranges")
        check_bound(len(msp.mirs) <= cfg.max_mirs, "max_mirs")
        check_bound(len(msp.pssit) <= cfg.max_pssit, "max_pssit")
        check_bound(len(msp.marks) <= cfg.max_pssit, "MSP marks")
        check_bound(len(msp.series) <= cfg.max_pssit, "MSP series")
        check_bound(len(msp.refused) <= cfg.max_mirs, "refused requests kept")
        check_bound(len(mop.unstamped) <= cfg.max_unstamped, "max_unstamped")
        check_bound(len(mop.stamps) <= cfg.max_unstamped, "early stamps")
        check_bound(mop.core.held_count <= cfg.max_held, "max_held")
        check_bound(len(inst.last_heard) <= cfg.max_senders, "last heard")
        check_bound(len(inst.limiter) <= cfg.max_senders, "group limiter")
        retention = inst.retention  # gone reports (docs/group.md section 8)
        check_bound(len(retention._reports) <= cfg.max_senders + cfg.max_members, "gone reports")
        check_bound(all(len(e) <= 4 * cfg.max_nack_intervals for e in retention._reports.values())
               and len(retention._gseq_reports) <= 4 * cfg.max_nack_intervals, "gone ranges")
        check_bound(len(retention._heard_stubs) <= cfg.max_held, "heard stubs")
        check_bound(node.store.log_bytes(inst.gid) <= cfg.memory_log_bytes + (
            cfg.max_held + cfg.max_unstamped) * (cfg.max_payload + 512), "group log bytes")
    streams = node.streams  # streamed messages' bodies (docs/group.md section 12)
    check_bound(len(streams.incoming) <= cfg.max_streams, "max_streams")
    check_bound(len(streams.waiting) <= cfg.max_streams_waiting, "max_streams_waiting")
    check_bound(len(streams.repairs) <= cfg.max_stream_repairs, "max_stream_repairs")
    check_bound(all(len(st.have) <= cfg.stream_window for st in streams.incoming.values()),
           "stream_window")
    check_bound(streams.store.held_bytes <= cfg.stream_store_bytes, "stream_store_bytes")
    check_bound(len(streams.failed) <= 4096, "failed streams kept")
