"""Addresses that change under a running deployment (docs/infra.md "Addresses";
issue 34 item 6): a host whose uplink was bound again advertises it at once, and a
gateway keys members by node, so a member heard from a new address gets its answers
(ACKs, MOVEs, a running transfer) there, within the rules of docs/security.md: the
address is the member's own word (sealed by it, in a keyed deployment) and, unkeyed,
moving it costs an outsider a rate-limited arrival. The sockets' side (binding again)
is tested here on loopback; on a real kernel in tests/netns/test_infra_iface.py."""

from __future__ import annotations

import asyncio
import random

from m2mc.infra import messages as m
from m2mc.infra.codec import Message
from m2mc.infra.config import InfraConfig
from m2mc.infra.gateway import Gateway
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.ids import Epoch, MemberId
from m2mc.infra.replog import ReplicaLog
from m2mc.infra.state import CoordState, pack_groups
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.infra_runtime.uplink import (
    FollowedUplink,
    follows_interface,
    rebind_targets,
)
from m2mc.security.auth import GroupAuth
from m2mc.transport.linkwatch import AddressState, LinkWatcher

E = Epoch(1, 0.0, "H1")
A = MemberId("A", 1)
OLD, NEW = "10.78.0.4:40000", "10.78.0.104:40000"
KEY = bytes(range(32))


# ------------------------------------------------------------------ where to bind
def test_the_socket_moves_to_the_new_address_on_its_port_or_any() -> None:
    assert rebind_targets("10.78.0.4", ("10.78.0.4", 7301)) == []  # where it is bound
    assert rebind_targets(None, ("10.78.0.4", 7301)) == []  # nowhere to go: kept
    assert rebind_targets("10.78.0.104", ("10.78.0.4", 7301)) == [("10.78.0.104", 7301),
                                                                  ("10.78.0.104", 0)]
    assert rebind_targets("10.78.0.104", ("10.78.0.4", 0)) == [("10.78.0.104", 0)]


def test_an_uplink_follows_a_named_interface_when_it_is_on_its_address() -> None:
    assert follows_interface("wlan0", "10.78.0.4", "10.78.0.4")  # the default uplink
    assert not follows_interface("wlan0", "10.99.0.1", "10.78.0.4")  # another interface's
    assert not follows_interface("10.78.0.4", "10.78.0.4", "10.78.0.4")  # named by address


async def test_a_followed_uplink_is_bound_again_on_the_new_address_and_port() -> None:
    got: list[tuple[bytes, tuple[str, int]]] = []
    changes: list[bool] = []
    up = FollowedUplink("127.0.0.1", ("127.0.0.1", 0), lambda d, a: got.append((d, a)),
                        follow=False, on_change=changes.append)
    await up.open()
    try:
        port = up.address[1]
        # What watch_interface(..., follow=) gives on a named interface, told by hand
        # (loopback's 127.0.0.0/8 is all ours, so 127.0.0.2 binds without a namespace).
        state = AddressState(1, "lo", "127.0.0.1")
        up._watcher = LinkWatcher(state, up._changed)

        async def settled(n: int) -> None:
            while len(changes) < n:
                await asyncio.sleep(0.01)  # a poll: the rebind runs in a task

        state.reset(["127.0.0.2"])
        up._changed()
        await asyncio.wait_for(settled(1), 10)
        assert changes == [True] and up.address == ("127.0.0.2", port) and up.moves == 1
        probe = FollowedUplink("127.0.0.1", ("127.0.0.1", 0), lambda d, a: None, follow=False)
        await probe.open()
        probe.send(b"to the new address", ("127.0.0.2", port))
        while not got:
            await asyncio.sleep(0.01)
        assert got[0][0] == b"to the new address"
        probe.close()
        state.reset([])  # no address left: the socket is kept, nobody is told
        up._changed()
        state.reset(["127.0.0.2"])  # the same one back: the interface is back, no move
        up._changed()
        await asyncio.wait_for(settled(2), 10)
        assert changes == [True, False] and up.moves == 1
    finally:
        up._watcher = None
        up.close()


# ------------------------------------------------------------------ the gateway
def gateway(**cfg: object) -> Gateway:
    log = ReplicaLog()
    work = CoordState()
    records = []
    for kind, app in [(m.JOINED, 0), *[(m.APP, i) for i in range(1, 41)]]:
        r = (work.next_record(kind, A, app, app, b"x", "g") if app
             else work.next_record(kind, A, body=pack_groups(["g"])))
        work.apply(r, 0.0)
        records.append(r)
    assert log.append(records)
    g = Gateway("G", InfraConfig(**cfg).check(), log)  # type: ignore[arg-type]
    g.new_master("H1", E, 0.0)
    g.on_committed(g.log.commit_to(g.log.high, 0.0))
    g.flush(0.0)
    g.cell_out.clear()
    return g


def sent_to(g: Gateway) -> set[str | None]:
    g.flush(0.0)
    out = {dest for dest, _ in g.cell_out}
    g.cell_out.clear()
    return out


def test_a_member_heard_from_a_new_address_gets_its_answers_and_transfer_there() -> None:
    g = gateway(transfer_chunk=4)
    g.on_uplink(OLD, m.Hello("A", "G", A, 0, True), 0.0)
    g.on_uplink(OLD, m.NackReq("A", "G", 1, A, 0, 40), 0.0)  # a transfer of 40 starts
    assert sent_to(g) == {OLD}
    g.on_uplink(NEW, m.Hello("A", "G", A, 4, True), 0.1)  # its greeting, from its new one
    assert g.local["A"].addr == NEW and list(g.local) == ["A"]  # keyed by node
    assert g.trans[A].addr == NEW and g.stats.readdressed == 1
    assert sent_to(g) == {NEW}  # the rest of the transfer
    g.on_uplink(NEW, m.NewReq("A", "G", 2, A, (m.NewItem(41, 41, b"y"),)), 0.2)
    assert sent_to(g) == {NEW}  # the ACK
    g.on_reroute(1, m.CellInfo("G2", "cell2", "10.78.0.3:7301", 0))
    assert {dest for dest, x in g.cell_out if isinstance(x, m.Move)} == {NEW}
    assert g.stats.readdressed == 1  # the same address again is no change


def test_moving_a_members_address_is_rate_limited_like_an_arrival() -> None:
    """Unkeyed, anybody may claim to be A from anywhere: each move costs a token of A's
    bucket (as a NACK does), and a refused one changes nothing and is not answered."""
    g = gateway(control_rate=1.0, control_burst=5.0)
    g.on_uplink(OLD, m.Hello("A", "G", A, 0, True), 0.0)
    before = g.stats.rate_limited
    for i in range(50):
        g.on_uplink(f"192.0.2.{i + 1}:9", m.NewReq("A", "G", 10 + i, A, ()), 0.0)
    assert g.stats.readdressed <= 5 and g.stats.rate_limited - before >= 45
    answered = {dest for dest, _ in g.cell_out}
    assert len(answered) <= 5 and g.local["A"].addr in answered | {OLD}


def test_in_a_keyed_deployment_only_the_member_itself_moves_its_address() -> None:
    def wire(sender: str, key: bytes = KEY) -> InfraWire:
        return InfraWire(GroupAuth(INFRA_KEY_CONTEXT, key, sender, counter_start=1))

    host = HostCore(HostIdentity("G", uplink="10.78.0.2:7301"), InfraConfig(),
                    random.Random(1), wire=wire("G"))
    member, outsider = wire("A"), wire("A", bytes(32))
    host.receive_cell(OLD, member.encode(m.Hello("A", "G", None, 0)), 0.0)
    host.receive_cell("192.0.2.9:9", outsider.encode(m.Hello("A", "G", None, 0)), 0.1)
    host.receive_cell("192.0.2.9:9", member.encode(m.Hello("A", "G", None, 0))[:-1] + b"?", 0.1)
    assert host.gateway.local["A"].addr == OLD and host.gateway.stats.readdressed == 0
    assert host.security_stats()["auth_bad_tag"] >= 1
    host.receive_cell(NEW, member.encode(m.Hello("A", "G", None, 0)), 0.2)
    assert host.gateway.local["A"].addr == NEW and host.gateway.stats.readdressed == 1


# ------------------------------------------------------------------ the host
def test_a_host_advertises_its_new_uplink_at_once() -> None:
    cfg = InfraConfig(beacon_interval=1.0, status_interval=1.0, host_timeout=3.0)
    host = HostCore(HostIdentity("H1", "10.77.0.1", 7101, "cell1", "10.78.0.2:7301"), cfg,
                    random.Random(1))
    host.start(0.0)
    host.on_timer(0.0)
    host.drain(0.0)
    wire = InfraWire()

    def sent(now: float) -> list[Message]:
        host.on_timer(now)
        return [wire.decode(s.data)[0] for s in host.drain(now)]

    assert host.move_uplink("10.78.0.102:7301", 0.2)
    assert (host.next_deadline() or 9.0) <= 0.2  # a beacon now, not at the next one (1.0)
    [beacon] = [x for x in sent(0.2) if isinstance(x, m.Beacon)]
    assert beacon.uplink == host.ident.uplink == "10.78.0.102:7301"
    [status] = [x for x in sent(1.0) if isinstance(x, m.Status)]  # at its interval
    assert status.uplink == "10.78.0.102:7301"
    assert [c.uplink for c in host.gateway.directory] == ["10.78.0.102:7301"]
    assert not host.move_uplink("10.78.0.102:7301", 1.1)  # no change
    assert (host.next_deadline() or 0.0) > 1.1
