"""Interfaces by name (``iface=lo``, ``--iface lo``): resolution, one-line errors, and real
loopback multicast between processes. Only loopback is ever used here; the same on a
real interface, with one that is down or changes address, is tests/netns/test_iface.py."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from m2mc.cli import main
from m2mc.demo.tour import Child, random_multicast_url
from m2mc.errors import ConfigError
from m2mc.transport import iface as iface_module
from m2mc.transport.iface import (
    check_interface,
    describe_interfaces,
    interface_address,
    interface_names,
    resolve_interface,
)
from m2mc.transport.url import channel_on_iface, open_channel

Spawn = Callable[..., Child]
WAIT = 30.0
LOOPBACK = "lo" if sys.platform.startswith("linux") else "lo0"
needs_names = pytest.mark.skipif(not hasattr(socket, "if_nametoindex")
                                 or LOOPBACK not in interface_names(),
                                 reason="no loopback interface found by name here")
pytestmark = needs_names


def unknown_name() -> str:
    names = set(interface_names())
    return next(f"nosuch{i}" for i in range(100) if f"nosuch{i}" not in names)


def test_a_name_resolves_to_its_index_and_address() -> None:
    lo = resolve_interface(LOOPBACK)
    assert lo.address == "127.0.0.1" and lo.problem == ""
    assert lo.index == (socket.if_nametoindex(LOOPBACK) if iface_module.BY_INDEX else 0)
    assert interface_address(LOOPBACK) == "127.0.0.1"
    assert resolve_interface("127.0.0.1").index == 0  # an address is used as it is
    assert f"{LOOPBACK} 127.0.0.1" in describe_interfaces()
    assert check_interface(LOOPBACK) == LOOPBACK


def test_an_unknown_name_is_one_line_listing_every_interface() -> None:
    name = unknown_name()
    for call in (check_interface, resolve_interface, interface_address):
        with pytest.raises(ConfigError) as caught:
            call(name)
        message = str(caught.value)
        assert message.startswith(f"no network interface {name!r} here; interfaces: ")
        assert "\n" not in message
        assert all(known in message for known in interface_names())


def test_opening_a_channel_on_an_unknown_name_names_the_url_and_the_interfaces() -> None:
    url = channel_on_iface(random_multicast_url(random.Random()), unknown_name())

    async def run() -> None:
        await open_channel(url).start()

    with pytest.raises(ConfigError) as caught:
        asyncio.run(run())
    assert str(caught.value).startswith(f"cannot open {url}: no network interface")
    assert f"{LOOPBACK} 127.0.0.1" in str(caught.value)


def test_an_address_no_interface_has_lists_the_interfaces() -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737); the join fails locally, nothing is sent.
    url = channel_on_iface(random_multicast_url(random.Random()), "192.0.2.254")
    if "192.0.2.254" in describe_interfaces():
        pytest.skip("this machine has 192.0.2.254")

    async def run() -> None:
        await open_channel(url).start()

    with pytest.raises(ConfigError, match=r"no interface has that address; interfaces: .*lo"):
        asyncio.run(run())


@pytest.mark.parametrize("by_index", [True, False])
def test_two_channels_on_lo_by_name_exchange_datagrams(
        by_index: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """By index (ip_mreqn, Linux) and by the name's address (elsewhere): both work on lo."""
    if by_index and not iface_module.BY_INDEX:
        pytest.skip("joining by interface index is Linux only")
    monkeypatch.setattr(iface_module, "BY_INDEX", by_index)
    url = channel_on_iface(random_multicast_url(random.Random()), LOOPBACK)

    async def run() -> list[bytes]:
        a, b = open_channel(url), open_channel(url)
        await a.start()
        await b.start()
        try:
            await a.send(b"over lo by name")
            got = await asyncio.wait_for(b.recv(), WAIT)
            return [got]
        finally:
            await a.close()
            await b.close()

    assert asyncio.run(run()) == [b"over lo by name"]


@pytest.mark.multiprocess
def test_send_and_listen_processes_talk_over_iface_lo(m2mc: Spawn, mcast_url: str) -> None:
    named = channel_on_iface(mcast_url, LOOPBACK)
    listener = m2mc("listen", "--channel", mcast_url, "--iface", LOOPBACK, "--count", "1",
                    "--timeout", str(WAIT))
    assert f"listening on {named}" in listener.wait_stderr("listening on", WAIT)
    sender = m2mc("send", "--channel", named, stdin=b"hello by name")
    assert sender.finish(WAIT) == 0, sender.stderr
    assert listener.finish(WAIT) == 0, listener.stderr
    [row] = listener.json_lines()
    assert row["id"] == json.loads(sender.stdout[-1])["id"]
    assert bytes.fromhex(row["head"]) == b"hello by name"


@pytest.mark.multiprocess
def test_the_daemon_takes_iface_for_its_external_channel(m2mc: Spawn, mcast_url: str) -> None:
    daemon = m2mc("daemon", "--port", "0", "--channel", mcast_url, "--iface", LOOPBACK)
    line = daemon.wait_stderr("listening on", WAIT)
    assert line.endswith(f"external channel {channel_on_iface(mcast_url, LOOPBACK)}")


@pytest.mark.multiprocess
def test_host_takes_iface_for_its_cell_and_binds_its_uplink_there(
        m2mc: Spawn, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free backbone port on loopback
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cell = random_multicast_url(random.Random())
    host = m2mc("host", "--listen", f"127.0.0.2:{port}", "--cell", cell, "--iface", LOOPBACK,
                "--run-for", "0.5")
    line = host.wait_stderr(" up, ", WAIT)
    assert f"cell {channel_on_iface(cell, LOOPBACK)}," in line
    assert ", uplink 127.0.0.1:" in line  # lo's address, not the backbone's 127.0.0.2
    assert host.finish(WAIT) == 0, host.stderr


def _chat_args(tmp_path: Path) -> list[str]:
    (tmp_path / "s.txt").write_text("create g\n")
    return ["chat", "--nick", "a", "--data-dir", str(tmp_path / "d"), "--script",
            str(tmp_path / "s.txt")]


@pytest.mark.parametrize("command", ["send", "listen", "daemon", "host", "chat"])
def test_an_unknown_iface_is_one_line_exit_2_listing_the_interfaces(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    name = unknown_name()
    argv = {"host": ["host", "--listen", "127.0.0.1:1", "--cell",
                     "udp-multicast://239.255.20.1:7711"],
            "chat": _chat_args(tmp_path)}.get(command, [command])
    with pytest.raises(SystemExit) as caught:
        main([*argv, "--iface", name])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"m2mc {command}: error: argument --iface: no network interface "
                          f"{name!r} here; interfaces: ")
    assert all(known in err for known in interface_names())
    assert not (tmp_path / "d").exists()  # the chat saved nothing


@pytest.mark.parametrize(("argv", "error"), [
    (["send", "--iface", "eth 0"], "neither an IPv4 address nor an interface name"),
    (["listen", "--iface", "x" * 16], "too long for an interface name"),
    (["daemon", "--iface", "fe80::1"], "IPv6 address; m2mc channels are IPv4 only"),
    (["host", "--iface", "300.1.2.3"], "iface must be an IPv4 address"),
    (["chat", "--iface", ""], "iface is empty"),
])
def test_a_misspelt_iface_is_one_line_exit_2(argv: list[str], error: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and error in err


@pytest.mark.parametrize(("argv", "error"), [
    (["send", "--channel", "null://"], "--iface applies to a udp-multicast:// channel; "
                                       "m2mp.channel is null://"),
    (["listen", "--channel", "daemon://127.0.0.1:5678"], "m2mp.channel is daemon://"),
    (["daemon", "--channel", "udp://127.0.0.1:9"], "daemon.channel is udp://"),
    (["chat", "--demo"], "--iface is for the network, not --demo"),
])
def test_iface_on_a_channel_that_is_not_multicast_is_one_line_exit_2(
        argv: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main([*argv, "--iface", LOOPBACK]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and error in err, err


def test_chat_iface_replaces_the_iface_of_the_channel_it_would_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default channel, --channel, chat.toml's channel, and --infra cells alike."""
    import m2mc.cli.chat as chat_cli
    from m2mc_chat.config import ChatConfig

    seen: list[ChatConfig] = []

    def headless(config: ChatConfig, args: object, save: bool) -> int:
        seen.append(config)
        return 0

    monkeypatch.setattr(chat_cli, "_run_headless", headless)
    base = _chat_args(tmp_path)
    assert main([*base, "--iface", LOOPBACK]) == 0
    assert main([*base, "--iface", LOOPBACK, "--channel",
                 "udp-multicast://239.255.9.9:4000?iface=127.0.0.1&ttl=0"]) == 0
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "chat.toml").write_text(
        'channel = "udp-multicast://239.255.8.8:4001?iface=127.0.0.1&ttl=1"\n')
    assert main([*base, "--iface", LOOPBACK]) == 0
    infra = "239.255.20.1:7711,239.255.20.2:7712"
    assert main([*base, "--iface", LOOPBACK, "--infra", infra]) == 0
    assert [c.channel for c in seen[:3]] == [
        f"udp-multicast://239.255.77.77:7777?iface={LOOPBACK}&ttl=1",
        f"udp-multicast://239.255.9.9:4000?iface={LOOPBACK}&ttl=0",
        f"udp-multicast://239.255.8.8:4001?iface={LOOPBACK}&ttl=1"]
    assert seen[3].infra == (
        f"udp-multicast://239.255.20.1:7711?iface={LOOPBACK}&ttl=1",
        f"udp-multicast://239.255.20.2:7712?iface={LOOPBACK}&ttl=1")


@pytest.mark.parametrize("command", ["send", "listen", "daemon", "host", "chat"])
def test_every_help_shows_iface(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--iface NAME network interface, by name (eth0, wlan0;" in out
