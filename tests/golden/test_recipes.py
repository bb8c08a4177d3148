"""The docs' recipes, followed by hand, give the stored golden bytes.

test_golden.py checks the codecs against the stored vectors; this file checks the
*documentation* against them. Each test rebuilds some vectors from nothing but what
docs/interfaces.md (and docs/group.md, docs/security.md, docs/infra.md) say, with the
standard library, msgpack and ``cryptography``, never with m2mc's codecs. A failure
here is a disagreement between the docs and the wire: one of them has a bug.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib

import msgpack
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from golden_vectors import load

KEY = bytes(range(32))
COUNTER = 1_700_000_000_000_000
GID = "alice/1"

M2MP = load("m2mp")
GROUP = load("group")
KEYED = load("group_keyed")
INFRA = load("infra")
FRAMING = load("framing")
PAYLOADS = load("payloads")


def m2mp_packets(message_id: int, message: bytes, redundancy: int = 1) -> list[bytes]:
    """docs/interfaces.md section 1: n = q*500 + r bytes make q packets of 500 bytes and
    one of r if r > 0 (one empty packet for n = 0); bytes 0-3 the message ID, 4-7 the
    last flag (bit 31) and the fragment number; every packet sent N times in a row."""
    pieces = [message[i:i + 500] for i in range(0, len(message), 500)] or [b""]
    out = []
    for number, piece in enumerate(pieces):
        last = 1 << 31 if number == len(pieces) - 1 else 0
        out += [struct.pack(">II", message_id, last | number) + piece] * redundancy
    return out


def pattern(n: int) -> bytes:
    return bytes(i % 256 for i in range(n))


def test_m2mp_packets_follow_section_1() -> None:
    assert M2MP["message.empty"] == m2mp_packets(1, b"")
    assert M2MP["message.hello"] == m2mp_packets(0xC0FFEE01, b"hello")
    assert M2MP["message.500"] == m2mp_packets(0x500, pattern(500))
    assert M2MP["message.1000"] == m2mp_packets(0x1000, pattern(1000))
    assert M2MP["message.1001"] == m2mp_packets(0x1001, pattern(1001))
    assert M2MP["message.redundancy2"] == m2mp_packets(0xFEEDFACE, b"twice", redundancy=2)
    assert M2MP["packet.middle"] == [struct.pack(">II", 0x12345678, 7) + b"middle"]
    assert M2MP["packet.last_high"] == [b"\xff" * 8 + b"z"]


def group_tag(gid: str) -> bytes:
    """docs/interfaces.md section 7: BLAKE2b with an 8-byte digest of the UTF-8 group id."""
    return hashlib.blake2b(gid.encode(), digest_size=8).digest()


def group_frame(tag: bytes, kind: int, body: object, flags: int = 0) -> bytes:
    return b"MC\x01" + tag + bytes((kind, flags)) + bytes(msgpack.packb(body, use_bin_type=True))


DATA_BODY = ["alice", [["alice", 1, "", 0, b"hello"], ["alice", 2, "carol", 1, b"Yes"]]]


def test_group_frames_follow_section_7() -> None:
    tag = group_tag(GID)
    assert GROUP["group.DATA"] == [group_frame(tag, 1, DATA_BODY)]
    assert GROUP["group.DATA.causal"] == [group_frame(
        tag, 1, ["alice", [["alice", 3, "", 0, b"hi", None, {"alice": 3, "bob": 1}]]])]
    assert GROUP["group.JOIN"] == [group_frame(tag, 8, ["dave", 3, "sb", "threaded chat"])]
    assert GROUP["group.NACK"] == [group_frame(tag, 5, ["bob", {"alice": [3, 5, 9, 9]}, [12, 14]])]
    assert GROUP["group.ADV"] == [group_frame(bytes(8), 20, ["dave"])]
    members = [["alice", 1, True], ["bob", 3, False]]
    assert GROUP["group.GRPS_INFO"] == [group_frame(bytes(8), 21, ["bob", [
        [GID, "threaded chat", "sb", members],
        ["carol/2", "team", "total", [["carol", 1, True]], True]]])]
    assert GROUP["filter.group"] == [b"MC\x01" + tag]


def hkdf(key: bytes, info: bytes) -> bytes:
    """RFC 5869 with an empty salt (HashLen zero bytes), 32 bytes out."""
    prk = hmac.digest(bytes(32), key, "sha256")
    return hmac.digest(prk, info + b"\x01", "sha256")


def sealed(prefix: bytes, context: str, sender: str, suite: int, body: bytes) -> bytes:
    """docs/interfaces.md section 8 (docs/security.md): prefix | version 1, suite, key id 0,
    sender length, sender, counter | body | 16-byte tag."""
    head = bytes((1, suite, 0, len(sender))) + sender.encode() + COUNTER.to_bytes(8, "big")
    if suite == 1:
        mac = hkdf(KEY, b"m2mc-auth-v1 mac\x00" + context.encode())
        message = prefix + head + body
        return message + hmac.digest(mac, message, "sha256")[:16]
    enc = hkdf(KEY, b"m2mc-auth-v1 enc\x00" + context.encode())
    nonce = hashlib.sha256(b"m2mc-nonce-v1\x00" + head).digest()[:12]
    aead = AESGCM(enc) if suite == 2 else ChaCha20Poly1305(enc)
    return prefix + head + aead.encrypt(nonce, body, prefix + head)


def test_keyed_group_frames_follow_section_8() -> None:
    body = msgpack.packb(DATA_BODY, use_bin_type=True)
    prefix = b"MC\x01" + group_tag(GID) + bytes((1, 0x01))  # kind DATA, flag bit 0
    for suite, name in ((1, "hmac-sha256"), (2, "aes-256-gcm"), (3, "chacha20-poly1305")):
        assert KEYED[f"{name}.DATA"] == [sealed(prefix, GID, "alice", suite, body)], name
    leave = msgpack.packb(["dave", 4], use_bin_type=True)
    prefix = b"MC\x01" + group_tag(GID) + bytes((9, 0x01))
    assert KEYED["hmac-sha256.LEAVE"] == [sealed(prefix, GID, "dave", 1, leave)]


def infra_frame(body: object) -> bytes:
    """docs/interfaces.md section 9: "IM", version 1, CRC-32 (big-endian) of the msgpack body."""
    packed = bytes(msgpack.packb(body, use_bin_type=True))
    return b"IM\x01" + struct.pack(">I", zlib.crc32(packed)) + packed


EPOCH = [3, 1_700_000_000.25, "H1"]


def test_infra_frames_follow_section_9() -> None:
    assert INFRA["plain.Ack"] == [infra_frame([4, "H1", "m1", 5])]
    assert INFRA["plain.NackReq"] == [infra_frame([15, "m1", "H1", 6, ["m1", 0x1234ABCD], 7, 10])]
    assert INFRA["plain.Hello.nomember"] == [infra_frame([10, "m3", "H1", None, 0, False])]
    assert INFRA["plain.Vote"] == [infra_frame([22, EPOCH, "H2", "H1"])]
    app = [10, 7, 0, "m1", 0x1234ABCD, 3, 3, 0, b"\x00hello", "lunch", 5]
    assert INFRA["plain.Fetched"] == [infra_frame([32, [app]])]
    assert INFRA["plain.HistoryReq"] == [infra_frame(
        [16, "m1", "H1", ["m1", 0x1234ABCD], 2, ["lunch"], 1, 40, True])]
    assert INFRA["plain.HistoryReply"] == [infra_frame(
        [7, "H1", ["m1", 0x1234ABCD], 2, 6, 40, 5, [app], ["m1", "m2"]])]
    assert INFRA["plain.JoinReq"] == [infra_frame([11, "m1", "H1", 1, ["m1", 0x1234ABCD],
                                                   ["lunch"]])]
    commit = msgpack.packb([36, EPOCH, 42, 40, ["H1", "H2"]], use_bin_type=True)
    assert INFRA["sealed.hmac-sha256.Commit.to_H2"] == [
        sealed(b"IM\x81\x02H2", "m2mc-infra", "H1", 1, commit)]
    vote = msgpack.packb([22, EPOCH, "H2", "H1"], use_bin_type=True)
    assert INFRA["sealed.chacha20-poly1305.Vote.to_any"] == [
        sealed(b"IM\x81\x00", "m2mc-infra", "H2", 3, vote)]


def test_framings_follow_section_10() -> None:
    packet = struct.pack(">II", 0xC0FFEE01, 1 << 31) + b"hello"
    assert FRAMING["daemon.two_datagrams"] == [2 * (struct.pack(">H", len(packet)) + packet)]
    frame = infra_frame([29, "H1"])
    assert FRAMING["backbone.stream"] == [
        struct.pack(">I", 2) + b"H1" + struct.pack(">I", len(frame)) + frame]


def test_payloads_follow_section_11() -> None:
    assert PAYLOADS["chat.message"] == [
        b'{"nick":"alice","text":"Did you visit Delhi?","ts":1700000000.5}']
    assert PAYLOADS["infra_body.root"] == [b"\x00hello"]
    assert PAYLOADS["infra_body.reply"] == [b"\x01\x00\x07carol:1Yes"]
