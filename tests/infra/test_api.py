"""The application API in infrastructure mode: the same Node/Group calls as ad hoc
mode, selected by configuration alone (hosts as asyncio drivers in this process)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable

import pytest

from m2mc.api import AdhocNode, Group, Node, NodeConfig, NodeMode, node_class
from m2mc.api.infra import InfraNode
from m2mc.api.infra_groups import pack_body, unpack_body
from m2mc.api.node import NODE_CALLS, register_mode
from m2mc.errors import DecodeError, UsageError
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.ordering import ROOT, MessageId

BASE = 9000 + (os.getpid() % 400) * 2
CELLS = [f"udp-multicast://239.255.{50 + i}.{1 + os.getpid() % 200}:{BASE + i}"
         "?iface=127.0.0.1&ttl=1" for i in range(2)]
BACKBONE = [("127.0.0.1", BASE + 10 + i) for i in range(2)]


@pytest.fixture
async def hosts() -> AsyncIterator[list[HostDriver]]:
    drivers = [HostDriver(HostSettings(f"H{i}", BACKBONE[i], CELLS[i], ("127.0.0.1", 0),
                                       [b for j, b in enumerate(BACKBONE) if j != i]))
               for i in range(2)]
    for d in drivers:
        await d.start()
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while not any(d.core is not None and d.core.coordinator is not None for d in drivers):
        assert loop.time() < end, "no coordinator elected"
        await asyncio.sleep(0.05)
    yield drivers
    for d in drivers:
        await d.close()


async def test_same_api_as_ad_hoc_mode(hosts: list[HostDriver]) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    async with Node(cfg, pid="alice") as alice, \
            Node(cfg, pid="bob", infra_cell=CELLS[1]) as bob:
        ga = await alice.create_group("chat", order="total")
        gb = await bob.join("chat", order="total", timeout=10)
        question = await ga.send("Did you visit Delhi?")
        assert str(question) == "alice:1"
        got = await gb.receive(timeout=10)
        assert got.text == "Did you visit Delhi?" and got.sender == "alice" and not got.is_reply
        await gb.send("Yes", reply_to=got)
        texts = []
        for _ in range(2):
            m = await ga.receive(timeout=10)
            texts.append((m.text, m.is_reply, m.gseq is not None))
        assert texts == [("Did you visit Delhi?", False, True), ("Yes", True, True)]
        assert ga.order == "total" and bob.group("chat").gid == "chat"
        # Bob gets his own reply too, once the sequencer has ordered it (it may reach
        # Alice first: wait for it rather than read the counter at once).
        own = await gb.receive(timeout=10)
        assert (own.text, own.sender, own.is_reply) == ("Yes", "bob", True)
        assert bob.stats()["delivered"] >= 2
        # What infrastructure mode cannot do, it says (a UsageError naming why).
        with pytest.raises(UsageError, match="ad hoc mode only"):
            gb.last_heard()
        assert [m.text for m in bob.history("chat")] == ["Did you visit Delhi?", "Yes"]
        assert bob.locked() == [] and bob.joined()[0].gid == "chat"
        await gb.leave()


async def test_deliver_own_false_hands_only_the_others_messages_back(
        hosts: list[HostDriver]) -> None:
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    async with Node(cfg, pid="pub", deliver_own=False) as pub, Node(cfg, pid="sub") as sub:
        gp = await pub.create_group("chat", order="total")
        gs = await sub.join("chat", order="total", timeout=10)
        for i in range(3):
            await gp.send(f"m{i}")
        got = [(await gs.receive(timeout=10)).text for _ in range(3)]
        assert got == ["m0", "m1", "m2"]
        await gs.send("answer")
        answer = await gp.receive(timeout=10)  # its own three were not handed back
        assert (answer.sender, answer.text) == ("sub", "answer")
        assert gp.pending() == 0


def test_mode_selection_errors() -> None:
    with pytest.raises(UsageError, match="mode"):
        Node(NodeConfig(mode="mesh"))
    with pytest.raises(UsageError, match="hosts"):
        Node(NodeConfig(mode="infra"))
    assert type(Node(NodeConfig())) is AdhocNode
    with pytest.raises(UsageError, match="mode 'adhoc'"):
        AdhocNode(NodeConfig(mode="infra", hosts=tuple(CELLS)))
    with pytest.raises(UsageError, match="mode 'infra'"):
        InfraNode(NodeConfig(hosts=tuple(CELLS)))


def test_the_constructor_is_the_factory_of_both_modes() -> None:
    adhoc = Node(NodeConfig(channel="mem://factory"))
    infra = Node(NodeConfig(mode="infra", hosts=tuple(CELLS)))
    assert isinstance(adhoc, Node) and type(adhoc) is AdhocNode
    assert isinstance(infra, Node) and type(infra) is InfraNode
    assert type(Node(mode="infra", hosts=tuple(CELLS))) is InfraNode  # overrides pick it too
    assert type(Node(NodeConfig(mode=NodeMode.INFRA, hosts=tuple(CELLS)))) is InfraNode
    # The explicit factories: one mode each, whatever the configuration said.
    assert type(Node.adhoc(NodeConfig(mode="infra"), channel="mem://x")) is AdhocNode
    explicit = Node.infra(NodeConfig(), hosts=tuple(CELLS))
    assert type(explicit) is InfraNode and explicit.config.mode == "infra"


@pytest.mark.parametrize("mode", ["adhoc", "infra"])
def test_every_call_of_a_node_not_running_says_so(mode: str) -> None:
    node = Node(NodeConfig(mode=mode, hosts=tuple(CELLS) if mode == "infra" else ()))
    calls: dict[str, Callable[[], object]] = {
        "pid": lambda: node.pid, "group": lambda: node.group("g"),
        "last_heard": lambda: node.last_heard("g"), "locked": node.locked,
        "history": lambda: node.history("g"), "stats": node.stats,
        "network_changed": node.network_changed}
    for name, call in calls.items():
        with pytest.raises(UsageError):  # never AttributeError or the other mode's error
            call()
        assert name in NODE_CALLS


def test_the_modes_are_a_registry_of_their_classes() -> None:
    # m2mc.api registered a factory for each mode; Node itself knows no mode's class.
    assert node_class("adhoc") is AdhocNode and node_class(NodeMode.INFRA) is InfraNode
    with pytest.raises(UsageError, match="mode must be"):
        node_class("server")
    with pytest.raises(TypeError, match="mode 'adhoc' has its factory already"):
        register_mode(NodeMode.ADHOC, lambda: InfraNode)
    assert node_class("adhoc") is AdhocNode


def test_an_adhoc_program_does_not_load_infrastructure_mode() -> None:
    probe = "import sys, m2mc.api; print('m2mc.api.infra' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "False"


def test_a_mode_must_implement_every_call() -> None:
    with pytest.raises(TypeError, match="must implement"):
        type("HalfNode", (Node,), {"start": Node.start})
    with pytest.raises(TypeError, match="must implement"):
        type("HalfGroup", (Group,), {})


def test_reply_parent_travels_in_the_body() -> None:
    assert unpack_body(pack_body(b"x", ROOT)) == (b"x", ROOT)
    assert unpack_body(pack_body(b"y", MessageId("a", 3))) == (b"y", MessageId("a", 3))
    assert unpack_body(pack_body(b"", MessageId("a:b", 9))) == (b"", MessageId("a:b", 9))


@pytest.mark.parametrize("body", [b"", b"\x02x", b"\x01", b"\x01\x00", b"\x01\x00\x00x",
                                  b"\x01\x00\x01x", b"\x01\x00\x09a:1", b"\x01\x00\x03\xff:1",
                                  b"\x01\x00\x03a:0x", b"\x01\x00\x02:1"])
def test_a_body_pack_body_could_not_make_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        unpack_body(body)


async def test_malformed_bodies_are_counted_and_dropped_and_the_member_goes_on(
        hosts: list[HostDriver]) -> None:
    """A body that is not what pack_body makes (an insider's, or anyone's in an
    unauthenticated deployment) used to raise out of the member's event handler:
    the rest of the batch was lost and the member's timer never re-armed."""
    cfg = NodeConfig(mode="infra", hosts=tuple(CELLS))
    async with Node(cfg, pid="alice") as alice, Node(cfg, pid="bob") as bob:
        ga = await alice.create_group("chat", order="total")
        gb = await bob.join("chat", order="total", timeout=10)
        d = alice.driver
        assert d is not None
        for bad in (b"\x01\x00\x01x", b"\x07", b"\x01\x00\x03\xff:1"):
            d.core.send(bad, d.now())
        d.poke()
        first = await ga.send("after the bad ones")
        texts = []
        for _ in range(5):  # more than fits one batch: the member keeps delivering
            texts.append((await gb.receive(timeout=10)).text)
            await ga.send(f"more {len(texts)}")
        assert texts == ["after the bad ones", "more 1", "more 2", "more 3", "more 4"]
        assert bob.stats()["malformed_bodies"] == 3
        assert str(first) == "alice:4"


def test_host_command_line_errors_are_one_line() -> None:
    run = [sys.executable, "-m", "m2mc.cli", "host"]
    r = subprocess.run([*run, "--cell", CELLS[0]], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--listen" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*run, "--listen", "no-such-host:7000", "--cell", CELLS[0]],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "not an IP address" in r.stderr and r.stderr.count("\n") == 1
    r = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--peer" in r.stdout
