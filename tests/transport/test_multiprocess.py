"""Real processes over real loopback multicast and through the real daemon."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from m2mc.demo.tour import Child, daemon_port, random_multicast_url

Spawn = Callable[..., Child]

pytestmark = pytest.mark.multiprocess
WAIT = 30.0  # generous deadline for any one step; tests finish in about a second
PEER = str(Path(__file__).with_name("peer.py"))


def test_send_reaches_several_listeners_and_filters_apply(m2mc: Spawn, mcast_url: str) -> None:
    rng = random.Random(5)
    messages = [b"status: ok", rng.randbytes(64 * 1024), b"status: " + rng.randbytes(900), b""]
    status = [m for m in messages if m.startswith(b"status")]
    everything = [m2mc("listen", "--channel", mcast_url, "--count", str(len(messages)),
                       "--timeout", str(WAIT)) for _ in range(2)]
    filtered = m2mc("listen", "--channel", mcast_url, "--prefix", b"status".hex(),
                    "--prefix", b"nothing".hex(), "--count", str(len(status)),
                    "--timeout", str(WAIT))
    for child in [*everything, filtered]:
        child.wait_stderr("listening on", WAIT)
    sent = []
    for message in messages:
        sender = m2mc("send", "--channel", mcast_url, stdin=message)
        assert sender.finish(WAIT) == 0
        sent.append(json.loads(sender.stdout[-1]))
    for listener in everything:
        assert listener.finish(WAIT) == 0
        rows = listener.json_lines()
        assert [(r["id"], r["len"], r["sha256"]) for r in rows] == [
            (s["id"], s["len"], s["sha256"]) for s in sent]
        assert [r["head"] for r in rows] == [m[:16].hex() for m in messages]
        assert all(r["sha256"] == hashlib.sha256(m).hexdigest()
                   for r, m in zip(rows, messages, strict=True))
    assert filtered.finish(WAIT) == 0
    assert [r["head"] for r in filtered.json_lines()] == [m[:16].hex() for m in status]


def test_listen_exits_1_when_fewer_messages_than_count_arrive(m2mc: Spawn, mcast_url: str) -> None:
    # The silence timeout also runs before the first message: it must outlast the start
    # of the sender process on a loaded machine (0.5 s did not, at load 8 to 17).
    listener = m2mc("listen", "--channel", mcast_url, "--count", "2", "--timeout", "8")
    listener.wait_stderr("listening on", WAIT)
    assert m2mc("send", "--channel", mcast_url, stdin=b"only one").finish(WAIT) == 0
    assert listener.finish(WAIT) == 1
    assert len(listener.json_lines()) == 1


def test_daemon_with_three_local_processes_and_the_network(m2mc: Spawn, tmp_path: Path) -> None:
    network = random_multicast_url(random.Random())
    daemon = m2mc("daemon", "--port", "0", "--channel", network, "--stats")
    local = f"daemon://127.0.0.1:{daemon_port(daemon, WAIT)}"
    go = tmp_path / "go"
    peers = {f"local{i}": m2mc(local, f"local{i}", "3", str(go), script=PEER) for i in range(3)}
    peers["device"] = m2mc(network, "device", "3", str(go), script=PEER)
    for peer in peers.values():
        peer.wait_stderr("ready", WAIT)
    go.touch()
    for name, peer in peers.items():
        assert peer.finish(WAIT) == 0, peer.stderr
        [result] = peer.json_lines()
        assert result["got"] == sorted(f"from {other}" for other in peers if other != name)
        assert result["extra"] == []  # never its own message, never a second copy
    daemon.proc.terminate()
    assert daemon.finish(WAIT) == 0
    stats = daemon.json_lines()[-1]
    assert stats["from_clients"] >= 3 * 2  # three messages, redundancy 2
    assert stats["own_loopback"] == stats["external_datagrams_out"]
    assert stats["malformed"] == 0


def test_listener_reports_a_daemon_that_goes_away(m2mc: Spawn) -> None:
    daemon = m2mc("daemon", "--port", "0", "--channel", "null://")
    local = f"daemon://127.0.0.1:{daemon_port(daemon, WAIT)}"
    listener = m2mc("listen", "--channel", local)
    listener.wait_stderr("listening on", WAIT)
    daemon.proc.terminate()
    assert daemon.finish(WAIT) == 0
    assert listener.finish(WAIT) == 1
    assert listener.stderr[-1].startswith("m2mc listen: error: channel daemon://")
    assert not any("Traceback" in line for line in listener.stderr)


def test_senders_and_listeners_of_different_packet_sizes(m2mc: Spawn, mcast_url: str) -> None:
    """``packet=`` on the channel URL of ``m2mc send``/``listen``, over real loopback
    multicast: listeners at 508 (the default), 1472 and 65,000 bytes each get every
    message of senders at each of those sizes, whole."""
    rng = random.Random(11)
    sizes = ["", "&packet=1472", "&packet=65000"]
    messages = [rng.randbytes(64 * 1024), rng.randbytes(300_000), b"short"]
    listeners = [m2mc("listen", "--channel", mcast_url + size, "--count",
                      str(len(sizes) * len(messages)), "--timeout", str(WAIT)) for size in sizes]
    for child in listeners:
        child.wait_stderr("listening on", WAIT)
    sent = []
    for size in sizes:
        for message in messages:
            sender = m2mc("send", "--channel", mcast_url + size, stdin=message)
            assert sender.finish(WAIT) == 0
            sent.append(json.loads(sender.stdout[-1]))
    for listener in listeners:
        assert listener.finish(WAIT) == 0
        rows = listener.json_lines()
        assert [(r["id"], r["len"], r["sha256"]) for r in rows] == [
            (s["id"], s["len"], s["sha256"]) for s in sent]
