"""Metrics of real ``m2mc daemon`` and ``m2mc host`` processes, scraped over HTTP on
loopback: what a local process sent through the daemon, the master three hosts
elect and the election after the master is killed; and the flags: a bad
``--metrics`` or a port in use is one line on stderr and exit status 2."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scrape import Scrape, scrape, scrape_until, unexported

from m2mc.cli import main
from m2mc.demo.tour import Child, daemon_port
from m2mc.metrics import catalogue as cat
from m2mc.transport.url import open_channel
from m2mc.wire.packet import fragments

BASE = 14000 + (os.getpid() % 400) * 8
CELLS = [f"udp-multicast://239.255.{80 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(3)]
BACKBONE = [f"127.0.0.1:{BASE + 4 + i}" for i in range(3)]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Children without the user's config files or M2MC_* variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    clean.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"))
    return clean


@pytest.fixture
def spawn(env: dict[str, str], tmp_path: Path) -> Iterator[object]:
    children: list[Child] = []

    def start(*args: str) -> Child:
        child = Child(args, env=env, cwd=tmp_path)
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            child.kill()


def metrics_address(child: Child) -> str:
    """The ADDR:PORT of ``... metrics on http://ADDR:PORT/metrics`` on stderr."""
    line = child.wait_stderr("metrics on http://", 60)
    return line.split("http://", 1)[1].split("/", 1)[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# ------------------------------------------------------------------ the daemon
@pytest.mark.multiprocess
async def test_daemon_counts_what_a_local_process_sends(spawn: object) -> None:
    daemon = spawn("daemon", "--port", "0", "--channel", "null://",  # type: ignore[operator]
                   "--metrics", "127.0.0.1:0")
    port = daemon_port(daemon, 60)
    address = metrics_address(daemon)
    local = open_channel(f"daemon://127.0.0.1:{port}")
    await local.start()
    try:
        rng = random.Random(3)
        for _ in range(3):
            for datagram in fragments(rng.getrandbits(32), b"through the daemon"):
                await local.send(datagram)
        got = await asyncio.to_thread(
            scrape_until, address,
            lambda g: g.value("m2mc_daemon_from_clients_total") == 3, "3 datagrams counted")
    finally:
        await local.close()
    assert got.value("m2mc_channel_datagrams_out_total") == 3  # on to the external channel
    assert got.value("m2mc_queue_depth", queue="clients", group="") == 1
    assert got.value("m2mc_queue_limit", queue="clients", group="") == 64
    assert got.value("m2mc_daemon_clients_connected_total") == 1
    assert got.value("m2mc_daemon_malformed_total") == 0
    assert got.value("m2mc_node_info", mode="daemon") == 1
    assert unexported(got, "daemon", (cat.ROUTER, cat.DAEMON, cat.CHANNEL)) == []
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.finish(30) == 0


# ------------------------------------------------------------------ the hosts
def _host(spawn: object, i: int) -> Child:
    return spawn("host", "--id", f"H{i}", "--listen", BACKBONE[i],  # type: ignore[operator,no-any-return]
                 "--peer", ",".join(b for j, b in enumerate(BACKBONE) if j != i),
                 "--cell", CELLS[i], "--metrics", "127.0.0.1:0")


def _agreed(scrapes: list[Scrape]) -> str | None:
    """The master every host names, if they all name one and exactly one is it."""
    masters = set()
    for got in scrapes:
        if not got.series("m2mc_host_master") or got.value("m2mc_host_has_master") != 1:
            return None
        masters |= got.label_values("m2mc_host_master", "master")
    if len(masters) != 1 or sum(g.value("m2mc_host_is_master") for g in scrapes) != 1:
        return None
    return masters.pop()


def _until_agreed(addresses: list[str], timeout: float = 60.0) -> tuple[str, list[Scrape]]:
    first = addresses[0]
    others = addresses[1:]
    result: dict[str, object] = {}

    def agreed(got: Scrape) -> bool:
        scrapes = [got, *(scrape(a) for a in others)]
        master = _agreed(scrapes)
        result.update(master=master, scrapes=scrapes)
        return master is not None

    scrape_until(first, agreed, "the hosts to agree on one master", timeout)
    return str(result["master"]), result["scrapes"]  # type: ignore[return-value]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_hosts_report_the_master_and_a_new_election_after_it_is_killed(
        spawn: object) -> None:
    hosts = [_host(spawn, i) for i in range(3)]
    addresses = [metrics_address(h) for h in hosts]
    master, scrapes = _until_agreed(addresses)
    assert master in {"H0", "H1", "H2"}
    for got in scrapes:
        assert got.value("m2mc_host_elections_total") >= 1
        assert got.value("m2mc_host_epoch") >= 1
        assert got.value("m2mc_node_info", mode="host") == 1
    on_master = scrapes[int(master[1])]
    assert unexported(on_master, "host", (cat.HOST, cat.GATEWAY, cat.COORDINATOR, cat.WIRE,
                                          cat.RATE_LIMIT)) == [
        name for name in cat.CATALOGUE if name.startswith("m2mc_auth_")
        and name != "m2mc_auth_failures_total"]  # unkeyed: no key counters
    epoch = on_master.value("m2mc_host_epoch")

    dead = int(master[1])
    hosts[dead].kill()  # kill -9: no goodbye
    survivors = [a for i, a in enumerate(addresses) if i != dead]
    before = {a: g.value("m2mc_host_elections_total")
              for a, g in zip(addresses, scrapes, strict=True) if a in survivors}
    new_master, after = _until_agreed(survivors)
    assert new_master != master
    for address, got in zip(survivors, after, strict=True):
        assert got.value("m2mc_host_elections_total") > before[address]
        assert got.value("m2mc_host_epoch") > epoch
    scrape_until(survivors[0], lambda g: g.value("m2mc_host_hosts_live") == 2,
                 "the dead host to leave the directory")
    for i, host in enumerate(hosts):
        if i != dead:
            host.proc.send_signal(signal.SIGTERM)
            assert host.finish(30) == 0


# ------------------------------------------------------------------ flags
@pytest.mark.parametrize("argv", [
    ["host", "--listen", "127.0.0.1:1", "--cell", CELLS[0], "--metrics", "9464"],
    ["host", "--listen", "127.0.0.1:1", "--cell", CELLS[0], "--metrics", "127.0.0.1:99999"],
    ["daemon", "--metrics", "nowhere"],
    ["daemon", "--metrics", "::1:9464"],
    ["chat", "--metrics", "127.0.0.1"],
])
def test_a_bad_metrics_flag_is_one_line_and_status_2(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--metrics" in err


def test_without_prometheus_client_metrics_are_one_line_and_status_2(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "m2mc.metrics.server", raising=False)
    assert main(["daemon", "--port", "0", "--channel", "null://",
                 "--metrics", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'm2mc[metrics]'" in err


def test_chat_demo_has_no_metrics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["chat", "--demo", "--data-dir", str(tmp_path), "--nick", "a",
                 "--metrics", "127.0.0.1:0"]) == 2
    assert "--metrics needs the network" in capsys.readouterr().err


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "m2mc.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.multiprocess
def test_a_port_in_use_stops_host_daemon_and_chat_with_one_line(
        taken_port: int, env: dict[str, str], tmp_path: Path) -> None:
    taken = f"127.0.0.1:{taken_port}"
    script = tmp_path / "steps.txt"
    script.write_text("create room\n")
    runs = {
        "host": ["host", "--listen", BACKBONE[0], "--cell", CELLS[0], "--metrics", taken],
        "daemon": ["daemon", "--port", "0", "--channel", "null://", "--metrics", taken],
        "chat": ["chat", "--nick", "a", "--channel", "mem://x", "--data-dir",
                 str(tmp_path / "chat"), "--script", str(script), "--metrics", taken],
    }
    for command, args in runs.items():
        done = _run(args, env, tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.count("\n") == 1, (command, done.stderr)
        assert f"{taken}: cannot listen" in done.stderr and "Traceback" not in done.stderr


def test_metrics_in_config_files_are_checked(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "host.toml").write_text(f'[host]\nlisten = "{BACKBONE[0]}"\n'
                                        f'cell = "{CELLS[0]}"\nmetrics = 9464\n')
    done = _run(["host", "--config", str(tmp_path / "host.toml")], env, tmp_path)
    assert done.returncode == 2 and "host.metrics" in done.stderr
    (tmp_path / "m2mc.toml").write_text('[daemon]\nmetrics = "no port"\n')
    done = _run(["daemon", "--port", "0", "--channel", "null://"], env, tmp_path)
    assert done.returncode == 2 and "daemon.metrics" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
