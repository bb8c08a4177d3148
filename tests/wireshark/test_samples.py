"""Every message the codecs can make, written into a capture and decoded by tshark.

One sample of each group message kind (plain, sealed under HMAC-SHA256 with the body
decoded, sealed under both AEAD suites with the body shown as encrypted), every
infrastructure message over UDP and over a backbone TCP stream cut across frame
boundaries (plain and sealed), a multi-packet group message with redundant and
reordered fragments, and plain M2MP messages on the preference's ports. Each sample
comes from the codecs (samples.py), so a kind added there is dissected here too: if
m2mc.lua does not know it, its fields do not come out and the test fails.

The heuristics stay strict: garbage, a frame with a bad CRC, an unknown group kind and
a short non-last fragment on an unregistered port are left alone.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dissection import (
    Field,
    Packet,
    dissect,
    info_columns,
    needs_tshark,
    undecoded_frames,
    which,
)
from pcapgen import PcapWriter
from samples import group_bodies, infra_messages, infra_schema, lua_fields, lua_table

from m2mc.group import codec
from m2mc.group.groupwire import seal_frame
from m2mc.infra import codec as infra_codec
from m2mc.infra import messages as im
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import AuthConfig, GroupAuth
from m2mc.wire.packet import fragments

pytestmark = needs_tshark

GROUP = lua_table("GROUP_KINDS")
INFRA = lua_table("INFRA_TAGS")
KEY = bytes(range(32))
SENDER = ("10.77.0.1", 40001)
CELL = ("239.255.77.1", 47017)
UPLINK = ("10.77.0.2", 47301)
BACKBONE = (("10.77.0.1", 40100), ("10.77.0.2", 47201))
PLAIN_PORT = 47555  # unregistered; M2MP here only through the preference
GROUP_NAME = "g1"
ADMIN_OPS = {im.OP_SHOW: "show", im.OP_RETIRE: "retire", im.OP_READMIT: "readmit"}


# ------------------------------------------------------------------ expectations
@dataclass
class Expect:
    """What one frame (or the frame completing a message) must decode to."""

    what: str
    check: Callable[[Packet], None]


def _bool(value: bool) -> str:
    return "1" if value else "0"


def _one(tree: Field, name: str) -> Field:
    found = tree.direct(name)
    assert len(found) == 1, f"{name}: {len(found)} fields (of {[c.name for c in tree.children]})"
    return found[0]


def _records(head: Field) -> list[tuple[Any, ...]]:
    out = []
    for r in head.direct("m2mc.record"):
        vclock = r.first("m2mc.record.vclock")
        out.append((r.value("m2mc.record.mid"), r.value("m2mc.record.parent"),
                    int(r.value("m2mc.record.payload_len") or -1),
                    (r.first("m2mc.record.payload") or Field("")).value_hex,
                    r.value("m2mc.record.gseq"),
                    None if vclock is None else dict(zip(vclock.values("m2mc.vclock.pid"),
                                                         map(int, vclock.values(
                                                             "m2mc.vclock.count")),
                                                         strict=True))))
    return out


def _py_records(records: list[Any]) -> list[tuple[Any, ...]]:
    return [(f"{m.mid.pid}:{m.mid.seq}", "" if m.parent.is_root else
             f"{m.parent.pid}:{m.parent.seq}", len(m.payload), m.payload.hex(),
             None if m.gseq is None else str(m.gseq),
             None if m.vclock is None else dict(m.vclock)) for m in records]


def _entries(head: Field) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in head.direct("m2mc.entry"):
        if e.first("m2mc.entry.mid"):
            out.append((e.value("m2mc.entry.position"), e.value("m2mc.entry.mid")))
        else:
            out.append((e.value("m2mc.entry.position"), e.value("m2mc.entry.member"),
                        e.value("m2mc.entry.version"), e.value("m2mc.entry.joined")))
    return out


def _py_entries(entries: codec.Entries) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for position, e in entries:
        if isinstance(e, codec.MemberEntry):
            out.append((str(position), e.pid, str(e.version), _bool(e.joined)))
        else:
            out.append((str(position), f"{e.pid}:{e.seq}"))
    return out


def _members(head: Field) -> list[tuple[str | None, ...]]:
    return [(m.value("m2mc.member.pid"), m.value("m2mc.member.version"),
             m.value("m2mc.member.joined")) for m in head.direct("m2mc.member")]


def _py_members(members: tuple[codec.MemberEntry, ...]) -> list[tuple[str, ...]]:
    return [(m.pid, str(m.version), _bool(m.joined)) for m in members]


def _intervals(ivs: list[tuple[int, int]]) -> list[str]:
    return [f"{lo}-{hi}" for lo, hi in ivs]


def check_group_field(body: Field, name: str, token: str, value: Any) -> None:
    token = token.rstrip("?")
    where = f"m2mc.{name}"
    if token == "name":  # an optional trailing element: absent when there is no name
        assert body.values(where) == ([value] if value else []), where
        return
    f = _one(body, where)
    if token in ("pid", "str"):
        assert f.show == value, where
    elif token == "uint":
        assert f.show == str(value), where
    elif token == "bool":
        assert f.show == _bool(value), where
    elif token == "bin":
        assert (f.value_hex or "") == value.hex(), where
    elif token == "records":
        assert _records(f) == _py_records(value), where
    elif token == "entries":
        assert _entries(f) == _py_entries(value), where
    elif token == "digest":
        got = {p.show: p.values("m2mc.digest.interval") for p in f.direct("m2mc.digest.pid")}
        assert got == {pid: _intervals(ivs) for pid, ivs in value.items()}, where
    elif token == "intervals":
        assert f.values("m2mc.interval") == _intervals(value), where
    elif token == "summary":
        got = {s.show: s.value("m2mc.summary.hw") for s in f.direct("m2mc.summary.pid")}
        assert got == {pid: str(hw) for pid, hw in value.items()}, where
    elif token == "members":
        assert _members(f) == _py_members(value), where
    elif token == "logstate":
        got = [f.value(f"m2mc.logstate.{k}") for k in
               ("epoch", "leader", "log_epoch", "log_leader", "high")]
        assert got == [str(value.epoch), value.leader, str(value.log_epoch), value.log_leader,
                       str(value.high)], where
    elif token == "grpinfos":
        got = [(g.value("m2mc.grp.gid"), g.value("m2mc.grp.tag"), g.value("m2mc.grp.desc"),
                g.value("m2mc.grp.order"), g.value("m2mc.grp.keyed") or "0",
                _members(_one(g, "m2mc.grp.members")),
                {p.show: p.value("m2mc.grp.names.name") for p in g.all("m2mc.grp.names.pid")})
               for g in f.direct("m2mc.grp")]
        assert got == [(g.gid, codec.group_tag(g.gid).hex(), g.desc, g.order, _bool(g.keyed),
                        _py_members(g.members), dict(g.names)) for g in value], where
        # a keyed flag and names only where the codec writes them
        assert [g.first("m2mc.grp.keyed") is not None for g in f.direct("m2mc.grp")] == [
            g.keyed or bool(g.names) for g in value], where
        assert [g.first("m2mc.grp.names") is not None for g in f.direct("m2mc.grp")] == [
            bool(g.names) for g in value], where
    else:
        raise AssertionError(f"{where}: no check for the dissector type {token!r}")


def group_check(kind: codec.Kind, body: codec.Body, tag: bytes, *, name: str | None,
                suite: str | None = None, sender: str | None = None) -> Callable[[Packet], None]:
    def check(packet: Packet) -> None:
        [proto] = packet.protos("m2mc")
        assert proto.value("m2mc.kind") == str(int(kind))
        assert proto.value("m2mc.tag") == ":".join(f"{b:02x}" for b in tag)
        assert proto.value("m2mc.group") == name
        assert proto.value("m2mc.flags.auth") == _bool(suite is not None)
        if suite is not None:
            [auth] = proto.direct("m2mc_auth")
            assert auth.value("m2mc_auth.sender") == sender
            assert auth.value("m2mc_auth.suite") == str({"hmac-sha256": 1, "aes-256-gcm": 2,
                                                          "chacha20-poly1305": 3}[suite])
            assert int(auth.value("m2mc_auth.counter") or 0) >= 1_000
            encrypted = suite != "hmac-sha256"
            assert auth.value("m2mc_auth.encrypted") == _bool(encrypted)
            assert (auth.first("m2mc_auth.ciphertext") is not None) == encrypted
            if encrypted:
                assert proto.first("m2mc.body") is None  # nothing decoded
                return
        body_tree = _one(proto, "m2mc.body")
        for field_name, token in lua_fields(GROUP[kind][1]):
            value: Any = body
            for part in field_name.split("."):
                value = getattr(value, part)
            check_group_field(body_tree, field_name, token, value)
    return check


# ------------------------------------------------------------------ infrastructure checks
def _cell(f: Field) -> tuple[str | None, ...]:
    return tuple(f.value(f"m2mc_infra.cellinfo.{k}") for k in ("host", "cell", "uplink", "load"))


def _py_cell(c: Any) -> tuple[str, ...]:
    return (c.host, c.cell, c.uplink, str(c.load))


def _infra_records(f: Field) -> list[tuple[str | None, ...]]:
    return [(*(r.value(f"m2mc_infra.record.{k}") for k in
               ("lsn", "gseq", "kind", "mid", "nseq", "app_seq", "prememb", "host")),
             (r.first("m2mc_infra.record.body") or Field("")).value_hex)
            for r in f.direct("m2mc_infra.record")]


def _py_infra_records(records: Any) -> list[tuple[str | None, ...]]:
    return [(str(r.lsn), str(r.gseq), str(r.kind), str(r.mid), str(r.nseq), str(r.app_seq),
             str(r.prememb), r.mid.node if r.kind in im.CONFIG_KINDS else None, r.body.hex())
            for r in records]


def check_infra_fields(tree: Field, cls: type, fields: list[tuple[str, str]], msg: Any) -> None:
    for name, token in fields:
        value = getattr(msg, name)
        where = f"{cls.__name__}.{name}"
        abbrev = f"m2mc_infra.{name}"
        if token == "strs":
            [head] = [c for c in tree.children if c.direct(abbrev)] or [Field("")]
            assert head.values(abbrev) == list(value), where
            continue
        if token == "request":  # a subtree without a field of its own (m2mc.lua, INFRA_FT)
            tag = infra_codec._TAGS[type(value)]
            [head] = [c for c in tree.children if c.direct("m2mc_infra.request.tag")]
            assert head.value("m2mc_infra.request.tag") == str(tag), where
            check_infra_fields(head, type(value), infra_schema()[tag][1], value)
            continue
        f = _one(tree, abbrev)
        if token == "int":
            assert f.show == str(value), where
            if name == "op":  # named too
                assert f.showname.endswith(f" ({ADMIN_OPS[value]})"), (where, f.showname)
        elif token == "str":
            assert f.show == value, where
        elif token == "bool":
            assert f.show == _bool(value), where
        elif token == "bytes":
            assert f.value_hex == value.hex(), where
        elif token in ("mid", "opt_mid", "epoch", "opt_epoch"):
            assert f.show == ("" if value is None else str(value)), where
        elif token == "records":
            assert _infra_records(f) == _py_infra_records(value), where
        elif token == "cell":
            assert _cell(f) == _py_cell(value), where
            assert f.show == value.host, where  # the field's value: the cell's host
        elif token == "cells":
            assert [_cell(c) for c in f.direct("m2mc_infra.cellinfo")] == [
                _py_cell(c) for c in value], where
        elif token == "mids":
            assert f.values("m2mc_infra.member_id") == [str(m) for m in value], where
        elif token == "items":
            got = [(i.value("m2mc_infra.item.nseq"), i.value("m2mc_infra.item.app_seq"),
                    i.value("m2mc_infra.item.app_mid"),
                    (i.first("m2mc_infra.item.body") or Field("")).value_hex)
                   for i in f.direct("m2mc_infra.item")]
            assert got == [(str(i.nseq), str(i.app_seq), f"{msg.mid.node}:{i.app_seq}",
                            i.body.hex()) for i in value], where
        elif token == "pairs":
            assert list(zip(f.values("m2mc_infra.member_id"),
                            f.values("m2mc_infra.pair.stable"), strict=True)) == [
                (str(m), str(s)) for m, s in value], where
        elif token == "opt_snapshot":
            s = value
            assert [f.value(f"m2mc_infra.snapshot.{k}") for k in
                    ("lsn", "gseq", "last_app_gseq")] == [str(s.lsn), str(s.gseq),
                                                          str(s.last_app_gseq)], where
            rows = [(r.value("m2mc_infra.member_id"), r.value("m2mc_infra.row.first"),
                     r.value("m2mc_infra.row.last"), r.value("m2mc_infra.row.recv"),
                     r.value("m2mc_infra.row.member")) for r in f.all("m2mc_infra.row")]
            assert rows == [(str(r.mid), str(r.first), str(r.last), str(r.recv),
                             _bool(r.member)) for r in s.rows], where
            assert len(f.values("m2mc_infra.member_id")) == len(s.rows) + len(s.mcache)
            assert f.values("m2mc_infra.snapshot.retired") == list(s.retired), where
            assert f.value("m2mc_infra.snapshot.config_lsn") == str(s.config_lsn), where
        else:
            raise AssertionError(f"{where}: no check for the dissector type {token!r}")


def infra_check(tag: int, msg: Any, *, suite: str | None = None, sender: str | None = None,
                receiver: str = "") -> Callable[[Packet], None]:
    cls, fields = infra_schema()[tag]

    def check(packet: Packet) -> None:
        protos = packet.protos("m2mc_infra")
        assert protos, "no m2mc_infra layer"
        matching = [p for p in protos if p.value("m2mc_infra.tag") in (str(tag), None)]
        assert matching, f"no m2mc_infra layer of tag {tag}"
        proto = matching[0]
        assert proto.value("m2mc_infra.sealed") == _bool(suite is not None)
        if suite is not None:
            assert proto.value("m2mc_infra.receiver") == receiver
            [auth] = proto.direct("m2mc_auth")
            assert auth.value("m2mc_auth.sender") == sender
            if suite != "hmac-sha256":
                assert auth.value("m2mc_auth.encrypted") == "1"
                assert proto.value("m2mc_infra.tag") is None  # nothing decoded
                return
        else:
            assert proto.value("m2mc_infra.crc.ok") == "1"
        assert proto.value("m2mc_infra.tag") == str(tag)
        assert proto.value("m2mc_infra.link") == INFRA[tag][1]
        check_infra_fields(proto, cls, fields, msg)
    return check


# ------------------------------------------------------------------ the capture
def _sealer(gid: str, sender: str, suite: str) -> GroupAuth:
    return GroupAuth(gid, KEY, sender, config=AuthConfig(suite=suite), counter_start=1_000_000)


def write_capture(path: Path) -> tuple[dict[int, list[Expect]], dict[str, Any]]:
    rng = random.Random(7)
    expect: dict[int, list[Expect]] = {}
    facts: dict[str, Any] = {}

    def note(frame: int, what: str, check: Callable[[Packet], None]) -> None:
        expect.setdefault(frame, []).append(Expect(what, check))

    with PcapWriter(path) as pcap:
        def message(payload: bytes, src: tuple[str, int] = SENDER,
                    dst: tuple[str, int] = CELL, copies: int = 2) -> int:
            """Send one M2MP message (each packet ``copies`` times); the completing frame."""
            last = 0
            done = 0
            for packet in fragments(rng.getrandbits(32), payload):
                for _ in range(copies):
                    frame = pcap.udp(src, dst, bytes(packet))
                    done = done or (frame if packet[4] & 0x80 else 0)
                    last = frame
            return done or last

        tag = codec.group_tag(GROUP_NAME)
        # a GRPS_INFO naming the group first: the dissector learns the name from it
        info = codec.GrpsInfo("alice", (codec.GrpInfo(GROUP_NAME, "", "sb", ()),))
        frame = message(codec.encode(codec.DISCOVERY_TAG, info))
        note(frame, "GRPS_INFO naming g1",
             group_check(codec.Kind.GRPS_INFO, info, codec.DISCOVERY_TAG, name="(discovery)"))
        for kind, body in group_bodies():
            group = codec.DISCOVERY_TAG if kind in (codec.Kind.ADV, codec.Kind.GRPS_INFO) else tag
            name = "(discovery)" if group == codec.DISCOVERY_TAG else GROUP_NAME
            plain = codec.encode(group, body)
            note(message(plain), f"{kind.name} plain", group_check(kind, body, group, name=name))
            if group == codec.DISCOVERY_TAG:
                continue
            for suite in ("hmac-sha256", "aes-256-gcm", "chacha20-poly1305"):
                sender = getattr(body, "sender", "alice")
                sealed = seal_frame(_sealer(GROUP_NAME, sender, suite), plain)
                note(message(sealed), f"{kind.name} {suite}",
                     group_check(kind, body, group, name=name, suite=suite, sender=sender))

        # a group message of many packets, its fragments reordered and interleaved with
        # another sender's; each copy twice
        big = codec.Data("bob", [codec.Message(codec.MessageId("bob", i), codec.ROOT,
                                               bytes([i]) * 300) for i in range(1, 12)])
        packets = [bytes(p) for p in fragments(0xB16B00B5, codec.encode(tag, big))]
        facts["big_fragments"] = len(packets)
        order = [0, 2, 1, *range(3, len(packets))]
        other = codec.encode(tag, codec.Adv("carol"))
        completing = 0
        for step, index in enumerate(order):
            for _ in range(2):
                frame = pcap.udp(("10.77.0.3", 40003), CELL, packets[index])
                if step == len(order) - 1:
                    completing = completing or frame
            if step == 1:
                message(other, src=("10.77.0.4", 40004))
        note(completing, "11-record DATA in many packets",
             group_check(codec.Kind.DATA, big, tag, name=GROUP_NAME))
        facts["big_frame"] = completing

        # plain M2MP: one-packet and three-packet messages on the default port (7777) and
        # on PLAIN_PORT, which only the preference makes M2MP
        for port in (7777, PLAIN_PORT):
            for size in (100, 1200):
                payload = rng.randbytes(size)
                frame = message(payload, dst=("239.255.77.77", port))
                facts.setdefault("plain", []).append((port, frame, hashlib.sha256(
                    payload).hexdigest(), size))

        # infrastructure frames over UDP (a cell and an uplink), plain and sealed
        for tag_, msg in infra_messages():
            dst = UPLINK if INFRA[tag_][1] == "uplink" else CELL
            note(pcap.udp(SENDER, dst, infra_codec.encode(msg)), f"infra {tag_} udp",
                 infra_check(tag_, msg))
            for suite in ("hmac-sha256", "aes-256-gcm"):
                sender = _claimed(msg)
                wire = InfraWire(_sealer(INFRA_KEY_CONTEXT, sender, suite))
                note(pcap.udp(SENDER, dst, wire.encode(msg)), f"infra {tag_} udp {suite}",
                     infra_check(tag_, msg, suite=suite, sender=sender))

        # the backbone: a greeting, then every message, plain and sealed for H2, as one
        # byte stream cut into 97-byte segments (frames span segments, segments hold
        # several frames); each message is checked in the segment where its frame ends
        stream = pcap.tcp_stream(*BACKBONE)
        greeting = b"H1"
        data = bytearray(len(greeting).to_bytes(4, "big") + greeting)
        ends: list[tuple[int, Callable[[Packet], None], str]] = []
        hmac_wire = InfraWire(_sealer(INFRA_KEY_CONTEXT, "H1", "hmac-sha256"))
        for tag_, msg in infra_messages():
            for sealed in (False, True):
                frame = hmac_wire.encode(msg, to="H2") if sealed else infra_codec.encode(msg)
                if sealed and _claimed(msg) != "H1":
                    continue  # a host seals only as itself
                data += len(frame).to_bytes(4, "big") + frame
                check = (infra_check(tag_, msg, suite="hmac-sha256", sender="H1",
                                     receiver="H2") if sealed else infra_check(tag_, msg))
                ends.append((len(data), check, f"backbone {tag_} sealed={sealed}"))
        frames = stream.send(bytes(data), segment=97)
        facts["backbone_frames"] = len(ends)
        facts["backbone_segments"] = frames
        for end, check, what in ends:
            note(frames[(end - 1) // 97], what, _any_layer(check))
        # a connection that only greets (a host with nothing to say to a retired one):
        # taken towards the backbone address above, left alone towards any other
        [greets] = pcap.tcp_stream(("10.77.0.3", 40200), BACKBONE[1]).send(b"\0\0\0\2H3")
        note(greets, "a lone greeting", _greeting("H3"))
        [lone] = pcap.tcp_stream(("10.77.0.3", 40201), ("10.77.0.9", 47999)).send(
            b"\0\0\0\2H3")

        # left alone by the heuristics
        junk = pcap.udp(SENDER, ("10.77.0.2", 47123), rng.randbytes(300))
        bad_crc = bytearray(infra_codec.encode(next(infra_messages())[1]))
        bad_crc[-1] ^= 1
        unknown = codec.HEADER.pack(codec.MAGIC, codec.VERSION, tag, 99, 0) + b"\x91\xa1a"
        short = bytes(next(iter(fragments(5, codec.encode(tag, big)))))[:300]  # not last, < 508
        facts["unclaimed"] = [junk, pcap.udp(SENDER, ("10.77.0.2", 47123), bytes(bad_crc)),
                              message(unknown, dst=("239.255.1.2", 47123), copies=1),
                              pcap.udp(SENDER, ("239.255.1.2", 47123), short), lone]
    return expect, facts


def _claimed(msg: Any) -> str:
    from m2mc.infra.wire import claimed_sender

    return claimed_sender(msg) or "H1"


def _greeting(name: str) -> Callable[[Packet], None]:
    def check(packet: Packet) -> None:
        [backbone] = packet.protos("m2mc_backbone")
        assert backbone.value("m2mc_backbone.peer") == name
        assert backbone.value("m2mc_backbone.length") == str(len(name))
    return check


def _any_layer(check: Callable[[Packet], None]) -> Callable[[Packet], None]:
    """A backbone segment holds several frames: one of its m2mc_infra layers must pass."""
    def run(packet: Packet) -> None:
        errors = []
        for proto in packet.protos("m2mc_infra"):
            single = Packet(packet.number, packet.protocols,
                            Field("packet", children=[proto]), [])
            try:
                check(single)
                return
            except AssertionError as exc:
                errors.append(str(exc))
        raise AssertionError(f"no m2mc_infra layer matches: {errors}")
    return run


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[
        list[Packet], dict[int, list[Expect]], dict[str, Any]]:
    path = tmp_path_factory.mktemp("samples") / "samples.pcap"
    expect, facts = write_capture(path)
    packets = dissect(path, options=[f"m2mp.udp_ports:7777,{PLAIN_PORT}"])
    return packets, expect, facts


def test_every_sample_decodes_as_the_codec_wrote_it(capture: tuple[
        list[Packet], dict[int, list[Expect]], dict[str, Any]]) -> None:
    packets, expect, _ = capture
    by_number = {p.number: p for p in packets}
    failures = []
    for frame, expectations in sorted(expect.items()):
        for e in expectations:
            try:
                e.check(by_number[frame])
            except AssertionError as exc:
                failures.append(f"frame {frame} ({e.what}): {exc}")
    assert not failures, "\n".join(failures[:20])
    assert sum(len(e) for e in expect.values()) > 3 * len(codec.Kind) + 2 * len(INFRA)


def test_no_packet_is_malformed_and_every_one_of_ours_is_decoded(capture: tuple[
        list[Packet], dict[int, list[Expect]], dict[str, Any]]) -> None:
    packets, _, facts = capture
    assert [(p.number, p.problems) for p in packets if p.problems] == []
    unclaimed = set(facts["unclaimed"])
    undecoded = undecoded_frames(packets)
    assert undecoded == sorted(unclaimed)


def test_fragments_are_reassembled_and_copies_marked(capture: tuple[
        list[Packet], dict[int, list[Expect]], dict[str, Any]]) -> None:
    packets, _, facts = capture
    by_number = {p.number: p for p in packets}
    done = by_number[facts["big_frame"]]
    [m2mp] = done.protos("m2mp")
    assert m2mp.value("m2mp.fragments") == str(facts["big_fragments"])
    assert len(m2mp.values("m2mp.fragment_in")) == facts["big_fragments"]
    big_id = f"0x{0xB16B00B5:08x}"
    parts = [p for p in packets if any(m.value("m2mp.msgid") == big_id for m in p.protos("m2mp"))]
    assert len(parts) == 2 * facts["big_fragments"]  # each packet twice
    copies = [p for p in parts if p.tree.first("m2mp.copy_of")]
    assert len(copies) == facts["big_fragments"]
    pointed = {p.tree.value("m2mp.reassembled_in") for p in parts if p.number != done.number
               and not p.tree.first("m2mp.copy_of")}
    assert pointed == {str(done.number)}  # every first copy of a fragment knows where


def test_plain_m2mp_messages_by_port_preference(capture: tuple[
        list[Packet], dict[int, list[Expect]], dict[str, Any]],
        tmp_path: Path) -> None:
    packets, _, facts = capture
    by_number = {p.number: p for p in packets}
    for port, frame, sha, size in facts["plain"]:
        [m2mp] = by_number[frame].protos("m2mp")
        assert m2mp.value("m2mp.message_len") == str(size), port
        whole = (m2mp.first("m2mp.message") or m2mp.first("m2mp.payload") or Field("")).value_hex
        assert hashlib.sha256(bytes.fromhex(whole)).hexdigest() == sha, port
    # without the preference, only the default port is M2MP
    path = tmp_path / "plain.pcap"
    _, facts = write_capture(path)
    default = {p.number: p for p in dissect(path)}
    for port, frame, _, _ in facts["plain"]:
        assert bool(default[frame].protos("m2mp")) == (port == 7777), port


def test_single_pass_decodes_too(capture: tuple[
        list[Packet], dict[int, list[Expect]], dict[str, Any]], tmp_path: Path) -> None:
    """Wireshark's first pass (and tshark without -2) sees packets in order only once."""
    path = tmp_path / "once.pcap"
    write_capture(path)
    packets = dissect(path, options=[f"m2mp.udp_ports:7777,{PLAIN_PORT}"], two_pass=False)
    assert [(p.number, p.problems) for p in packets if p.problems] == []
    assert len(which(packets, "m2mc")) == len(which(capture[0], "m2mc"))
    assert len(which(packets, "m2mc_infra")) == len(which(capture[0], "m2mc_infra"))


def test_group_names_from_the_preference_and_learned_from_later_announcements(
        tmp_path: Path) -> None:
    """The tag is BLAKE2b-64 of the id: the dissector computes it for the ids it is given
    (long UTF-8 ones too, over several hash blocks) and for those GRPS_INFO announces,
    even after the messages that use them (two passes)."""
    later, given = "announced-later", "ünïcode/" + "é" * 90  # 188 bytes of UTF-8
    path = tmp_path / "names.pcap"
    with PcapWriter(path) as pcap:
        for i, message in enumerate([
                codec.encode(codec.group_tag(later), codec.Adv("a")),
                codec.encode(codec.group_tag(given), codec.Adv("a")),
                codec.encode(codec.group_tag("unnamed"), codec.Adv("a")),
                codec.encode(codec.DISCOVERY_TAG, codec.GrpsInfo(
                    "a", (codec.GrpInfo(later, "", "sb", ()),)))]):
            for packet in fragments(100 + i, message):
                pcap.udp(SENDER, CELL, bytes(packet))
    packets = dissect(path, options=[f"m2mc.group_names:x, {given} ,y"])
    assert [p.tree.value("m2mc.group") for p in packets] == [later, given, None, "(discovery)"]
    assert packets[3].tree.value("m2mc.grp.tag") == codec.group_tag(later).hex()


def test_a_segmented_frame_is_taken_apart_packet_by_packet(tmp_path: Path) -> None:
    """A capture on the sending host (or on loopback, or a bridge) may hold a run of
    packets the kernel had not cut yet (UDP segmentation offload): 508-byte packets
    back to back, the last possibly shorter. Each is decoded as if it came alone."""
    rng = random.Random(11)
    big = bytes(rng.getrandbits(8) for _ in range(3100))  # 7 packets, the last 108 bytes
    packets = [bytes(p) for p in fragments(0xA11CE, big)]
    group = codec.encode(codec.group_tag(GROUP_NAME), codec.Leave("alice", 1))
    [lone] = [bytes(p) for p in fragments(0xB0B, group)]
    path = tmp_path / "segmented.pcap"
    with PcapWriter(path) as pcap:
        # redundancy 2 as m2mc send gives it, joined as the channel joins (the full
        # packets and the one after them): the last packet's second copy comes alone
        run = [p for p in packets for _ in range(2)]
        joined = pcap.udp(SENDER, CELL, b"".join(run[:13]))
        rest = pcap.udp(SENDER, CELL, run[13])
        alone = pcap.udp(SENDER, CELL, lone)
    options = ["m2mp.udp_ports:47017"]
    frames = {p.number: p for p in dissect(path, options=options)}
    assert [(n, p.problems) for n, p in frames.items() if p.problems] == []
    first = frames[joined].m2mp_packets()
    assert [int(m.value("m2mp.fragment") or -1) for m, _ in first] == [
        f for f in range(7) for _ in range(2)][:13]
    assert [bool(m.first("m2mp.copy_of")) for m, _ in first] == [False, True] * 6 + [False]
    done = first[12][0]  # the last fragment's first copy completes the message
    assert done.value("m2mp.message_len") == "3100"
    whole = done.first("m2mp.message")
    assert whole is not None and bytes.fromhex(whole.value_hex) == big
    assert {m.value("m2mp.reassembled_in") for m, _ in first[:12]
            if not m.first("m2mp.copy_of")} == {str(joined)}
    [(copy, _)] = frames[rest].m2mp_packets()
    assert copy.value("m2mp.copy_of") == str(joined)
    [(_, decoded)] = frames[alone].m2mp_packets()
    assert [p.name for p in decoded] == ["m2mc"]
    assert decoded[0].value("m2mc.kind") == str(int(codec.Kind.LEAVE))
    info = info_columns(path, options=options)
    assert info[joined].startswith("[13 packets, segmented] M2MP id 0x000a11ce fragment 0")
    assert not info[rest].startswith("[") and not info[alone].startswith("[")
