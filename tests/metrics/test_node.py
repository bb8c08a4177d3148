"""Prometheus metrics of ad hoc Nodes, scraped over HTTP on loopback as an operator's
Prometheus would, and parsed with prometheus_client's parser: what the counters say
after the application sends, after a forged frame, past the group label bound; two
Nodes in one process; the endpoint going away with the Node; bad addresses."""

from __future__ import annotations

import asyncio
import http.client
import random
import socket
import time
import urllib.error
import urllib.request
import uuid

import pytest
from scrape import Scrape, scrape

from m2mc.api import Node, NodeConfig
from m2mc.errors import ConfigError
from m2mc.group.codec import Leave, encode, group_tag
from m2mc.metrics.catalogue import MAX_GROUP_LABELS, OTHER_GROUPS
from m2mc.metrics.labels import GroupLabels
from m2mc.security import generate_key
from m2mc.transport.url import open_channel
from m2mc.wire.packet import fragments

LOOPBACK = "127.0.0.1:0"  # tests listen on loopback; the OS picks the port


def _channel() -> str:
    return f"mem://metrics-{uuid.uuid4().hex[:8]}"


async def _scrape(node: Node) -> Scrape:
    assert node.metrics_address is not None
    return await asyncio.to_thread(scrape, node.metrics_address)


async def _until(condition: object, what: str, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition():  # type: ignore[operator]
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_five_messages_sent_are_five_delivered_and_queued_then_read() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="alice", channel=channel, metrics=LOOPBACK)) as alice, \
            Node(NodeConfig(pid="bob", channel=channel, metrics=LOOPBACK)) as bob:
        assert alice.metrics_address != bob.metrics_address  # one registry and port each
        group = await alice.create_group("metrics")
        joined = await bob.join(group.gid, order="sb")
        for i in range(5):
            await group.send(f"message {i}")
        await _until(lambda: joined.pending() == 5, "bob's five messages")

        sender, receiver = await _scrape(alice), await _scrape(bob)
        assert sender.value("m2mc_messages_sent_total", node="alice") == 5
        assert receiver.value("m2mc_messages_sent_total", node="bob") == 0
        assert receiver.value("m2mc_messages_delivered_total", node="bob") == 5
        assert receiver.value("m2mc_group_messages_delivered_total", group=group.gid) == 5
        assert receiver.value("m2mc_queue_depth", queue="app_messages", group=group.gid) == 5
        assert receiver.value("m2mc_queue_limit", queue="app_messages", group=group.gid) \
            == 100_000
        assert receiver.value("m2mc_queue_depth", queue="held", group=group.gid) == 0
        assert receiver.value("m2mc_group_members", group=group.gid) == 2
        assert receiver.value("m2mc_group_info", group=group.gid, order="sb", keyed="false",
                              state="member") == 1
        assert receiver.value("m2mc_up") == 1 and sender.value("m2mc_up") == 1
        assert receiver.value("m2mc_auth_failures_total") == 0
        assert receiver.value("m2mc_m2mp_messages_in_total") > 0
        assert receiver.types["m2mc_messages_delivered_total"] == "counter"
        assert receiver.types["m2mc_queue_depth"] == "gauge"
        # Each Node's registry holds only its own samples.
        assert receiver.label_values("m2mc_up", "node") == {"bob"}
        assert {lab["node"] for _, lab, _ in sender.samples} == {"alice"}

        for _ in range(5):
            await joined.receive(timeout=5.0)
        read = await _scrape(bob)
        assert read.value("m2mc_queue_depth", queue="app_messages", group=group.gid) == 0
        assert read.value("m2mc_messages_delivered_total") == 5


async def test_a_forged_frame_in_a_keyed_group_is_one_auth_failure() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="alice", channel=channel, metrics=LOOPBACK)) as alice:
        team = await alice.create_group("team", key=generate_key())
        before = await _scrape(alice)
        assert before.value("m2mc_auth_failures_total") == 0
        assert before.value("m2mc_auth_refused_total", group=team.gid,
                            reason="unauthenticated") == 0
        # An outsider without the key: a LEAVE naming alice, not sealed, on the channel.
        outsider = open_channel(channel)
        await outsider.start()
        try:
            frame = encode(group_tag(team.gid), Leave("alice", 99))
            for datagram in fragments(random.Random(5).getrandbits(32), frame):
                await outsider.send(datagram)
            await _until(lambda: alice.stats()["auth_failed"] == 1, "the forgery counted")
        finally:
            await outsider.close()
        after = await _scrape(alice)
        assert after.value("m2mc_auth_failures_total") == 1
        assert after.value("m2mc_dropped_total", reason="auth_failed") == 1
        assert after.value("m2mc_auth_refused_total", group=team.gid,
                           reason="unauthenticated") == 1
        assert after.value("m2mc_group_info", group=team.gid, keyed="true") == 1
        assert alice.members(team.gid) == ["alice"]  # and the forged leave changed nothing


async def test_coming_back_into_range_is_counted_by_reason_and_a_repeat_is_held() -> None:
    channel = _channel()
    async with Node(NodeConfig(pid="alice", channel=channel, metrics=LOOPBACK)) as alice:
        group = await alice.create_group("back")
        before = await _scrape(alice)
        assert before.value("m2mc_reconnects_total", reason="interface") == 0
        assert before.value("m2mc_reconnects_total", reason="silence") == 0
        alice.network_changed()  # what the interface watcher calls when the link is back
        alice.network_changed()  # within reconnect_holdoff: no second reaction
        await _until(lambda: alice._stack is not None
                     and alice._stack.reconnect.stats.groups_reannounced == 1,
                     "the reaction's first step")
        after = await _scrape(alice)
        assert after.value("m2mc_reconnects_total", reason="interface") == 1
        assert after.value("m2mc_reconnects_total", reason="silence") == 0
        assert after.value("m2mc_reconnects_held_total") == 1
        assert after.value("m2mc_groups_reannounced_total") == 1  # the group alice made
        asked = "m2mc_group_msp_requests_sent_total"  # the group caught up (MSP)
        assert after.value(asked, group=group.gid) == before.value(asked, group=group.gid) + 1


async def test_groups_past_the_label_bound_share_one_label() -> None:
    async with Node(NodeConfig(pid="alice", channel=_channel(), metrics=LOOPBACK)) as alice:
        groups = [await alice.create_group(f"g{i}") for i in range(MAX_GROUP_LABELS + 3)]
        for group in groups:
            await group.send("hello")
        got = await _scrape(alice)
        labels = got.label_values("m2mc_group_info", "group")
        assert labels == {g.gid for g in groups[:MAX_GROUP_LABELS]} | {OTHER_GROUPS}
        assert got.value("m2mc_group_info", group=OTHER_GROUPS) == 3  # groups it stands for
        assert got.value("m2mc_group_messages_delivered_total", group=OTHER_GROUPS) == 3
        assert got.value("m2mc_queue_limit", queue="held", group=OTHER_GROUPS) == 100_000
        assert got.value("m2mc_messages_delivered_total") == MAX_GROUP_LABELS + 3


def test_group_labels_are_first_come_and_freed_when_a_group_goes() -> None:
    labels = GroupLabels(limit=2)
    assert labels.assign(["a", "b", "c"]) == {"a": "a", "b": "b", "c": OTHER_GROUPS}
    assert labels.assign(["c", "b", "a"]) == {"a": "a", "b": "b", "c": OTHER_GROUPS}
    assert labels.assign(["b", "c"]) == {"b": "b", "c": "c"}  # a left: c gets its place
    assert labels.assign(["a", "b", "c"]) == {"a": OTHER_GROUPS, "b": "b", "c": "c"}


async def test_the_endpoint_goes_away_with_the_node_and_its_port_is_free_again() -> None:
    node = Node(NodeConfig(channel=_channel(), metrics=LOOPBACK))
    await node.start()
    address = node.metrics_address
    assert address is not None
    assert (await asyncio.to_thread(scrape, address)).value("m2mc_up") == 1
    await node.close()
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(urllib.request.urlopen, f"http://{address}/metrics", None, 5)
    async with Node(NodeConfig(channel=_channel(), metrics=address)) as again:
        assert again.metrics_address == address


async def test_a_port_in_use_is_a_config_error_and_the_node_does_not_run() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = Node(NodeConfig(channel=_channel(), metrics=f"127.0.0.1:{port}"))
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}: cannot listen"):
            await node.start()
        with pytest.raises(Exception, match="not running"):
            node.stats()


@pytest.mark.parametrize("address", ["[::1]:0", "localhost:0"])
async def test_an_ipv6_address_or_a_host_name_is_served_too(address: str) -> None:
    if address.startswith("[") and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        node = Node(NodeConfig(channel=_channel(), metrics=address))
        await node.start()
    except ConfigError as exc:  # an IPv6 loopback that is not configured
        pytest.skip(str(exc))
    try:
        assert node.metrics_address is not None
        assert node.metrics_address.rsplit(":", 1)[1] != "0"
        assert (await _scrape(node)).value("m2mc_up") == 1
    finally:
        await node.close()


def test_a_sync_node_serves_metrics_too() -> None:
    from m2mc.api.sync import SyncNode

    with SyncNode(NodeConfig(pid="sync", channel=_channel(), metrics=LOOPBACK)) as node:
        group = node.create_group("sync")
        group.send("one")
        assert node.metrics_address is not None
        got = scrape(node.metrics_address)
    assert got.value("m2mc_messages_sent_total", node="sync") == 1


@pytest.mark.parametrize("address", ["9464", "localhost", "127.0.0.1:", "127.0.0.1:70000",
                                     ":9464", "::1:9464", "[::1]9464", "127.0.0.1:port"])
def test_a_bad_address_is_refused_when_the_node_is_made(address: str) -> None:
    with pytest.raises(ConfigError, match=r"NodeConfig\.metrics"):
        Node(NodeConfig(channel=_channel(), metrics=address))


async def test_connections_past_the_bound_are_closed_at_once_and_counted() -> None:
    from m2mc.metrics.server import MAX_CONNECTIONS

    async with Node(NodeConfig(pid="alice", channel=_channel(), metrics=LOOPBACK)) as alice:
        assert alice.metrics_address is not None
        host, port = alice.metrics_address.rsplit(":", 1)

        def hold_then_knock() -> bytes:
            idle = [socket.create_connection((host, int(port))) for _ in range(MAX_CONNECTIONS)]
            try:
                with socket.create_connection((host, int(port))) as extra:
                    extra.settimeout(30)
                    try:
                        return extra.recv(1)  # closed by the server: b""
                    except ConnectionResetError:
                        return b""
            finally:
                for sock in idle:
                    sock.close()

        assert await asyncio.to_thread(hold_then_knock) == b""
        address = alice.metrics_address

        def served_again() -> tuple[Scrape, int]:
            """The idle ones went away: served again once the server saw them go (a
            scrape before that is refused too, and counted: we count it as well)."""
            refused, deadline = 0, time.monotonic() + 30
            while True:
                try:
                    return scrape(address), refused
                except (http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError):
                    refused += 1
                    assert time.monotonic() < deadline, "never served again"
                    time.sleep(0.05)

        got, refused_scrapes = await asyncio.to_thread(served_again)
        assert got.value("m2mc_scrape_connections_refused_total") == 1 + refused_scrapes
        assert got.value("m2mc_up") == 1


async def test_a_stuck_event_loop_scrapes_as_down_instead_of_hanging() -> None:
    from m2mc.metrics.server import LoopCollector
    from m2mc.metrics.sink import Samples

    stuck = asyncio.new_event_loop()  # never runs: a loop that never answers
    try:
        collector = LoopCollector(stuck, lambda: Samples("n"), "n", timeout=0.2)
        families = await asyncio.to_thread(lambda: list(collector.collect()))
    finally:
        stuck.close()
    values = {f.name: [s.value for s in f.samples] for f in families}
    assert values == {"m2mc_up": [0.0], "m2mc_scrape_connections_refused": [0]}


async def test_a_collector_asked_on_its_own_loop_reads_at_once() -> None:
    from m2mc.metrics.server import LoopCollector
    from m2mc.metrics.sink import Samples

    def samples() -> Samples:
        got = Samples("n")
        got.add("m2mc_messages_sent_total", 7)
        return got

    collector = LoopCollector(asyncio.get_running_loop(), samples, "n", timeout=60)
    values = {f.name: [s.value for s in f.samples] for f in collector.collect()}
    assert values["m2mc_up"] == [1.0] and values["m2mc_messages_sent"] == [7]
