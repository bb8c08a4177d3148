"""Every infrastructure-mode table an outsider (or a runaway member) can fill has a
configured bound and a specified behaviour at the bound (docs/security.md, "Bounds").
One test per row of the table's infra part."""

from __future__ import annotations

import asyncio
import random

import pytest
from infra_harness import Net, bootstrapped, check_complete

from m2mc.errors import ConfigError
from m2mc.infra import messages as m
from m2mc.infra.codec import encode
from m2mc.infra.config import MAX_PAYLOAD_LIMIT, InfraConfig
from m2mc.infra.coordinator import Coordinator
from m2mc.infra.gateway import Gateway
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.ids import NO_EPOCH, Epoch, MemberId
from m2mc.infra.mcache import MembershipCache
from m2mc.infra.member import MemberCore
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, pack_groups
from m2mc.infra.takeover import TakeoverRound
from m2mc.infra_runtime.net import (
    MAX_PEER_NAME,
    Backbone,
    FrameReader,
    cell_on,
    format_address,
    parse_address,
)

E = Epoch(1, 0.0, "H1")


def coordinator(**cfg: object) -> Coordinator:
    return Coordinator("H1", E, InfraConfig(**cfg).check(), ReplicaLog(),  # type: ignore[arg-type]
                       CoordState(), 0.0)


def forward(c: Coordinator, req: m.MemberRequest) -> None:
    c.handle_forward(m.Forward("H2", 1, req), 0.0)
    c.drain()


def join(c: Coordinator, node: str) -> MemberId:
    mid = MemberId(node, 1)
    forward(c, m.JoinReq(node, "H2", 1, mid))
    return mid


def gateway(log: ReplicaLog | None = None, **cfg: object) -> Gateway:
    g = Gateway("G", InfraConfig(**cfg).check(), log or ReplicaLog())  # type: ignore[arg-type]
    g.new_master("H1", E, 0.0)
    return g


# ------------------------------------------------------------------ coordinator
def test_max_members_refuses_joins_until_someone_leaves() -> None:
    c = coordinator(max_members=2)
    a, b = join(c, "A"), join(c, "B")
    join(c, "C")
    assert c.work.members == {a, b} and c.stats.refused_full == 1  # C retries later
    forward(c, m.LeaveReq("A", "H2", 2, a))
    join(c, "C")
    assert MemberId("C", 1) in c.work.members


def test_early_news_are_bounded_per_member_and_in_total() -> None:
    c = coordinator(early_new_limit=4, max_early_total=5)
    a, b = join(c, "A"), join(c, "B")
    items = tuple(m.NewItem(n, n, b"x") for n in range(3, 9))  # nseq 1-2 missing: all early
    forward(c, m.NewReq("A", "H2", 1, a, items))
    assert len(c.early[a].items) == 4 and c.stats.early_dropped == 2  # per member
    forward(c, m.NewReq("B", "H2", 1, b, items))
    assert c.early_total == 5 and len(c.early[b].items) == 1  # all members together
    forward(c, m.NewReq("A", "H2", 2, a, (m.NewItem(1, 1, b"x"), m.NewItem(2, 2, b"x"))))
    assert c.early_total == 1 and a not in c.early  # sequenced: the room is back
    forward(c, m.LeaveReq("B", "H2", 2, b))
    assert c.early_total == 0 and not c.early


def test_membership_cache_forgets_the_oldest_and_expires() -> None:
    cache = MembershipCache(size=2, ttl=10.0)
    x, y, z = MemberId("X", 1), MemberId("Y", 1), MemberId("Z", 1)
    cache.add(x, 0.0)
    cache.add(y, 1.0)
    cache.add(z, 2.0)
    assert x not in cache and y in cache and z in cache and len(cache) == 2
    cache.expire(11.5)
    assert y not in cache and z in cache


def test_fetched_copies_and_fetch_answers_are_bounded() -> None:
    log = ReplicaLog()
    work = CoordState()
    a = MemberId("A", 1)
    recs = [work.next_record(m.JOINED, a, body=pack_groups(["g"]))]
    work.apply(recs[0], 0.0)
    for i in range(1, 40):
        r = work.next_record(m.APP, a, i, i, b"x", "g")
        work.apply(r, 0.0)
        recs.append(r)
    log.append(recs)
    log.commit_to(log.high, 0.0)
    c = Coordinator("H1", E, InfraConfig(fetch_limit=8).check(), log, work, 0.0)
    c.handle_fetch(m.Fetch("H2", 1, 40))
    ((_, answer),) = c.drain()
    assert isinstance(answer, m.Fetched) and len(answer.records) == 8
    g = gateway(fetch_limit=2)
    g.on_copies(m.Fetched(tuple(recs)))
    assert len(g._fetched) == 8  # 4 x fetch_limit


# ------------------------------------------------------------------ gateway
def test_local_table_is_bounded_and_silent_computers_make_room() -> None:
    g = gateway(max_local=3)
    for i in range(10):
        g.on_uplink(f"addr{i}", m.Hello(f"X{i}", "G", None, 0), 0.0)
    assert set(g.local) == {"X0", "X1", "X2"} and g.stats.local_refused == 7
    g.on_uplink("addr0", m.Hello("X0", "G", None, 0), 0.05)  # known ones are still heard
    assert g.local["X0"].heard == 0.05 and g.stats.local_refused == 7
    g.tick(1.0)  # everyone silent past local_timeout leaves `local` (B2)
    g.on_uplink("addr9", m.Hello("X9", "G", None, 0), 1.0)
    assert "X9" in g.local


def test_rate_limiter_table_is_bounded() -> None:
    g = gateway(control_max_senders=4)
    for i in range(20):
        g.on_uplink(f"a{i}", m.JoinReq(f"X{i}", "G", 1, MemberId(f"X{i}", 1)), 0.0)
    assert len(g.limiter) == 4 and g.limiter.stats.evictions == 16


def test_stabinfo_is_reported_only_for_members_and_forgotten_when_they_go() -> None:
    log = ReplicaLog()
    work = CoordState()
    a = MemberId("A", 1)
    r = work.next_record(m.JOINED, a)
    work.apply(r, 0.0)
    log.append((r,))
    log.commit_to(1, 0.0)
    g = gateway(log)
    for i in range(50):  # invented member ids: no STABINFO, no table entries
        g.on_uplink(f"x{i}", m.Hello(f"X{i}", "G", MemberId(f"X{i}", i), 5), 0.0)
    g.on_uplink("a", m.Hello("A", "G", a, 1, True), 0.0)
    g.tick(1.0)
    stab = [x for x in g.to_coord if isinstance(x, m.StabInfo)]
    assert [p for s in stab for p in s.pairs] == [(a, 1)]
    assert set(g._reported) == {a}
    log.state.rows.clear()  # A left and was cleaned up
    g.on_uplink("a", m.Hello("A", "G", a, 2, True), 1.0)
    g.tick(2.0)
    assert g._reported == {}


def test_forward_queue_bound_refuses_without_ack() -> None:
    g = gateway(max_forward_queue=2)
    for i in range(4):
        g.on_uplink(f"a{i}", m.JoinReq(f"X{i}", "G", 1, MemberId(f"X{i}", 1)), 0.0)
    acks = [x for _, x in g.cell_out if isinstance(x, m.Ack)]
    assert len(acks) == 2 and g.stats.refused_full == 2 and len(g.outbox) == 2


def test_cell_datagrams_stop_at_max_datagram() -> None:
    log = ReplicaLog()
    work = CoordState()
    a = MemberId("A", 1)
    recs = [work.next_record(m.JOINED, a, body=pack_groups(["g"]))]
    work.apply(recs[0], 0.0)
    for i in range(1, 30):
        r = work.next_record(m.APP, a, i, i, bytes(300), "g")
        work.apply(r, 0.0)
        recs.append(r)
    log.append(recs)
    g = gateway(log, max_datagram=1024)
    g.on_committed(log.commit_to(log.high, 0.0))
    g.flush(0.0)
    batches = [x for _, x in g.cell_out if isinstance(x, m.Normals)]
    assert len(batches) > 5 and sum(len(b.records) for b in batches) == 30
    assert all(len(encode(b)) <= 1024 + 400 for b in batches)  # one record past the bound


# ------------------------------------------------------------------ host
def host(**cfg: object) -> HostCore:
    core = HostCore(HostIdentity("H1"), InfraConfig(**cfg).check(),  # type: ignore[arg-type]
                    random.Random(1), expected_hosts=3)
    core.start(0.0)
    return bootstrapped(core, ("H2", "H3"))


def status(h: str) -> bytes:
    return encode(m.Status(h, 1, "127.0.0.1", 7000, "cell", h, 0, (), "", NO_EPOCH, NO_EPOCH,
                           0, 0, None))


def test_directory_admits_at_most_max_hosts() -> None:
    core = host(max_hosts=4)
    for i in range(2, 12):
        core.receive_backbone(f"H{i}", status(f"H{i}"), 0.01)
    assert core.directory.known == {"H1", "H2", "H3", "H4"}
    assert core.stats.hosts_refused == 7
    core.receive_backbone("H2", status("H2"), 0.05)  # known hosts keep reporting
    assert core.stats.hosts_refused == 7


def test_votes_acceptances_and_answers_of_unknown_hosts_are_ignored() -> None:
    core = host()
    core.receive_backbone("H2", status("H2"), 0.01)
    eid = core.election.begin(0.02).eid
    core.receive_backbone("X", encode(m.Vote(eid, "X", "X")), 0.03)
    core.receive_backbone("H2", encode(m.Vote(eid, "H2", "H1")), 0.03)
    assert core.election.votes == {"H2": "H1"} and core.stats.unknown_host == 1
    epoch = Epoch(5, 0.1, "H1")
    core.takeover = TakeoverRound("H1", epoch, core.log, 2, 0.1, 1.0)
    core.receive_backbone("X", encode(m.StateReply(epoch, "X", NO_EPOCH, 0, 0, None, ())), 0.1)
    assert set(core.takeover.replies) == {"H1"} and core.stats.unknown_host == 2


def test_requests_held_during_a_takeover_are_bounded() -> None:
    core = host(max_queued_requests=3)
    core.takeover = TakeoverRound("H1", Epoch(5, 0.1, "H1"), core.log, 3, 0.1, 10.0)
    for i in range(10):
        req = m.JoinReq(f"X{i}", "H2", 1, MemberId(f"X{i}", 1))
        core.receive_backbone("H2", encode(m.Forward("H2", i + 1, req)), 0.2)
    assert core.queued_requests == 3 and core.stats.queued_dropped == 7


# ------------------------------------------------------------------ member
def test_member_refuses_absurd_bridges_of_dummies() -> None:
    core = MemberCore("A", InfraConfig(skip_membership=True, max_dummies=100).check(),
                      random.Random(1))
    core.on_attach("cell", 0.0)
    core.receive(m.Beacon("G", 0, "up", "H1"), 0.0)
    mid = core.join(0.0)
    core.receive(m.Normals("G", (m.Record(1, 1, m.JOINED, mid),)), 0.0)
    forged = m.Record(2, 10**9, m.APP, MemberId("B", 1), 1, 1, 10**9, b"x")
    core.receive(m.Normals("G", (forged,)), 0.0)
    assert core.stats.dummies_refused == 1 and core.mystable == 1
    assert len(core.mybuf) <= core.cfg.member_buffer  # nothing was bridged
    ok = m.Record(3, 12, m.APP, MemberId("B", 1), 1, 1, 10, b"y")  # 10 real skipped changes
    core.receive(m.Normals("G", (ok,)), 0.0)
    assert core.mystable == 12 and core.stats.dummies_refused == 1


def test_max_payload_is_bounded_by_one_datagram() -> None:
    """A message travels whole in one datagram: a max_payload above 65,000 bytes (a
    65,536-byte send then never left the member) is a one-line configuration error."""
    assert InfraConfig().with_overrides({"max_payload": MAX_PAYLOAD_LIMIT}).max_payload == 65_000
    with pytest.raises(ConfigError, match=r"^infra.max_payload: at most 65000 bytes"):
        InfraConfig().with_overrides({"max_payload": 65_536})


# ------------------------------------------------------------------ sockets
def test_unicast_addresses_are_any_ip_the_operator_names() -> None:
    """No address class is refused: loopback, private, public, IPv6 on the backbone.
    What cannot be one host's address is refused with a one-line error."""
    assert parse_address("127.0.0.5:9", "x") == ("127.0.0.5", 9)
    assert parse_address("10.77.0.1:7101", "--listen") == ("10.77.0.1", 7101)
    assert parse_address("192.0.2.7:1", "x") == ("192.0.2.7", 1)  # any IPv4 (a doc range)
    assert parse_address("localhost:9", "x") == ("127.0.0.1", 9)
    assert parse_address("[::1]:7101", "--peer") == ("::1", 7101)
    assert parse_address("[2001:db8::5]:80", "x") == ("2001:db8::5", 80)
    for text, why in (("239.255.1.1:9", "not a unicast"), ("255.255.255.255:9", "not a unicast"),
                      ("0.0.0.0:9", "unspecified"), ("[::]:9", "unspecified"),
                      ("host.example:9", "not an IP address"), ("10.0.0.1", "HOST:PORT"),
                      ("::1:80", "brackets"), ("[10.0.0.1]:80", "brackets"),
                      ("10.0.0.1:70000", "port out of range")):
        with pytest.raises(ConfigError, match=why):
            parse_address(text, "--peer")
    with pytest.raises(ConfigError, match=r"^--uplink: IPv6 is not supported"):
        parse_address("[::1]:9", "--uplink", ipv6=False)
    assert format_address(("::1", 5)) == "[::1]:5"
    assert format_address(("10.0.0.1", 5)) == "10.0.0.1:5"
    url = "udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=1"
    assert cell_on(url, "127.0.0.1") == url
    assert "iface=10.77.0.3" in cell_on(url, "10.77.0.3")
    with pytest.raises(ConfigError, match="ttl"):
        cell_on("udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=4", "127.0.0.1")


async def test_backbone_refuses_connections_and_frames_past_their_bounds() -> None:
    got: list[tuple[str, bytes]] = []
    bb = Backbone("H1", ("127.0.0.1", 0), [], lambda s, d: got.append((s, d)),
                  max_frame=1000, max_connections=2)
    await bb.start()
    assert bb._server is not None
    port = bb._server.sockets[0].getsockname()[1]
    bb.listen = ("127.0.0.1", port)
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]

    def frame(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data

    for i, (_, w) in enumerate(conns):
        w.write(frame(f"P{i}".encode()) + frame(b"hello"))
        await w.drain()
    loop = asyncio.get_running_loop()
    end = loop.time() + 5
    while len(got) < 2 and loop.time() < end:
        await asyncio.sleep(0.01)
    assert sorted(got) == [("P0", b"hello"), ("P1", b"hello")]
    assert bb.refused_connections == 2
    for r, _ in conns[2:]:  # the refused ones were closed at once
        assert await asyncio.wait_for(r.read(), 5) == b""
    r0, w0 = conns[0]
    w0.write((10_000).to_bytes(4, "big"))  # a frame over max_frame: the link is closed
    await w0.drain()
    assert await asyncio.wait_for(r0.read(), 5) == b""
    assert bb.bad_streams == 1
    for _, w in conns:
        w.close()
    await bb.close()


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def test_backbone_frame_reader_holds_less_than_one_frame_and_checks_the_name() -> None:
    stream = _frame(b"H2") + _frame(b"one") + _frame(b"") + _frame(b"x" * 90)
    reader = FrameReader(max_frame=100)
    got = []
    for i in range(len(stream)):  # a byte at a time
        got += reader.feed(stream[i:i + 1])
        assert reader.buffered <= 100 + 3
    assert reader.peer == "H2" and got == [b"one", b"", b"x" * 90] and not reader.closed
    assert FrameReader(100).feed(stream) == got
    too_big = FrameReader(max_frame=100)
    assert too_big.feed(_frame(b"H2") + _frame(b"ok") + (101).to_bytes(4, "big")) == [b"ok"]
    assert too_big.closed and too_big.buffered == 0 and too_big.feed(_frame(b"more")) == []
    for name in (b"", b"\xff\xfe", b"h" * (MAX_PEER_NAME + 1)):
        bad = FrameReader(max_frame=100)
        assert bad.feed(_frame(name) + _frame(b"data")) == []
        assert bad.closed and bad.peer is None, name
    assert FrameReader(100).feed(_frame(b"h" * MAX_PEER_NAME) + _frame(b"d")) == [b"d"]
    with pytest.raises(ConfigError, match="host id"):
        Backbone("h" * (MAX_PEER_NAME + 1), ("127.0.0.1", 0), [], lambda s, d: None)


def test_keyed_and_bounded_defaults_keep_a_long_lossy_run_complete() -> None:
    """The bounds at their defaults never bite a real deployment."""
    net = Net(seed=9, loss=0.2, key=bytes(32))
    for i in range(6):
        net.add_member(f"M{i}", net.host_ids[i % 3])
    net.run_until(3.0)
    for k in range(60):
        net.send(f"M{k % 6}", f"m{k}".encode())
        net.run_until(net.now + 0.02)
    assert net.run_while(lambda: net.pending() > 0, net.now + 30)
    net.run_until(net.now + 2)
    check_complete(net)
    for core in net.hosts.values():
        s = core.security_stats()
        assert s["rate_limited"] == s["local_refused"] == s["hosts_refused"] == 0, s


# ------------------------------------------------------------------ forged logs (unkeyed)
def test_records_that_do_not_apply_are_refused_not_fatal() -> None:
    """A forged Replicate (possible in an unauthenticated deployment) whose records do
    not follow on from the tables is dropped, counted, and the host carries on."""
    core = host()
    e = Epoch(3, 0.5, "H2")
    core.receive_backbone("H2", status("H2"), 0.01)
    core.receive_backbone("H2", encode(m.Sync(e, 0, 0, None, ())), 0.02)
    bogus = m.Record(1, 1, m.APP, MemberId("A", 1), 1, 1, 0, b"no such member")
    core.receive_backbone("H2", encode(m.Replicate(e, 1, (bogus,))), 0.03)
    assert core.log.refused == 1 and core.log.applied == 0 and core.log.high == 0
    assert core.security_stats()["records_refused"] == 1
    good = m.Record(1, 1, m.JOINED, MemberId("A", 1))
    core.receive_backbone("H2", encode(m.Replicate(e, 1, (good,))), 0.04)
    assert core.log.applied == 1 and MemberId("A", 1) in core.log.state.members


def test_a_takeover_answer_that_does_not_apply_restarts_the_election() -> None:
    core = host()
    core.receive_backbone("H2", status("H2"), 0.01)
    epoch = Epoch(5, 0.1, "H1")
    core.takeover = TakeoverRound("H1", epoch, core.log, 2, 0.1, 1.0)
    bogus = m.Record(1, 1, m.APP, MemberId("A", 1), 1, 1, 0, b"x")
    core.receive_backbone("H2", encode(m.StateReply(epoch, "H2", Epoch(4, 0.0, "H2"), 0, 1,
                                                    None, (bogus,))), 0.2)
    assert core.takeover is None and core.coordinator is None
    assert core.stats.bad_takeovers == 1 and core.election.restart_at is not None
