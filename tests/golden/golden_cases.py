"""The golden vectors' values and codecs, one list per layer (docs/interfaces.md).

Every value is fixed here (identities, keys, counters, message IDs), so every
encoding is deterministic. Changing a value changes its stored bytes: run
``python tests/golden/regenerate.py`` and review the diff of ``tests/golden/*.txt``
against docs/interfaces.md before committing.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
from golden_vectors import Fields, Vector, show

from m2mc.group import codec as gc
from m2mc.group.groupwire import open_frame, seal_frame
from m2mc.group.stream_codec import LAST, StreamAck, StreamData, StreamNack
from m2mc.infra import codec as ic
from m2mc.infra import messages as im
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.state import pack_groups
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.security.auth import AuthConfig, GroupAuth, Suite
from m2mc.wire import packet as pk
from m2mc.wire.m2mp import M2MPConfig, M2MPLayer, MessageReceived


def find(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that has it; failing that, from whichever
    module under src/m2mc defines it (modules are being moved: the vectors must not
    depend on where a codec lives, only on what it writes)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    spec = importlib.util.find_spec("m2mc")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    definition = re.compile(rf"^(?:def|class) {re.escape(name)}\b", re.M)
    for path in sorted(root.rglob("*.py")):
        if definition.search(path.read_text(encoding="utf-8")):
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(("m2mc", *(p for p in parts if p != "__init__")))
            return getattr(importlib.import_module(module), name)
    raise LookupError(f"no module under src/m2mc defines {name}")


# ------------------------------------------------------------------ fixed inputs
GID = "alice/1"
TAG = gc.group_tag(GID)
KEY = bytes(range(32))  # the group (or deployment) key of every keyed vector
COUNTER = 1_700_000_000_000_000  # a sender's first counter: 2023-11-14 22:13:20 UTC in µs


def pattern(n: int) -> bytes:
    """n bytes 00 01 02 ... ff 00 01 ...: easy to follow in a dump."""
    return bytes(i % 256 for i in range(n))


# ------------------------------------------------------------------ field layouts
def m2mp_fields(d: bytes) -> Fields:
    word = int.from_bytes(d[4:8], "big")
    last = "last" if word >> 31 else "not last"
    return [("message ID", d[:4]), (f"{last}, fragment {word & 0x7FFFFFFF}", d[4:8]),
            (f"fragment, {len(d) - 8} bytes", d[8:])]


def _group_header(d: bytes) -> Fields:
    kind = d[11]
    name = gc.Kind(kind).name if kind in {int(k) for k in gc.Kind} else "?"
    tag = "discovery tag" if d[3:11] == gc.DISCOVERY_TAG else f"group tag of {GID!r}"
    return [("magic 'MC'", d[:2]), ("version 1", d[2:3]), (tag, d[3:11]),
            (f"kind {kind} {name}", d[11:12]), (f"flags {d[12]:#04x}", d[12:13])]


def group_fields(d: bytes) -> Fields:
    return [*_group_header(d), ("msgpack body", d[13:])]


def auth_fields(d: bytes, at: int) -> Fields:
    """The authentication header, body and tag after a cleartext prefix of ``at`` bytes."""
    n = d[at + 3]
    suite = Suite(d[at + 1])
    body = "msgpack body" if suite is Suite.HMAC_SHA256 else "ciphertext of the msgpack body"
    return [("auth version 1", d[at:at + 1]),
            (f"suite {int(suite)} {suite.name}", d[at + 1:at + 2]),
            ("key id", d[at + 2:at + 3]), (f"sender id length {n}", d[at + 3:at + 4]),
            ("sender id", d[at + 4:at + 4 + n]), ("counter", d[at + 4 + n:at + 12 + n]),
            (body, d[at + 12 + n:-16]), ("tag", d[-16:])]


def keyed_fields(d: bytes) -> Fields:
    return [*_group_header(d), *auth_fields(d, gc.HEADER_SIZE)]


def infra_fields(d: bytes) -> Fields:
    if d[2] & 0x80:
        r = d[3]
        return [("magic 'IM', version 0x81 (sealed)", d[:3]), (f"receiver length {r}", d[3:4]),
                ("receiver", d[4:4 + r]), *auth_fields(d, 4 + r)]
    return [("magic 'IM', version 1", d[:3]), ("CRC-32 of the body", d[3:7]),
            ("msgpack body [tag, fields...]", d[7:])]


def body_note(body: bytes) -> str:
    return show(msgpack.unpackb(body, raw=False))


def group_note(d: bytes) -> str:
    return body_note(d[gc.HEADER_SIZE:])


def keyed_note(d: bytes) -> str:
    frame, _ = open_frame(_sealer(Suite(d[gc.HEADER_SIZE + 1]), "receiver"), d)
    return "body " + body_note(bytes(frame.body))


def infra_note(d: bytes) -> str:
    if not d[2] & 0x80:
        return body_note(d[ic.HEADER_SIZE:])
    at = 4 + d[3]
    opened = _infra_auth(Suite(d[at + 1]), "reader").open(d, at)
    return "body " + body_note(opened.body)


# ------------------------------------------------------------------ M2MP (seeds/002 section 5)
class _FixedId(random.Random):
    """A generator that always draws the same message ID."""

    def __init__(self, message_id: int) -> None:
        super().__init__(0)
        self.message_id = message_id

    def getrandbits(self, k: int) -> int:
        return self.message_id


def _m2mp_encode(redundancy: int, packet_size: int = pk.MAX_PACKET
                 ) -> Callable[[Any], list[bytes]]:
    def encode(value: tuple[int, bytes]) -> list[bytes]:
        message_id, payload = value
        config = M2MPConfig(redundancy=redundancy, flow_control=False, packet_size=packet_size)
        layer = M2MPLayer(config, _FixedId(message_id))
        layer.send(payload, 0.0)
        return layer.datagrams_to_send(0.0)

    return encode


def _m2mp_decode(datagrams: list[bytes]) -> tuple[int, bytes]:
    layer = M2MPLayer(M2MPConfig(flow_control=False), random.Random(0))
    layer.add_filter(b"")
    layer.receive_datagrams(datagrams, 0.0)
    got = [e for e in layer.events() if isinstance(e, MessageReceived)]
    if len(got) != 1:
        raise AssertionError(f"expected one message delivered, got {len(got)}")
    return got[0].message_id, got[0].payload


def m2mp_vectors() -> list[Vector]:
    def message(name: str, note: str, message_id: int, payload: bytes,
                redundancy: int = 1, packet_size: int = pk.MAX_PACKET) -> Vector:
        # Decoded by a receiver at the default size: any receiver takes any packet size.
        return Vector("m2mp", name, note, (message_id, payload),
                      _m2mp_encode(redundancy, packet_size), _m2mp_decode, m2mp_fields)

    def packet(name: str, note: str, p: pk.Packet) -> Vector:
        return Vector("m2mp", name, note, p, lambda v: [pk.encode(v)],
                      lambda d: pk.decode(d[0]), m2mp_fields)

    return [
        message("message.empty", "a message of 0 bytes: one packet, empty fragment, last flag",
                0x00000001, b""),
        message("message.hello", 'the 5-byte message "hello": one packet', 0xC0FFEE01, b"hello"),
        message("message.500", "exactly 500 bytes (q=1, r=0): one full packet", 0x0000_0500,
                pattern(500)),
        message("message.1000", "1000 bytes (q=2, r=0): two full packets", 0x0000_1000,
                pattern(1000)),
        message("message.1001", "1001 bytes (q=2, r=1): 500 + 500 + 1", 0x0000_1001, pattern(1001)),
        message("message.redundancy2", 'redundancy 2: every packet twice; delivered once',
                0xFEEDFACE, b"twice", redundancy=2),
        message("message.3000_packet_1472",
                "3000 bytes sent at packet=1472 (an option, not the default): fragments of "
                "1464 bytes, 1464 + 1464 + 72", 0x0000_1472, pattern(3000), packet_size=1472),
        packet("packet.middle", "one packet in the middle of a message: fragment 7, not last",
               pk.Packet(0x12345678, 7, False, b"middle")),
        packet("packet.last_high", "the highest fragment number, last",
               pk.Packet(0xFFFFFFFF, 0x7FFFFFFF, True, b"z")),
    ]


# ------------------------------------------------------------------ group layer (docs/group.md)
def _mid(pid: str, seq: int) -> MessageId:
    return MessageId(pid, seq)


ENTRIES: gc.Entries = [(17, _mid("alice", 4)), (18, gc.MemberEntry("carol", 1, True))]
MEMBERS = (gc.MemberEntry("alice", 1, True), gc.MemberEntry("bob", 3, False))


def group_bodies() -> list[tuple[str, str, bytes, gc.Body]]:
    """(name, note, tag, body): every kind, some in several shapes."""
    q = Message(_mid("carol", 1), ROOT, b"Did you visit Delhi?")
    a = Message(_mid("alice", 2), _mid("carol", 1), b"Yes")
    return [
        ("DATA", "two S_b records: one answering nothing (OTR), one answering carol:1",
         TAG, gc.Data("alice", [Message(_mid("alice", 1), ROOT, b"hello"), a])),
        ("DATA.total", "a record with its gseq (total order)",
         TAG, gc.Data("alice", [Message(_mid("alice", 4), _mid("bob", 2), b"ok", gseq=17)])),
        ("DATA.causal", "a record with no gseq (nil) and a vector clock (causal order)",
         TAG, gc.Data("alice", [Message(_mid("alice", 3), ROOT, b"hi",
                                        vclock={"alice": 3, "bob": 1})])),
        ("REPAIR", "a retransmission of another member's message",
         TAG, gc.Repair("bob", [q])),
        ("ORDER", "the sequencer of ballot (2, alice) proposes positions 17 and 18; 16 committed",
         TAG, gc.Order("alice", 2, ENTRIES, 16)),
        ("STATUS", "an S_b member's status: high-waters, membership, no sequencer state",
         TAG, gc.Status("alice", 5, {"alice": 5, "bob": 2}, MEMBERS, None, 0)),
        ("STATUS.total", "a total-order member's status: its log state and commit point",
         TAG, gc.Status("bob", 2, {"alice": 4}, MEMBERS, gc.LogState(2, "alice", 2, "alice", 18),
                        17)),
        ("STATUS.named", "an S_b member's status carrying its own display name",
         TAG, gc.Status("alice", 5, {"alice": 5}, MEMBERS, None, 0, "Alice")),
        ("NACK", "bob asks for alice:3-5 and alice:9, and positions 12-14",
         TAG, gc.Nack("bob", {"alice": [(3, 5), (9, 9)]}, [(12, 14)])),
        ("SYNC_REQ", "catch-up request number 2 with the digest of what the requester holds",
         TAG, gc.SyncReq("dave", 2, {"alice": [(1, 10)], "bob": [(1, 3), (5, 6)]})),
        ("SYNC_RESP", "bob answers dave's request 2 with one record; nothing remains",
         TAG, gc.SyncResp("bob", "dave", 2, [q], 0)),
        ("JOIN", "dave joins (membership version 3) an S_b group described 'threaded chat'",
         TAG, gc.Join("dave", 3, "sb", "threaded chat")),
        ("JOIN.named", "dave joins under the display name 'Dave D.'",
         TAG, gc.Join("dave", 3, "sb", "threaded chat", "Dave D.")),
        ("LEAVE", "dave leaves (membership version 4)",
         TAG, gc.Leave("dave", 4)),
        ("HANDOVER", "the sequencer of ballot (2, alice) hands over to bob at position 19",
         TAG, gc.Handover("alice", gc.SequencerInfo(2, "bob", 19))),
        ("ACK", "bob holds ballot (2, alice)'s log up to 18, synced",
         TAG, gc.Ack("bob", 2, "alice", 18, True)),
        ("PREPARE", "carol asks for promises for ballot (3, carol); 16 committed",
         TAG, gc.Prepare("carol", 3, 16)),
        ("PROMISE", "bob promises ballot (3, carol), with its log after 16",
         TAG, gc.Promise("bob", 3, "carol", 2, "alice", 16, 18, ENTRIES)),
        ("START", "carol, sequencer of ballot (3, carol): its log after 16",
         TAG, gc.Start("carol", 3, 16, ENTRIES)),
        ("DECIDED", "committed entries, answering a NACK of positions",
         TAG, gc.Decided("alice", ENTRIES)),
        ("GONE", "alice evicted bob:1-2 and position 3; one stub (ids retention mode)",
         TAG, gc.Gone("alice", {"bob": [(1, 2)]}, [(3, 3)],
                      [Message(_mid("bob", 1), ROOT, b"", gseq=3)])),
        ("STREAM", "bob writes chunk 2 (the last: 3 chunks of 16 bytes, 40 in all) of alice's "
         "stream alice:7, with the body's size and SHA-256",
         TAG, StreamData("bob", "alice", 7, 2, 16, pattern(8), LAST, 40,
                         bytes(range(32)))),
        ("STREAM_NACK", "carol asks for chunks 0-1 and 5 of alice's stream alice:7",
         TAG, StreamNack("carol", "alice", 7, [(0, 1), (5, 5)])),
        ("STREAM_ACK", "bob holds chunks 0-63 of alice's stream alice:7 in order (its sender may "
         "send chunks below 64 plus its window)",
         TAG, StreamAck("bob", "alice", 7, 64)),
        ("ADV", "dave advertises itself (discovery tag)",
         gc.DISCOVERY_TAG, gc.Adv("dave")),
        ("GRPS_INFO", "bob describes an open S_b group and a keyed total-order group",
         gc.DISCOVERY_TAG, gc.GrpsInfo("bob", (
             gc.GrpInfo(GID, "threaded chat", "sb", MEMBERS),
             gc.GrpInfo("carol/2", "team", "total", (gc.MemberEntry("carol", 1, True),),
                        keyed=True)))),
        ("GRPS_INFO.named", "an open group whose current member alice has a display name",
         gc.DISCOVERY_TAG, gc.GrpsInfo("bob", (
             gc.GrpInfo(GID, "threaded chat", "sb", MEMBERS, names=(("alice", "Alice"),)),))),
    ]


def _group_decode(datagrams: list[bytes]) -> tuple[bytes, gc.Body]:
    frame = gc.split_frame(datagrams[0])
    return frame.tag, gc.decode_body(frame.kind, frame.body)


def group_vectors() -> list[Vector]:
    out = [Vector("group", f"group.{name}", note, (tag, body),
                  lambda v: [gc.encode(v[0], v[1])], _group_decode, group_fields, group_note)
           for name, note, tag, body in group_bodies()]
    out.append(Vector("group", "filter.group",
                      f"the M2MP filter of group {GID!r}: the first 11 bytes",
                      GID, lambda g: [gc.filter_prefix(gc.group_tag(g))], None,
                      lambda d: _group_header(d + b"\0\0")[:3]))
    out.append(Vector("group", "filter.discovery", "the M2MP filter of discovery traffic",
                      None, lambda _: [gc.filter_prefix(gc.DISCOVERY_TAG)], None,
                      lambda d: _group_header(d + b"\0\0")[:3]))
    return out


SUITES = {Suite.HMAC_SHA256: "hmac-sha256", Suite.AES_256_GCM: "aes-256-gcm",
          Suite.CHACHA20_POLY1305: "chacha20-poly1305"}
DISCOVERY_KINDS = frozenset({int(gc.Kind.ADV), int(gc.Kind.GRPS_INFO)})  # never sealed


def _sealer(suite: Suite, sender: str) -> GroupAuth:
    return GroupAuth(GID, KEY, sender, config=AuthConfig(SUITES[suite]), counter_start=COUNTER)


def _keyed_encode(suite: Suite) -> Callable[[Any], list[bytes]]:
    def encode(value: tuple[bytes, gc.Body]) -> list[bytes]:
        tag, body = value
        return [seal_frame(_sealer(suite, body.sender), gc.encode(tag, body))]

    return encode


def _keyed_decode(suite: Suite) -> Callable[[list[bytes]], Any]:
    def decode(datagrams: list[bytes]) -> tuple[bytes, gc.Body]:
        frame, sender = open_frame(_sealer(suite, "receiver"), datagrams[0])
        body = gc.decode_body(frame.kind, frame.body)
        if sender != body.sender:
            raise AssertionError(f"sealed by {sender!r}, body says {body.sender!r}")
        return frame.tag, body

    return decode


def keyed_vectors() -> list[Vector]:
    out = []
    for suite, suite_name in SUITES.items():
        for name, note, tag, body in group_bodies():
            if "." in name or gc.encode(tag, body)[11] in DISCOVERY_KINDS:
                continue
            out.append(Vector("group_keyed", f"{suite_name}.{name}",
                              f"{note}; sealed with {suite_name}, key 00 01 .. 1f, key id 0, "
                              f"counter {COUNTER}", (tag, body), _keyed_encode(suite),
                              _keyed_decode(suite), keyed_fields, keyed_note))
    return out


# ------------------------------------------------------------------ infrastructure mode
M1 = MemberId("m1", 0x1234ABCD)
M2 = MemberId("m2", 0x0BADF00D)
E3 = Epoch(3, 1_700_000_000.25, "H1")
E2 = Epoch(2, 1_699_999_000.5, "H2")
CELL1 = im.CellInfo("H1", "udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=1",
                    "127.0.0.1:7801", 2)
CELL2 = im.CellInfo("H2", "udp-multicast://239.255.20.2:7712?iface=127.0.0.1&ttl=1",
                    "127.0.0.1:7802", 0)
REC_APP = im.Record(10, 7, im.APP, M1, 3, 3, 0, b"\x00hello", "lunch", 5)
RECORDS = (  # one record of every kind
    REC_APP,
    im.Record(11, 8, im.JOINED, M2, body=pack_groups([("lunch", 5), ("coffee", 0)])),
    im.Record(12, 9, im.LEFT, M2),
    im.Record(13, 10, im.EXPELLED, M1, 4, 4),
    im.Record(14, 0, im.CLEANUP, M2),
    im.Record(15, 0, im.RETIRED, MemberId("H4", 0)),
    im.Record(16, 0, im.ADMITTED, MemberId("H4", 0)),
    im.Record(17, 11, im.APP, M1, 4, 4, 2, b"\x01\x00\x07carol:1Yes", "lunch", 6),
    im.Record(1, 0, im.GENESIS, MemberId("H1", 0), body=bytes.fromhex("5eed0f5e9e2c0001")),
    im.Record(18, 12, im.GJOINED, M1, 5, 5, 0, b"", "coffee", 0),
    im.Record(19, 13, im.GLEFT, M1, 6, 6, 0, b"", "coffee", 0),
    im.Record(20, 14, im.NOOP, M1, 7, 7, 0, b"", "tea", 0),
)
SEQUENCE = 0x5EED0F5E9E2C0001  # a sequence id (its GENESIS record's body)
SNAPSHOT = im.Snapshot(30, 25, 24, (im.Row(M1, 5, 0, 3, True, 3), im.Row(M2, 8, 9, 0, False)),
                       (M2,), ("H4",), 15, SEQUENCE, (im.GroupRow("lunch", 6, (M1,)),
                                                      im.GroupRow("coffee", 0, ())))
NEW = im.NewReq("m1", "H1", 2, M1, (im.NewItem(3, 3, b"\x00hello", "lunch"),
                                    im.NewItem(4, 4, b"", "coffee", im.GJOINED),
                                    im.NewItem(5, 5, b"\x00bye", "coffee")))


def infra_messages() -> list[tuple[str, str, Any]]:
    return [
        ("Beacon", "H1's beacon: highest gseq 42, its uplink, the master, the directory, "
         "the sequence", im.Beacon("H1", 42, "127.0.0.1:7801", "H1", (CELL1, CELL2), SEQUENCE)),
        ("Normals", "two NORMAL multicasts broadcast in H1's cell",
         im.Normals("H1", RECORDS[:2])),
        ("Transfer", "TRANSFER copies for member m1",
         im.Transfer("H1", M1, (REC_APP,))),
        ("Ack", "H1 acknowledges m1's uplink frame 5",
         im.Ack("H1", "m1", 5)),
        ("Move", "H1 tells m1 to move to H2's cell",
         im.Move("H1", "m1", CELL2)),
        ("NotMember", "H1 tells m1 that its membership is gone",
         im.NotMember("H1", M1)),
        ("Hello", "m1's greeting (and heartbeat): its member id, mystable 7, a member",
         im.Hello("m1", "H1", M1, 7, True)),
        ("Hello.nomember", "a greeting from a computer that is no member yet (mid nil)",
         im.Hello("m3", "H1", None, 0, False)),
        ("JoinReq", "m1 asks to join the deployment with group lunch (uplink frame 1)",
         im.JoinReq("m1", "H1", 1, M1, ("lunch",))),
        ("NewReq", "three NEW items of m1 in one frame: a message to lunch, joining coffee, "
                   "a message to coffee",
         NEW),
        ("LeaveReq", "m1 asks to leave",
         im.LeaveReq("m1", "H1", 3, M1)),
        ("LeaveOkReq", "m1 delivered everything up to its 'has left'",
         im.LeaveOkReq("m1", "H1", 4, M1)),
        ("NackReq", "m1 delivered up to 7 and missed 8 and 9",
         im.NackReq("m1", "H1", 6, M1, 7, 10)),
        ("HistoryReq", "m1 asks for lunch's records from 1 to 40, the newest first",
         im.HistoryReq("m1", "H1", M1, 2, ("lunch",), 1, 40, True)),
        ("HistoryReply", "H1's answer: it covers 6 to 40 and holds from 5 on",
         im.HistoryReply("H1", M1, 2, 6, 40, 5, (REC_APP,), ("m1", "m2"))),
        ("Status", "H1's periodic status update",
         im.Status("H1", 1, "127.0.0.1", 7101, CELL1.cell, CELL1.uplink, 2, (M1,), "H1", E3, E3,
                   40, 42)),
        ("Status.election", "H2's status sent as part of election E3",
         im.Status("H2", 4, "127.0.0.1", 7102, CELL2.cell, CELL2.uplink, 0, (), "", E2, E2, 40,
                   40, E3)),
        ("ElectStart", "H1 starts election round 3",
         im.ElectStart(E3)),
        ("Vote", "H2 votes for H1 in election E3",
         im.Vote(E3, "H2", "H1")),
        ("Takeover", "H1, elected, takes over at commit 40; its log starts at 30",
         im.Takeover(E3, "H1", 40, 30)),
        ("TakeoverReject", "H2 refuses: it promised a newer epoch",
         im.TakeoverReject(E2, "H2", E3)),
        ("StateReply", "H2's log for the new master, with a snapshot",
         im.StateReply(E3, "H2", E2, 40, 42, SNAPSHOT, RECORDS[:2], RECORDS[2:3])),
        ("StateReply.nosnapshot", "a StateReply without snapshot (nil)",
         im.StateReply(E3, "H2", E3, 40, 40, None, (), ())),
        ("Forward", "H2 forwards m1's NEWs to the coordinator (forward 9)",
         im.Forward("H2", 9, im.NewReq("m1", "H2", 2, M1, NEW.items))),
        ("FwdAck", "the coordinator processed forward 9; its effect is in the log up to 43",
         im.FwdAck(E3, 9, 43)),
        ("StabInfo", "H2 reports that m1 delivered up to 7",
         im.StabInfo("H2", ((M1, 7),))),
        ("Subscribe", "H2's cell has members again (seeds/001 4.1)",
         im.Subscribe("H2")),
        ("Unsubscribe", "H2's cell has no member left",
         im.Unsubscribe("H2")),
        ("Fetch", "H2 asks the coordinator for multicasts 5 to 9",
         im.Fetch("H2", 5, 9)),
        ("Fetched", "the coordinator's answer",
         im.Fetched((REC_APP,))),
        ("Replicate", "the coordinator replicates one record of every kind",
         im.Replicate(E3, 40, RECORDS)),
        ("Sync", "replace everything after 30 by these records, from this snapshot",
         im.Sync(E3, 40, 30, SNAPSHOT, RECORDS[:1])),
        ("Accepted", "H2 holds the log up to 42, no gap",
         im.Accepted(E3, "H2", 42, False)),
        ("Commit", "committed up to 42, stable up to 40; replicas H1, H2 (seeds/001 4.1)",
         im.Commit(E3, 42, 40, ("H1", "H2"))),
        ("Reroute", "the master asks a host to move one member to H2",
         im.Reroute(E3, 1, CELL2)),
        ("AdminRequest", "an operator asks to retire H3",
         im.AdminRequest("operator-0a1b2c", 1, im.OP_RETIRE, "H3")),
        ("Reconfig", "H2 passes the retirement on to the master",
         im.Reconfig("H2", "operator-0a1b2c", 1, im.OP_RETIRE, "H3")),
        ("AdminResult", "the answer: done, at log position 44",
         im.AdminResult("H1", "operator-0a1b2c", 1, "ok", "retired H3", 44)),
        ("RetiredNotice", "the master tells H3 it was retired at 44",
         im.RetiredNotice("H1", "H3", 44)),
        ("Recover", "H3, restarted without state, asks where the deployment stands",
         im.Recover("H3", 0x2A2A2A2A)),
        ("RecoverReply", "H1 answers H3's question: epoch E3, it holds state, H4 retired",
         im.RecoverReply("H1", 0x2A2A2A2A, E3, False, ("H4",), 15)),
        ("HistoryAsk", "H2 passes m1's history request to the master",
         im.HistoryAsk("H2", "m1", M1, 2, ("lunch",), 1, 40, True)),
        ("HistoryAnswer", "the master's answer, for H2 to relay to m1",
         im.HistoryAnswer("H1", "m1", M1, 2, 1, 40, 1, (REC_APP,), ("m1", "m2"))),
    ]


def _infra_auth(suite: Suite, sender: str) -> GroupAuth:
    return GroupAuth(INFRA_KEY_CONTEXT, {0: KEY}, sender, config=AuthConfig(SUITES[suite]),
                     counter_start=COUNTER)


def infra_vectors() -> list[Vector]:
    out = [Vector("infra", f"plain.{name}", note, msg, lambda v: [ic.encode(v)],
                  lambda d: ic.decode(d[0]), infra_fields, infra_note)
           for name, note, msg in infra_messages()]
    sealed: list[tuple[Suite, str, str, str, Any]] = [
        (Suite.HMAC_SHA256, "Commit.to_H2", "H1", "H2", im.Commit(E3, 42, 40, ("H1", "H2"))),
        (Suite.HMAC_SHA256, "Beacon.broadcast", "H1", "", im.Beacon("H1", 42, "127.0.0.1:7801",
                                                                     "H1", ())),
        (Suite.AES_256_GCM, "NewReq.to_any", "m1", "", NEW),
        (Suite.CHACHA20_POLY1305, "Vote.to_any", "H2", "", im.Vote(E3, "H2", "H1")),
    ]
    for suite, name, sender, to, msg in sealed:
        receiver = to or "anyone"

        def encode(v: Any, suite: Suite = suite, sender: str = sender, to: str = to) -> list[bytes]:
            return [InfraWire(_infra_auth(suite, sender)).encode(v, to)]

        def decode(d: list[bytes], suite: Suite = suite, receiver: str = receiver) -> Any:
            return InfraWire(_infra_auth(suite, receiver)).decode(d[0])[0]

        out.append(Vector("infra", f"sealed.{SUITES[suite]}.{name}",
                          f"sealed by {sender} for {to or 'any receiver'} with {SUITES[suite]}, "
                          f"deployment key 00 01 .. 1f, counter {COUNTER}",
                          msg, encode, decode, infra_fields, infra_note))
    return out


# ------------------------------------------------------------------ local framings
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def framing_vectors() -> list[Vector]:
    encode_frame = find("encode_frame", "m2mc.transport.frames")
    frame_decoder = find("FrameDecoder", "m2mc.transport.frames")
    frame_reader = find("FrameReader", "m2mc.infra_runtime.net")
    packet = pk.encode(pk.Packet(0xC0FFEE01, 0, True, b"hello"))

    def daemon_decode(d: list[bytes]) -> list[bytes]:
        return list(frame_decoder().feed(d[0]))

    def backbone_encode(v: tuple[str, list[bytes]]) -> list[bytes]:
        name, frames = v
        stream = b"".join(_U32.pack(len(f)) + f for f in [name.encode(), *frames])
        return [stream]

    def backbone_decode(d: list[bytes]) -> tuple[str, list[bytes]]:
        reader = frame_reader()
        frames = reader.feed(d[0])
        return reader.peer, frames

    def daemon_fields(d: bytes) -> Fields:
        out: Fields = []
        while d:
            (n,) = _U16.unpack_from(d)
            out += [(f"length {n}", d[:2]), ("datagram (an M2MP packet)", d[2:2 + n])]
            d = d[2 + n:]
        return out

    def backbone_fields(d: bytes) -> Fields:
        out: Fields = []
        first = True
        while d:
            (n,) = _U32.unpack_from(d)
            what = "the connecting host's name" if first else "a frame (infra/wire)"
            out += [(f"length {n}", d[:4]), (what, d[4:4 + n])]
            d, first = d[4 + n:], False
        return out

    return [
        Vector("framing", "daemon.two_datagrams",
               "a local process and the daemon (TCP): each datagram after its 2-byte length",
               [packet, packet], lambda v: [b"".join(encode_frame(x) for x in v)], daemon_decode,
               daemon_fields),
        Vector("framing", "backbone.stream",
               "a backbone connection (TCP): 4-byte lengths; the first frame names the host",
               ("H1", [ic.encode(im.Subscribe("H1"))]), backbone_encode, backbone_decode,
               backbone_fields),
    ]


# ------------------------------------------------------------------ application payloads
def payload_vectors() -> list[Vector]:
    from m2mc_chat.codec import ChatBody, decode_body, encode_body

    pack_body = find("pack_body", "m2mc.api.infra_groups")
    unpack_body = find("unpack_body", "m2mc.api.infra_groups")

    def body_fields(d: bytes) -> Fields:
        if d[:1] == b"\x00":
            return [("0: answers nothing", d[:1]), ("application data", d[1:])]
        (n,) = _U16.unpack_from(d, 1)
        return [("1: a reply", d[:1]), (f"parent id length {n}", d[1:3]),
                ("parent id 'pid:seq'", d[3:3 + n]), ("application data", d[3 + n:])]

    return [
        Vector("payloads", "chat.message",
               "the threaded chat's payload inside a group message: UTF-8 JSON",
               ChatBody("alice", "Did you visit Delhi?", 1_700_000_000.5),
               lambda v: [encode_body(v.nick, v.text, v.ts)], lambda d: decode_body(d[0]),
               lambda d: [("UTF-8 JSON", d)]),
        Vector("payloads", "infra_body.root",
               "an infrastructure-mode application body answering nothing",
               (b"hello", ROOT), lambda v: [pack_body(*v)], lambda d: unpack_body(d[0]),
               body_fields),
        Vector("payloads", "infra_body.reply",
               "an infrastructure-mode application body answering carol:1",
               (b"Yes", _mid("carol", 1)), lambda v: [pack_body(*v)],
               lambda d: unpack_body(d[0]), body_fields),
    ]


LAYERS: dict[str, tuple[str, Callable[[], list[Vector]]]] = {
    "m2mp": ("M2MP packets and messages (docs/interfaces.md section 1)", m2mp_vectors),
    "group": ("group-layer frames, plain (docs/interfaces.md section 7, docs/group.md)",
              group_vectors),
    "group_keyed": ("keyed group frames (docs/interfaces.md section 8, docs/security.md)",
                    keyed_vectors),
    "infra": ("infrastructure-mode frames (docs/interfaces.md section 9, docs/infra.md)",
              infra_vectors),
    "framing": ("stream framings (docs/interfaces.md section 10)", framing_vectors),
    "payloads": ("application payloads (docs/interfaces.md section 11)", payload_vectors),
}


def all_vectors() -> list[Vector]:
    return [v for _, make in LAYERS.values() for v in make()]
