"""The infrastructure-mode codec: every message round-trips; bad frames raise DecodeError."""

from __future__ import annotations

import contextlib
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import DecodeError
from m2mc.infra import messages as m
from m2mc.infra.codec import HEADER_SIZE, decode, encode
from m2mc.infra.ids import Epoch, MemberId

MID = MemberId("M1", 0xDEADBEEF)
EPOCH = Epoch(3, 12.5, "H2")
REC = m.Record(7, 5, m.APP, MID, 2, 9, 1, b"hello")
CELL = m.CellInfo("H1", "udp-multicast://239.255.1.1:7000?iface=127.0.0.1&ttl=1",
                  "127.0.0.1:7101", 4)
SNAP = m.Snapshot(9, 6, 5, (m.Row(MID, 1, 0, 3, True),), (MemberId("M2", 1),))

SAMPLES: list[object] = [
    m.Beacon("H1", 17, "127.0.0.1:7101", "H2", (CELL,)),
    m.Normals("H1", (REC, m.Record(8, 6, m.JOINED, MID))),
    m.Transfer("H1", MID, (REC,)),
    m.Ack("H1", "M1", 4),
    m.Move("H1", "M1", CELL),
    m.NotMember("H1", MID),
    m.Hello("M1", "H1", MID, 12, True),
    m.Hello("M1", "H1", None, 0),
    m.JoinReq("M1", "H1", 1, MID),
    m.NewReq("M1", "H1", 2, MID, (m.NewItem(1, 1, b"a"), m.NewItem(2, 2, b""))),
    m.LeaveReq("M1", "H1", 3, MID),
    m.LeaveOkReq("M1", "H1", 4, MID),
    m.NackReq("M1", "H1", 5, MID, 3, 9),
    m.Status("H1", 2, "127.0.0.1", 7101, "cell", "up", 3, (MID,), "H2", EPOCH, EPOCH, 5, 9, None),
    m.Status("H1", 2, "127.0.0.1", 7101, "cell", "up", 3, (), "", EPOCH, EPOCH, 5, 9, EPOCH),
    m.ElectStart(EPOCH),
    m.Vote(EPOCH, "H1", "H3"),
    m.Takeover(EPOCH, "H1", 4),
    m.TakeoverReject(EPOCH, "H2", Epoch(4, 1.0, "H3")),
    m.StateReply(EPOCH, "H2", EPOCH, 4, 7, SNAP, (REC,)),
    m.StateReply(EPOCH, "H2", EPOCH, 4, 7, None, ()),
    m.Forward("H1", 3, m.NewReq("M1", "H1", 2, MID, (m.NewItem(1, 1, b"a"),))),
    m.Forward("H1", 4, m.LeaveOkReq("M1", "H1", 4, MID)),
    m.FwdAck(EPOCH, 3, 10),
    m.StabInfo("H1", ((MID, 4),)),
    m.Subscribe("H1"),
    m.Unsubscribe("H1"),
    m.Fetch("H1", 3, 9),
    m.Fetched((REC,)),
    m.Replicate(EPOCH, 6, (REC,)),
    m.Sync(EPOCH, 6, 4, SNAP, (REC,)),
    m.Accepted(EPOCH, "H2", 9, True),
    m.Commit(EPOCH, 9, 5),
    m.Reroute(EPOCH, 2, CELL),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_every_message_round_trips(sample: object) -> None:
    assert decode(encode(sample)) == sample  # type: ignore[arg-type]


def test_a_flipped_bit_fails_the_checksum() -> None:
    frame = bytearray(encode(SAMPLES[1]))  # type: ignore[arg-type]
    frame[-3] ^= 0x04
    with pytest.raises(DecodeError, match="checksum"):
        decode(bytes(frame))


def test_wrong_magic_short_frame_and_unknown_tag_are_typed_errors() -> None:
    with pytest.raises(DecodeError):
        decode(b"XX")
    with pytest.raises(DecodeError, match="magic"):
        decode(b"ZZ\x01" + encode(SAMPLES[0])[3:])  # type: ignore[arg-type]
    body = b"\x92\x7f\x01"  # msgpack [127, 1]
    frame = b"IM\x01" + zlib.crc32(body).to_bytes(4, "big") + body
    with pytest.raises(DecodeError, match="unknown message tag"):
        decode(frame)


def test_a_negative_sequence_number_is_refused() -> None:
    import msgpack

    body = msgpack.packb([4, "H1", "M1", -3])
    frame = b"IM\x01" + zlib.crc32(body).to_bytes(4, "big") + body
    with pytest.raises(DecodeError, match="non-negative"):
        decode(frame)


def test_a_forward_cannot_smuggle_a_non_request() -> None:
    import msgpack

    body = msgpack.packb([26, "H1", 1, [4, "H1", "M1", 3]])  # Forward(Ack)
    frame = b"IM\x01" + zlib.crc32(body).to_bytes(4, "big") + body
    with pytest.raises(DecodeError, match="not a member request"):
        decode(frame)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_ever_raise_decode_error(data: bytes) -> None:
    for frame in (data, b"IM\x01" + zlib.crc32(data).to_bytes(4, "big") + data):
        with contextlib.suppress(DecodeError):
            decode(frame)


records = st.builds(
    m.Record, st.integers(0, 2**40), st.integers(0, 2**40), st.sampled_from(sorted(m.RECORD_KINDS)),
    st.builds(MemberId, st.text(max_size=8), st.integers(0, 2**32 - 1)), st.integers(0, 2**31),
    st.integers(0, 2**31), st.integers(0, 1000), st.binary(max_size=64))


@settings(max_examples=200, deadline=None)
@given(st.lists(records, max_size=20))
def test_record_batches_round_trip(recs: list[m.Record]) -> None:
    msg = m.Normals("H", tuple(recs))
    frame = encode(msg)
    assert len(frame) > HEADER_SIZE
    assert decode(frame) == msg
