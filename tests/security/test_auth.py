"""GroupAuth: what passes, what is refused, and what is counted."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError, DecodeError
from m2mc.security import (
    TAG_SIZE,
    AuthConfig,
    AuthError,
    BadTagError,
    GroupAuth,
    MalformedAuthError,
    ReplayError,
    StaleError,
    UnauthenticatedError,
    UnknownKeyError,
    counter_start_at,
    overhead,
)

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
PREFIX = b"MC\x01" + bytes(8) + b"\x01\x01"  # a group header with the auth flag set
SUITES = ["hmac-sha256", "aes-256-gcm", "chacha20-poly1305"]


def pair(suite: str = "hmac-sha256", **kw: int) -> tuple[GroupAuth, GroupAuth]:
    config = AuthConfig(suite=suite, **kw)
    return (GroupAuth("g", KEY, "alice", config=config),
            GroupAuth("g", KEY, "bob", config=AuthConfig(suite=suite, **kw)))


@pytest.mark.parametrize("suite", SUITES)
def test_round_trip_gives_sender_counter_and_body(suite: str) -> None:
    alice, bob = pair(suite)
    sealed = [alice.seal(PREFIX, f"hello {i}".encode()) for i in range(3)]
    opened = [bob.open(m, len(PREFIX)) for m in sealed]
    assert [o.body for o in opened] == [b"hello 0", b"hello 1", b"hello 2"]
    assert [o.counter for o in opened] == [0, 1, 2]
    assert {o.sender for o in opened} == {"alice"}
    assert all(m.startswith(PREFIX) for m in sealed)
    assert len(sealed[0]) == len(PREFIX) + len(b"hello 0") + overhead("alice")
    assert bob.stats.opened == 3 and bob.stats.rejected == 0


@pytest.mark.parametrize("suite", SUITES)
def test_confidentiality_only_under_aead_suites(suite: str) -> None:
    alice, _ = pair(suite)
    secret = b"the secret plan, long enough to look for"
    sealed = alice.seal(PREFIX, secret)
    assert (secret in sealed) is (suite == "hmac-sha256")
    assert alice.mode == ("authenticated" if suite == "hmac-sha256" else "encrypted")


@pytest.mark.parametrize("suite", SUITES)
@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=300), data=st.data())
def test_flipping_any_bit_is_refused(suite: str, body: bytes, data: st.DataObject) -> None:
    alice, bob = pair(suite)
    sealed = bytearray(alice.seal(PREFIX, body))
    bit = data.draw(st.integers(0, len(sealed) * 8 - 1))
    sealed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(AuthError):
        bob.open(bytes(sealed), len(PREFIX))
    assert bob.stats.opened == 0 and bob.stats.rejected == 1
    # The genuine message still passes afterwards: a forgery moved no window.
    assert bob.open(alice.seal(PREFIX, body), len(PREFIX)).body == body


@settings(max_examples=50, deadline=None)
@given(body=st.binary(max_size=100), cut=st.integers(0, 200))
def test_truncation_and_extension_are_refused(body: bytes, cut: int) -> None:
    alice, bob = pair()
    sealed = alice.seal(PREFIX, body)
    shorter = sealed[:min(cut, len(sealed) - 1)]
    for forged in (shorter, sealed + b"\x00"):
        with pytest.raises(DecodeError):
            bob.open(forged, len(PREFIX))


@pytest.mark.parametrize("suite", SUITES)
def test_wrong_key_or_group_does_not_verify(suite: str) -> None:
    config = AuthConfig(suite=suite)
    sealed = GroupAuth("g", KEY, "alice", config=config).seal(PREFIX, b"x")
    for receiver in (GroupAuth("g", OTHER_KEY, "bob", config=AuthConfig(suite=suite)),
                     GroupAuth("h", KEY, "bob", config=AuthConfig(suite=suite))):
        with pytest.raises(BadTagError):
            receiver.open(sealed, len(PREFIX))
        assert receiver.stats.bad_tag == 1


def test_a_suite_other_than_the_groups_is_refused() -> None:
    sealed = GroupAuth("g", KEY, "alice").seal(PREFIX, b"x")
    bob = GroupAuth("g", KEY, "bob", config=AuthConfig(suite="aes-256-gcm"))
    with pytest.raises(MalformedAuthError):
        bob.open(sealed, len(PREFIX))
    assert bob.stats.malformed == 1


def test_replay_is_refused_and_counted() -> None:
    alice, bob = pair()
    sealed = alice.seal(PREFIX, b"once")
    assert bob.open(sealed, len(PREFIX)).body == b"once"
    with pytest.raises(ReplayError):
        bob.open(sealed, len(PREFIX))
    assert bob.stats.replayed == 1 and bob.stats.opened == 1


def test_reordering_within_the_window_passes_older_is_stale() -> None:
    alice, bob = pair(replay_window=8)
    sealed = [alice.seal(PREFIX, bytes([i])) for i in range(20)]
    bob.open(sealed[19], len(PREFIX))
    # 12..18 are within the 8 counters up to 19: accepted once each, late and in any order.
    for i in (15, 12, 18, 13):
        assert bob.open(sealed[i], len(PREFIX)).body == bytes([i])
    with pytest.raises(StaleError):
        bob.open(sealed[11], len(PREFIX))
    with pytest.raises(ReplayError):
        bob.open(sealed[15], len(PREFIX))
    assert (bob.stats.stale, bob.stats.replayed) == (1, 1)


def test_lanes_have_windows_of_their_own() -> None:
    """An infrastructure host seals backbone frames in lane 0 and frames to members in
    lane 1: a member that reads a lane-1 frame late, after a burst of lane-0 frames the
    sender sealed in between, still takes it; a replay in its own lane is refused."""
    alice, bob = pair(replay_window=8)
    early = alice.seal(PREFIX, b"ack", lane=1)
    burst = [alice.seal(PREFIX, bytes([i])) for i in range(50)]   # lane 0, far past 8
    later = alice.seal(PREFIX, b"beacon", lane=1)
    assert bob.open(later, len(PREFIX)).body == b"beacon"
    assert bob.open(burst[-1], len(PREFIX)).body == bytes([49])
    assert bob.open(early, len(PREFIX)).body == b"ack"            # not stale: its lane
    with pytest.raises(ReplayError):
        bob.open(early, len(PREFIX))
    with pytest.raises(StaleError):                                # lane 0 is as before
        bob.open(burst[0], len(PREFIX))
    lane = bob.open(alice.seal(PREFIX, b"x", lane=1), len(PREFIX)).counter >> 60
    assert lane == 1


def test_a_lane_is_covered_by_the_tag() -> None:
    """Moving a frame to another lane (the counter's top bits) breaks its tag."""
    alice, bob = pair()
    sealed = bytearray(alice.seal(PREFIX, b"ack", lane=1))
    counter_at = len(PREFIX) + 4 + len(b"alice")
    sealed[counter_at] ^= 0x10   # lane 1 -> lane 0
    with pytest.raises(BadTagError):
        bob.open(bytes(sealed), len(PREFIX))
    with pytest.raises(ConfigError):
        alice.seal(PREFIX, b"", lane=8)


def test_key_rollover_by_key_id() -> None:
    old = GroupAuth("g", {0: KEY}, "alice")
    new = GroupAuth("g", {1: OTHER_KEY}, "alice", send_key_id=1, counter_start=100)
    both = GroupAuth("g", {0: KEY, 1: OTHER_KEY}, "bob")
    assert both.open(old.seal(PREFIX, b"a"), len(PREFIX)).key_id == 0
    assert both.open(new.seal(PREFIX, b"b"), len(PREFIX)).key_id == 1
    with pytest.raises(UnknownKeyError):
        GroupAuth("g", {0: KEY}, "carol").open(new.seal(PREFIX, b"c"), len(PREFIX))


def test_unauthenticated_message_is_counted() -> None:
    _, bob = pair()
    with pytest.raises(UnauthenticatedError):
        bob.unauthenticated()
    assert bob.stats.unauthenticated == 1 and bob.stats.rejected == 1


def test_restart_with_clock_counter_is_accepted_after_old_session() -> None:
    _, bob = pair()
    first = GroupAuth("g", KEY, "alice", counter_start=counter_start_at(1000.0))
    for _ in range(5):
        bob.open(first.seal(PREFIX, b"x"), len(PREFIX))
    restarted = GroupAuth("g", KEY, "alice", counter_start=counter_start_at(1001.0))
    assert bob.open(restarted.seal(PREFIX, b"y"), len(PREFIX)).body == b"y"


@pytest.mark.parametrize("bad", [
    {"keys": b"short"}, {"sender": ""}, {"sender": "x" * 65}, {"send_key_id": 3},
    {"config": AuthConfig(suite="rot13")}, {"config": AuthConfig(replay_window=0)},
    {"counter_start": -1},
])
def test_bad_settings_are_config_errors(bad: dict[str, object]) -> None:
    args: dict[str, object] = {"keys": KEY, "sender": "alice"}
    args.update(bad)
    with pytest.raises(ConfigError):
        GroupAuth("g", args.pop("keys"), args.pop("sender"), **args)  # type: ignore[arg-type]


def test_tag_is_sixteen_bytes_and_header_is_documented_layout() -> None:
    alice, _ = pair()
    sealed = alice.seal(PREFIX, b"body")
    header = sealed[len(PREFIX):]
    assert header[0] == 1 and header[1] == 1 and header[2] == 0 and header[3] == 5
    assert header[4:9] == b"alice"
    assert int.from_bytes(header[9:17], "big") == 0
    assert header[17:21] == b"body" and len(header) == 21 + TAG_SIZE


@settings(max_examples=50, deadline=None)
@given(key=st.binary(min_size=16, max_size=64), data=st.binary(max_size=2000))
def test_precomputed_hmac_is_rfc2104_hmac_sha256(key: bytes, data: bytes) -> None:
    import hmac

    from m2mc.security.auth import _Mac

    assert _Mac(key).tag(data) == hmac.digest(key, data, "sha256")[:TAG_SIZE]


def test_each_header_fault_is_named_and_counted() -> None:
    _, bob = pair()
    good = GroupAuth("g", KEY, "alice").seal(PREFIX, b"body")
    at = len(PREFIX)
    cases = {
        "too short": good[:at + 2],
        "version": good[:at] + b"\x09" + good[at + 1:],
        "suite": good[:at + 1] + b"\x03" + good[at + 2:],
        "truncated": good[:at + 3] + b"\x00" + good[at + 4:],
        "UTF-8": good[:at + 4] + b"\xff" + good[at + 5:],
    }
    for words, message in cases.items():
        with pytest.raises(MalformedAuthError, match=words):
            bob.open(message, at)
    with pytest.raises(UnknownKeyError):
        bob.open(good[:at + 2] + b"\x07" + good[at + 3:], at)
    assert (bob.stats.malformed, bob.stats.unknown_key, bob.stats.opened) == (5, 1, 0)
