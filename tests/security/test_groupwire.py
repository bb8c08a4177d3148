"""Keyed group frames: round trip through the real group codec, and every refusal."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import DecodeError
from m2mc.group import codec
from m2mc.group.groupwire import frame_tag, is_sealed, open_frame, seal_frame
from m2mc.ordering import ROOT, Message, MessageId
from m2mc.security import (
    AuthConfig,
    AuthError,
    GroupAuth,
    ReplayError,
    UnauthenticatedError,
)

KEY = bytes(range(32))
TAG = codec.group_tag("team")


def auth(pid: str, suite: str = "hmac-sha256") -> GroupAuth:
    return GroupAuth("team", KEY, pid, config=AuthConfig(suite))


BODIES = [
    codec.Data("alice", [Message(MessageId("alice", 1), ROOT, b"hello")]),
    codec.Join("alice", 1, "sb", "team"),
    codec.Leave("alice", 2),
    codec.Nack("alice", {"bob": [(1, 4)]}, []),
    codec.SyncReq("alice", 1, {"bob": [(1, 9)]}),
    codec.Gone("alice", {"bob": [(1, 4)]}, [(3, 9)],
               [Message(MessageId("bob", 2), MessageId("bob", 1), b"", {"bob": 2}, 5)]),
]


@pytest.mark.parametrize("suite", ["hmac-sha256", "aes-256-gcm", "chacha20-poly1305"])
@pytest.mark.parametrize("body", BODIES, ids=lambda b: type(b).__name__)
def test_sealed_frames_open_to_the_same_body(body: codec.Body, suite: str) -> None:
    sender, receiver = auth("alice", suite), auth("bob", suite)
    plain = codec.encode(TAG, body)
    sealed = seal_frame(sender, plain)
    assert is_sealed(sealed) and not is_sealed(plain)
    assert frame_tag(sealed) == TAG
    assert sealed[:codec.FILTER_SIZE] == codec.filter_prefix(TAG)  # still the group's filter
    frame, who = open_frame(receiver, sealed)
    assert who == "alice"
    assert codec.decode_body(frame.kind, frame.body) == body


@settings(max_examples=100, deadline=None)
@given(index=st.integers(0, len(BODIES) - 1), data=st.data())
def test_any_flipped_bit_is_refused(index: int, data: st.DataObject) -> None:
    sealed = bytearray(seal_frame(auth("alice"), codec.encode(TAG, BODIES[index])))
    bit = data.draw(st.integers(0, len(sealed) * 8 - 1))
    sealed[bit // 8] ^= 1 << (bit % 8)
    receiver = auth("bob")
    with pytest.raises(DecodeError):
        open_frame(receiver, bytes(sealed))
    # Flipping the auth flag itself leaves an unsealed frame: refused as unauthenticated.
    assert receiver.stats.opened == 0


def test_outsider_cannot_forge_a_leave_or_join() -> None:
    receiver = auth("bob")
    for body in (codec.Leave("alice", 99), codec.Join("mallory", 1, "sb", "")):
        with pytest.raises(UnauthenticatedError):
            open_frame(receiver, codec.encode(TAG, body))
        forged = seal_frame(GroupAuth("team", bytes(32), "alice"), codec.encode(TAG, body))
        with pytest.raises(AuthError):
            open_frame(receiver, forged)
    assert receiver.stats.unauthenticated == 2 and receiver.stats.bad_tag == 2


def test_replayed_frame_is_refused() -> None:
    sealed = seal_frame(auth("alice"), codec.encode(TAG, BODIES[0]))
    receiver = auth("bob")
    open_frame(receiver, sealed)
    with pytest.raises(ReplayError):
        open_frame(receiver, sealed)


def test_unkeyed_group_takes_plain_frames_and_refuses_sealed_ones() -> None:
    frame, who = open_frame(None, codec.encode(TAG, BODIES[1]))
    assert who is None and frame.kind == codec.Kind.JOIN
    with pytest.raises(DecodeError, match="no key"):
        open_frame(None, seal_frame(auth("alice"), codec.encode(TAG, BODIES[1])))
    with pytest.raises(DecodeError):
        open_frame(None, b"MC")


def test_sealing_twice_is_a_usage_error() -> None:
    sealed = seal_frame(auth("alice"), codec.encode(TAG, BODIES[0]))
    with pytest.raises(ValueError):
        seal_frame(auth("alice"), sealed)
