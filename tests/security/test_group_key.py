"""GroupKey (a group's key source as the API takes it), GroupSecret (the resolved key
the group layer takes), the ``keyed`` flag of GrpInfo on the wire, and the rate-limit
settings of GroupConfig."""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from m2mc.errors import ConfigError, DecodeError
from m2mc.group.codec import (
    DISCOVERY_TAG,
    HEADER,
    MAGIC,
    VERSION,
    GrpInfo,
    GrpsInfo,
    Kind,
    MemberEntry,
    decode_body,
    encode,
    split_frame,
)
from m2mc.group.config import GroupConfig
from m2mc.security import GroupKey, GroupSecret, derive_passphrase_key, generate_key

RAW = bytes(range(32))


def test_each_source_resolves_to_the_same_kind_of_secret(tmp_path: Path) -> None:
    text = generate_key()
    path = tmp_path / "k"
    path.write_text(text)
    os.chmod(path, 0o600)
    from_text = GroupKey(key=text).resolve("g")
    assert from_text == GroupKey(key_file=path).resolve("g") == GroupKey(key_file=str(path)
                                                                       ).resolve("other")
    assert GroupKey(key=RAW).resolve("g") == GroupSecret(RAW)
    by_passphrase = GroupKey(passphrase="pw", suite="aes-256-gcm").resolve("g")
    assert by_passphrase == GroupSecret(derive_passphrase_key("pw", "g"), "aes-256-gcm")
    assert GroupKey(passphrase="pw").resolve("h").key != by_passphrase.key  # bound to the gid


def test_secrets_never_show_in_repr() -> None:
    key = GroupKey(passphrase="hunter2")
    secret = GroupKey(key=RAW).resolve("g")
    assert "hunter2" not in repr(key) and RAW.hex() not in repr(secret)
    assert str(RAW) not in repr(secret)


@pytest.mark.parametrize("kwargs", [
    {}, {"key": "hex:" + "00" * 32, "passphrase": "x"}, {"key": "hex:00"}, {"key": b"short"},
    {"passphrase": "x", "suite": "rot13"}, {"key": 42},
])
def test_bad_key_sources_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        GroupKey(**kwargs)  # type: ignore[arg-type]


def test_of_builds_from_api_arguments() -> None:
    assert GroupKey.of() is None
    key = GroupKey(passphrase="x")
    assert GroupKey.of(key) is key
    assert GroupKey.of(passphrase="x", suite="chacha20-poly1305") == GroupKey(
        passphrase="x", suite="chacha20-poly1305")
    with pytest.raises(ConfigError):
        GroupKey.of(key, suite="aes-256-gcm")
    with pytest.raises(ConfigError):
        GroupKey.of(suite="aes-256-gcm")


def test_group_secret_is_checked() -> None:
    for bad in ({"key": b"x" * 15}, {"key": RAW, "suite": "none"}, {"key": RAW, "key_id": 256}):
        with pytest.raises(ConfigError):
            GroupSecret(**bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------- GrpInfo.keyed on the wire
def test_open_group_entries_are_unchanged_and_old_entries_decode_as_open() -> None:
    info = GrpInfo("g", "d", "sb", (MemberEntry("a", 1, True),))
    frame = encode(DISCOVERY_TAG, GrpsInfo("a", (info,)))
    assert frame[13:] == msgpack.packb(["a", [["g", "d", "sb", [["a", 1, True]]]]])
    (decoded,) = _decode(frame).groups  # type: ignore[union-attr]
    assert decoded == info and decoded.keyed is False
    keyed = GrpInfo("g", "d", "sb", (), keyed=True)
    keyed_frame = encode(DISCOVERY_TAG, GrpsInfo("a", (keyed,)))
    assert keyed_frame[13:] == msgpack.packb(["a", [["g", "d", "sb", [], True]]])
    assert _decode(keyed_frame).groups == (keyed,)  # type: ignore[union-attr]


def test_a_bad_keyed_flag_is_a_decode_error() -> None:
    for flag in (1, "yes", None):
        body = msgpack.packb(["a", [["g", "d", "sb", [], flag]]])
        with pytest.raises(DecodeError):
            decode_body(Kind.GRPS_INFO, body)
    explicit_false = msgpack.packb(["a", [["g", "d", "sb", [], False]]])
    assert not decode_body(Kind.GRPS_INFO, explicit_false).groups[0].keyed  # type: ignore[union-attr]


@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.text(max_size=20),
                          st.sampled_from(["sb", "causal", "fifo", "total"]), st.booleans()),
                max_size=5))
def test_grps_info_round_trips_with_the_keyed_flag(
        groups: list[tuple[str, str, str, bool]]) -> None:
    message = GrpsInfo("a", tuple(GrpInfo(g, d, o, (), k) for g, d, o, k in groups))
    assert _decode(encode(DISCOVERY_TAG, message)) == message


def test_split_frame_refuses_sealed_frames() -> None:
    with pytest.raises(DecodeError, match="sealed"):
        split_frame(HEADER.pack(MAGIC, VERSION, bytes(8), Kind.ADV, 1) + b"\x91\xa1a")


def _decode(frame: bytes) -> object:
    f = split_frame(frame)
    return decode_body(f.kind, f.body)


# ---------------------------------------------------------------- settings
def test_rate_limit_settings_are_validated() -> None:
    config = GroupConfig.from_mapping({"control_rate": 5, "control_burst": 10.5,
                                       "replay_window": 64})
    assert (config.control_rate, config.control_burst, config.replay_window) == (5.0, 10.5, 64)
    for name in ("control_rate", "control_burst", "control_total_rate", "control_total_burst",
                 "replay_window"):
        with pytest.raises(ConfigError, match=name):
            GroupConfig.from_mapping({name: 0})
