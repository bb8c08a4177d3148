"""Presence, the chat payload, configuration and remembered UI state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from m2mc.errors import ConfigError, DecodeError, UsageError
from m2mc_chat.codec import MAX_TEXT, decode_body, encode_body
from m2mc_chat.config import load_config, save_config
from m2mc_chat.presence import MemberState, PresenceTable, sync_status
from m2mc_chat.state import GroupUiState, UiStateStore


def test_presence_joined_left_and_not_heard_from() -> None:
    table = PresenceTable("me", silent_after=30)
    table.joined("me", 0)
    table.set_members(["bob", "carol"], ["dave"])
    table.heard("bob", 100, "Bob")
    assert table.state("bob", 110) is MemberState.JOINED
    assert table.state("bob", 131) is MemberState.SILENT
    assert table.state("carol", 110) is MemberState.SILENT   # never heard
    assert table.state("dave", 110) is MemberState.LEFT
    assert table.state("me", 10_000) is MemberState.JOINED   # we always hear ourselves
    rows = table.members(110)
    assert [(m.nick, m.state) for m in rows] == [
        ("me", MemberState.JOINED), ("Bob", MemberState.JOINED),
        ("carol", MemberState.SILENT), ("dave", MemberState.LEFT)]
    table.left("bob")
    assert table.state("bob", 110) is MemberState.LEFT
    table.joined("bob", 120)
    assert table.state("bob", 125) is MemberState.JOINED


def test_presence_bound_forgets_members_who_left_first() -> None:
    table = PresenceTable("me", max_members=3)
    table.joined("me", 0)
    table.heard("a", 5)
    table.left("a")
    table.heard("b", 1)
    table.heard("c", 9)       # over the bound: "a" (left) goes
    assert "a" not in table and {"b", "c", "me"} <= {m.pid for m in table.members(9)}
    table.heard("d", 10)      # nobody left: the longest silent ("b") goes
    assert "b" not in table and "me" in table


@pytest.mark.parametrize(("pending", "text"), [
    (0, ""), (1, "synchronizing 1 message"), (1234, "synchronizing 1,234 messages")])
def test_sync_status(pending: int, text: str) -> None:
    assert sync_status(pending) == text


def test_body_round_trip_and_bad_bodies() -> None:
    body = decode_body(encode_body("ålice", "héllo ☕", 12.5))
    assert (body.nick, body.text, body.ts) == ("ålice", "héllo ☕", 12.5)
    for bad in [b"\xff", b"[]", b'{"nick": 1, "text": "x"}', b'{"nick": "a"}',
                b'{"nick": "a", "text": "x", "ts": "now"}', b'{"nick":"a","text":"x","ts":NaN}',
                json.dumps({"nick": "a", "text": "x" * (MAX_TEXT + 1)}).encode()]:
        with pytest.raises(DecodeError):
            decode_body(bad)
    with pytest.raises(UsageError):
        encode_body("alice", "   ", 0)
    with pytest.raises(UsageError):
        encode_body("", "hi", 0)
    with pytest.raises(UsageError):
        encode_body("alice", "x" * (MAX_TEXT + 1), 0)


def test_config_flags_over_file_and_device_id_kept(tmp_path: Path) -> None:
    first = load_config(tmp_path)
    assert first.nick is None and first.device_id
    save_config(first.with_nick("Zoë 🚀"))
    again = load_config(tmp_path)
    assert (again.nick, again.device_id) == ("Zoë 🚀", first.device_id)
    flagged = load_config(tmp_path, nick="bob", device_id="laptop-2")
    assert (flagged.nick, flagged.device_id) == ("bob", "laptop-2")


def test_config_errors_name_the_culprit(tmp_path: Path) -> None:
    (tmp_path / "chat.toml").write_text("nick = [1]\n")
    with pytest.raises(ConfigError, match=r"chat\.toml: nick must be a string"):
        load_config(tmp_path)
    (tmp_path / "chat.toml").write_text("nick = \n")
    with pytest.raises(ConfigError, match=r"chat\.toml"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="device id"):
        load_config(tmp_path / "other", device_id="has space")
    with pytest.raises(ConfigError, match=r"^--nick: the nick must not be empty$"):
        load_config(tmp_path / "other", nick="  ")
    with pytest.raises(ConfigError, match=r"^--channel: bad channel URL 'mem://a b'"):
        load_config(tmp_path / "other", channel="mem://a b")
    (tmp_path / "chat.toml").write_text('channel = "daemon://10.0.0.1:5678"\n')
    with pytest.raises(ConfigError, match=r"chat\.toml: channel: bad channel URL"):
        load_config(tmp_path)
    assert load_config(tmp_path, channel="mem://ok").channel == "mem://ok"  # the flag wins


def test_ui_state_round_trip_and_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "chat_state.json"
    store = UiStateStore(path)
    store.put("g/1", GroupUiState(unread=frozenset({"a:2"}), collapsed=frozenset({"a:1"})))
    store.save()
    assert UiStateStore(path).get("g/1").collapsed == {"a:1"}
    path.write_text("{not json")
    damaged = UiStateStore(path)
    assert damaged.recovered_from_damage
    assert damaged.get("g/1") == GroupUiState()
    assert (tmp_path / "chat_state.json.bad").exists()


def test_group_keys_from_flags_and_file_never_save_a_passphrase(tmp_path: Path) -> None:
    from m2mc.security.keys import GroupKey

    (tmp_path / "chat.toml").write_text(
        'nick = "a"\n[keys]\n"team" = "~/team.key"\n'
        '"ops" = { key_file = "/k/ops.key", suite = "aes-256-gcm" }\n')
    config = load_config(tmp_path, key_passphrases=["lunch=open sesame", "team=override"],
                         key_files=["g/1=/k/g.key"], key_suite="chacha20-poly1305")
    assert config.keys["lunch"] == GroupKey(passphrase="open sesame", suite="chacha20-poly1305")
    assert config.keys["team"].passphrase == "override"          # a flag over the file
    assert config.keys["ops"] == GroupKey(key_file=Path("/k/ops.key"), suite="aes-256-gcm")
    assert config.keys["g/1"].key_file == Path("/k/g.key")
    assert "open sesame" not in repr(config)
    save_config(config)
    saved = (tmp_path / "chat.toml").read_text()
    assert "sesame" not in saved and "override" not in saved and "g.key" not in saved
    again = load_config(tmp_path)
    assert again.keys["team"].key_file == Path("~/team.key").expanduser()
    assert set(again.keys) == {"team", "ops"}


@pytest.mark.parametrize(("toml", "flags", "error"), [
    ('[keys]\n"team" = { passphrase = "x" }\n', {}, r"keys\.team: secrets are not kept"),
    ('[keys]\n"team" = { key = "hex:00" }\n', {}, r"keys\.team: secrets are not kept"),
    ('[keys]\n"team" = 3\n', {}, r"keys\.team: give a key file"),
    ('[keys]\n"team" = { key_file = "f", suite = "rot13" }\n', {}, r"unknown auth suite"),
    ('keys = "x"\n', {}, r"keys must be a table"),
    ("", {"key_passphrases": ["no-equals-sign"]}, r"^--key-passphrase: use GROUP=VALUE"),
    ("", {"key_files": ["=f"]}, r"^--key-file: use GROUP=VALUE"),
    ("", {"key_suite": "rot13"}, r"^--key-suite: unknown auth suite"),
])
def test_bad_group_keys_name_the_culprit(tmp_path: Path, toml: str, flags: dict[str, object],
                                         error: str) -> None:
    (tmp_path / "chat.toml").write_text(toml)
    with pytest.raises(ConfigError, match=error):
        load_config(tmp_path, **flags)  # type: ignore[arg-type]
