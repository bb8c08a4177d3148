"""Keyed groups through the asyncio API (mem:// channel): key parameters,
Group.authenticated, discovery of keyed groups, the typed error without a key,
and keys given in NodeConfig for groups reloaded from data_dir."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from m2mc.api import GroupKey, Node, NodeConfig
from m2mc.errors import ConfigError
from m2mc.security import KeyRequiredError, generate_key


def _channel() -> str:
    return f"mem://keyed-{uuid.uuid4().hex[:8]}"


async def test_passphrase_group_exchanges_and_reports_authenticated() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="alice", channel=channel)) as alice, \
            Node(NodeConfig(pid="bob", channel=channel)) as bob:
        team = await alice.create_group("team", passphrase="correct horse battery staple")
        assert team.authenticated and team.info is not None and team.info.keyed
        joined = await bob.join(team.gid, passphrase="correct horse battery staple")
        assert joined.authenticated
        await team.send("sealed hello")
        got = await joined.receive(timeout=5.0)
        assert (got.sender, got.text) == ("alice", "sealed hello")
        await joined.send("sealed reply", reply_to=got)
        assert [m.text for m in [await team.receive(timeout=5.0) for _ in range(2)]] == [
            "sealed hello", "sealed reply"]
        assert alice.stats()["auth_failed"] == 0
        plain = await alice.create_group("open")
        assert not plain.authenticated and plain.info is not None and not plain.info.keyed


async def test_keyless_node_sees_the_group_as_keyed_and_cannot_join() -> None:
    channel = _channel()
    key = generate_key()
    async with Node(NodeConfig(pid="alice", channel=channel)) as alice, \
            Node(NodeConfig(pid="carol", channel=channel)) as carol:
        team = await alice.create_group("team", key=key, suite="aes-256-gcm")
        infos = await carol.discover(team.gid, timeout=5.0)
        (info,) = [i for i in infos if i.gid == team.gid]
        assert info.keyed and info.desc == "team"
        with pytest.raises(KeyRequiredError):
            await carol.join(team.gid)
        group = await carol.join(team.gid, key=GroupKey(key=key, suite="aes-256-gcm"))
        await team.send("welcome")
        assert (await group.receive(timeout=5.0)).text == "welcome"


async def test_a_wrong_passphrase_hears_nothing_and_is_counted() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="alice", channel=channel)) as alice, \
            Node(NodeConfig(pid="dave", channel=channel)) as dave:
        team = await alice.create_group("team", passphrase="right one")
        wrong = await dave.join(team.gid, passphrase="wrong one")
        await team.send("not for dave")
        with pytest.raises(TimeoutError):
            await wrong.receive(timeout=1.0)
        assert alice.stats()["auth_failed"] > 0  # dave's join and sync request, refused
        assert dave.stats()["auth_failed"] > 0
        assert "dave" not in team.members


async def test_key_arguments_are_checked() -> None:
    async with Node(NodeConfig(pid="alice", channel=_channel())) as alice:
        with pytest.raises(ConfigError):
            await alice.create_group("x", key="hex:00", passphrase="both")
        with pytest.raises(ConfigError):
            await alice.create_group("x", key="hex:0011")  # too short
        with pytest.raises(ConfigError):
            await alice.create_group("x", passphrase="p", suite="rot13")
        with pytest.raises(ConfigError):
            await alice.create_group("x", suite="aes-256-gcm")  # a suite without a key


async def test_key_file_group_survives_a_restart_only_with_its_key(tmp_path: Path) -> None:
    channel = _channel()
    key_file = tmp_path / "team.key"
    key_file.write_text(generate_key())
    os.chmod(key_file, 0o600)
    data = tmp_path / "alice"
    async with Node(NodeConfig(pid="bob", channel=channel)) as bob:
        async with Node(NodeConfig(pid="alice", channel=channel, data_dir=data)) as alice:
            team = await alice.create_group("team", key_file=key_file)
            gid = team.gid
            joined = await bob.join(gid, key_file=str(key_file))
            await team.send("before the restart")
            assert (await joined.receive(timeout=5.0)).text == "before the restart"
        async with Node(NodeConfig(pid="alice", channel=channel, data_dir=data)) as alice:
            assert alice.joined() == []  # keyed in the log, no key given: kept closed
            with pytest.raises(KeyRequiredError):
                await alice.join(gid)
        keys = {gid: GroupKey(key_file=key_file)}
        async with Node(NodeConfig(pid="alice", channel=channel, data_dir=data,
                                   keys=keys)) as alice:
            team = alice.group(gid)
            assert team.authenticated
            await team.send("after the restart")
            texts = {(await joined.receive(timeout=5.0)).text}
            assert texts == {"after the restart"}
