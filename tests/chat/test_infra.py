"""The chat in infrastructure mode: ``--infra`` cells, the InfraChatBackend on hosts running
in this process (asyncio HostDrivers on loopback multicast), and the TUI's degraded-mode notice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from m2mc.errors import ConfigError, UsageError
from m2mc.infra_runtime.host_driver import HostDriver, HostSettings
from m2mc.security.keys import GroupKey
from m2mc_chat.backend import ChatBackend, GroupInfo
from m2mc_chat.backend_infra import INFRA_LIMITS, InfraChatBackend, describe_infra
from m2mc_chat.backend_m2mc import M2MCBackend
from m2mc_chat.config import ChatConfig, infra_cells, load_config, parse_infra
from m2mc_chat.fake import demo_network
from m2mc_chat.presence import MemberState
from m2mc_chat.session import ChatSession
from m2mc_chat.testing import make_app, screen_text, settle
from m2mc_chat.ui.browser import GroupBrowser

WAIT = 20.0  # generous: polled, never slept
SCRIPTS = Path(__file__).parent / "scripts"


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loopback_cells(n: int) -> list[str]:
    """``n`` cells as GROUP:PORT on random 239.255.x.y groups (loopback when given to --infra)."""
    rng = random.Random()
    return [f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}:"
            f"{free_port(socket.SOCK_DGRAM)}" for _ in range(n)]


def cell_url(cell: str) -> str:
    return f"udp-multicast://{cell}?iface=127.0.0.1&ttl=1"


# ------------------------------------------------------------------ the --infra value


def test_infra_cells_are_group_port_on_loopback_or_urls() -> None:
    url = "udp-multicast://239.255.20.2:7712?iface=127.0.0.1&ttl=1"
    assert parse_infra(" 239.255.20.1:7711 ,, " + url + ",239.255.20.1:7711") == (
        "udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=1", url)
    assert infra_cells(infra_cells([url])) == (url,)        # idempotent
    for bad in ("127.0.0.1:7001", "host", "239.255.1.1:0", "239.255.1.1:x",
                "udp://127.0.0.1:5000", "udp-multicast://nonsense"):
        with pytest.raises(UsageError, match="--infra"):
            parse_infra(bad)


def test_load_config_normalizes_infra_and_names_the_flag(tmp_path: Path) -> None:
    config = load_config(tmp_path, nick="a", infra=("239.255.20.1:7711",))
    assert config.infra == ("udp-multicast://239.255.20.1:7711?iface=127.0.0.1&ttl=1",)
    with pytest.raises(ConfigError, match=r"^--infra: '10\.0\.0\.1:5' is not a cell"):
        load_config(tmp_path, nick="a", infra=("10.0.0.1:5",))


def test_m2mc_backend_with_cells_is_the_infra_backend(tmp_path: Path) -> None:
    config = ChatConfig(nick="a", device_id="dev", data_dir=tmp_path,
                        infra=("239.255.20.1:7711", "239.255.20.2:7712"))
    backend = M2MCBackend(config)
    assert isinstance(backend, InfraChatBackend) and isinstance(backend, ChatBackend)
    assert backend.limits == INFRA_LIMITS
    assert backend.mode == "infra 239.255.20.1:7711 +1 cell (loopback only)"
    # Its own data_dir keeps the numbering: the device id is the member, run after run.
    assert backend.node_id == M2MCBackend(config).node_id == "dev"
    assert backend._node_config.data_dir == tmp_path / "infra-dev"
    assert backend.known_groups() == [] and backend.joined_groups() == []  # before any network
    assert describe_infra([cell_url("239.255.1.2:3")]) == "infra 239.255.1.2:3 (loopback only)"


# ------------------------------------------------------- the TUI's degraded-mode notice


async def test_the_ui_says_what_infrastructure_mode_lacks(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path, limits=INFRA_LIMITS)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        assert INFRA_LIMITS.notice in screen_text(app)
        await pilot.press("ctrl+g")
        await settle(pilot)
        assert isinstance(app.screen, GroupBrowser)
        assert "The hosts' groups (infrastructure mode)" in screen_text(app)
        await pilot.press("k")  # a keyed group: there are none here (a warning, no prompt)
        await settle(pilot)
        assert isinstance(app.screen, GroupBrowser)


async def test_ad_hoc_mode_shows_no_notice(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        assert "infrastructure mode" not in screen_text(app)
        assert not app.screen.query("#mode-notice")


# ------------------------------------------------------------- on real (in-process) hosts


@pytest.fixture
async def cells() -> AsyncIterator[list[str]]:
    """Two hosts in this process, a coordinator elected; yields their cells as GROUP:PORT."""
    async with _hosts(None) as groups:
        yield groups


DEPLOYMENT_PASSPHRASE = "the hosts' deployment passphrase"


@pytest.fixture
async def keyed_cells() -> AsyncIterator[list[str]]:
    """As ``cells``, the hosts sealing every frame with a deployment key."""
    async with _hosts(GroupKey(passphrase=DEPLOYMENT_PASSPHRASE)) as groups:
        yield groups


@contextlib.asynccontextmanager
async def _hosts(key: GroupKey | None) -> AsyncIterator[list[str]]:
    groups = loopback_cells(2)
    backbone = [("127.0.0.1", free_port()) for _ in groups]
    drivers = [HostDriver(HostSettings(f"H{i}", backbone[i], cell_url(cell), ("127.0.0.1", 0),
                                       [b for j, b in enumerate(backbone) if j != i], key=key))
               for i, cell in enumerate(groups)]
    for d in drivers:
        await d.start()
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT
    while not any(d.core is not None and d.core.coordinator is not None for d in drivers):
        assert loop.time() < end, "no coordinator elected"
        await asyncio.sleep(0.05)
    try:
        yield groups
    finally:
        for d in drivers:
            await d.close()


class Participant:
    def __init__(self, tmp_path: Path, name: str, cells: list[str],
                 key: GroupKey | None = None) -> None:
        config = ChatConfig(nick=name, device_id=name, data_dir=tmp_path / name,
                            infra=tuple(cells), infra_key=key)
        self.session = ChatSession(M2MCBackend(config), name)
        self.pump: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ChatSession:
        await self.session.start()
        self.pump = asyncio.create_task(self.session.run())
        return self.session

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()
        assert self.pump is not None
        await asyncio.wait_for(self.pump, WAIT)


async def test_groups_history_send_reply_presence_leave(tmp_path: Path,
                                                       cells: list[str]) -> None:
    async with Participant(tmp_path, "alice", cells) as alice, \
            Participant(tmp_path, "bob", cells[::-1]) as bob:   # bob starts in the other cell
        assert alice.find_group("lunch") == GroupInfo("lunch", "lunch")  # known by name
        info = await alice.create_group("lunch")
        assert (info.gid, info.desc, info.authenticated) == ("lunch", "lunch", False)
        assert await alice.backend.history("lunch") == []
        question = await alice.send("lunch", "Pizza or curry?")
        await alice.create_group("coffee")           # a second group of the deployment
        await alice.send("coffee", "Espresso at four?")
        await bob.join_group("lunch")                # the hosts' history comes with it
        bob_tree, alice_tree = bob.views["lunch"].tree, alice.views["lunch"].tree
        assert question in bob_tree and "coffee" not in bob.views
        presence = alice.views["lunch"].presence
        assert await alice.wait_until(lambda: bob.node_id in presence, WAIT)  # bob's join
        assert presence.state(bob.node_id, alice.clock()) is MemberState.JOINED
        assert alice.node_id in bob.views["lunch"].presence   # named by the hosts
        answer = await bob.send("lunch", "Curry", reply_to=question)
        assert await alice.wait_until(lambda: answer in alice_tree, WAIT)
        assert alice_tree.parent_of(answer) == question
        assert alice_tree.get(answer).nick == "bob"  # type: ignore[union-attr]
        assert len(alice_tree) == len(bob_tree) == 2      # our own copies were not doubled
        assert alice_tree.transcript() == bob_tree.transcript()
        assert len(alice.views["coffee"].tree) == 1
        await bob.leave_group("lunch")
        assert await alice.wait_until(
            lambda: presence.state(bob.node_id, alice.clock()) is MemberState.LEFT, WAIT)
        assert "lunch" not in bob.views
        await bob.join_group("lunch")                  # and back, once the LEAVE is done
        assert len(bob.views["lunch"].tree) == 2       # the conversation, from the hosts
        later = await alice.send("lunch", "Welcome back")
        assert await bob.wait_until(lambda: later in bob.views["lunch"].tree, WAIT)


async def test_a_keyed_deployment_lets_in_who_has_its_key(tmp_path: Path,
                                                          keyed_cells: list[str]) -> None:
    key = GroupKey(passphrase=DEPLOYMENT_PASSPHRASE)
    async with Participant(tmp_path, "alice", keyed_cells, key) as alice, \
            Participant(tmp_path, "bob", keyed_cells[::-1], key) as bob:
        info = await alice.create_group("lunch")
        assert info.authenticated                       # shown as keyed in the browser
        await bob.join_group("lunch")
        question = await alice.send("lunch", "Pizza or curry?")
        assert await bob.wait_until(lambda: question in bob.views["lunch"].tree, WAIT)
    outsider = Participant(tmp_path, "eve", keyed_cells)  # no key: the hosts ignore her
    backend = outsider.session.backend
    assert isinstance(backend, InfraChatBackend)
    backend.join_timeout = 1.0
    async with outsider as eve:
        with pytest.raises(UsageError, match="are the hosts running"):
            await eve.create_group("lunch")


async def test_join_without_hosts_fails_in_one_line(tmp_path: Path) -> None:
    participant = Participant(tmp_path, "alone", loopback_cells(1))
    backend = participant.session.backend
    assert isinstance(backend, InfraChatBackend)
    backend.join_timeout = 0.5
    async with participant as session:
        with pytest.raises(UsageError, match="are the hosts running"):
            await session.create_group("anything")
        assert session.views == {}


async def _poll(pilot: object, cond: Callable[[], bool], times: int = 400) -> bool:
    for _ in range(times):                       # polled: everything goes through the hosts
        if cond():
            return True
        await pilot.pause(0.05)  # type: ignore[attr-defined]
    return cond()


async def test_the_tui_on_hosts(tmp_path: Path, cells: list[str]) -> None:
    from m2mc_chat.app import ChatApp
    from m2mc_chat.testing import type_text

    config = ChatConfig(nick="alice", device_id="alice", data_dir=tmp_path / "alice",
                        infra=tuple(cells))
    app = ChatApp(config, M2MCBackend)
    async with Participant(tmp_path, "bob", cells) as bob, \
            app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        assert "infra 239.255." in screen_text(app) and INFRA_LIMITS.notice in screen_text(app)
        mid = (await bob.create_group("standup")) and await bob.send("standup",
                                                                      "Who goes first?")
        await pilot.press("ctrl+g", "n")          # alice makes (joins) the same group
        await settle(pilot)
        await type_text(pilot, "standup")
        await pilot.press("enter")
        assert await _poll(pilot, lambda: "bob: Who goes first?" in screen_text(app))
        assert app.main is not None and app.main.current == "standup"
        text = screen_text(app)
        assert "standup  · unauthenticated" in text
        await pilot.press("ctrl+r", "M", "e", "enter")   # answer bob's message
        tree = bob.views["standup"].tree
        assert await bob.wait_until(lambda: len(tree) == 2, WAIT)
        reply = tree.get(tree.nth(2))
        assert reply is not None and (reply.parent, reply.text) == (mid, "Me")
        await pilot.press("ctrl+q")


async def test_a_restarted_member_sees_its_conversation(tmp_path: Path,
                                                        cells: list[str]) -> None:
    """The TUI on hosts, quit and started again on the same data directory: the group
    and its whole conversation are back, what was said meanwhile too, from the hosts."""
    from m2mc_chat.app import ChatApp
    from m2mc_chat.testing import type_text

    config = ChatConfig(nick="alice", device_id="alice", data_dir=tmp_path / "alice",
                        infra=tuple(cells))
    async with Participant(tmp_path, "bob", cells) as bob:
        app = ChatApp(config, M2MCBackend)
        async with app.run_test(size=(110, 30)) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+g", "n")
            await settle(pilot)
            await type_text(pilot, "trip")
            await pilot.press("enter")
            assert await _poll(pilot, lambda: app.main is not None
                               and app.main.current == "trip")
            await pilot.press("ctrl+n")
            await type_text(pilot, "Train or bus?")
            await pilot.press("enter")
            await bob.join_group("trip")
            tree = bob.views["trip"].tree
            assert await bob.wait_until(lambda: len(tree) == 1, WAIT)
            await bob.send("trip", "Train", reply_to=tree.nth(1))
            assert await _poll(pilot, lambda: "bob: Train" in screen_text(app))
            await pilot.press("ctrl+q")
        await bob.send("trip", "It leaves at nine")    # while alice is away
        again = ChatApp(config, M2MCBackend)
        async with again.run_test(size=(110, 30)) as pilot:
            assert await _poll(pilot, lambda: "bob: It leaves at nine" in screen_text(again))
            text = screen_text(again)
            assert "alice: Train or bus?" in text and "bob: Train" in text
            assert again.main is not None and again.main.current == "trip"
            session = again.session
            assert session is not None and session.node_id == "alice"
            assert len(session.views["trip"].tree) == 3
            await pilot.press("ctrl+q")


# ------------------------------------------------- processes: m2mc host and m2mc chat


class Proc:
    """A process whose stderr lines are collected (by a thread) for polling."""

    def __init__(self, cmd: list[str], cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
        self.p = subprocess.Popen(cmd, cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"},
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)

    def tail(self) -> str:
        return "\n".join(self.lines[-30:])


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def coordinator_elected(trace: Path) -> bool:
    for path in trace.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError):
                row = json.loads(line)
                if row["event"] == "elect" and json.loads(row["detail"])["phase"] == "active":
                    return True
    return False


@pytest.mark.multiprocess
def test_three_chat_processes_on_two_hosts_agree(tmp_path: Path) -> None:
    """Two ``m2mc host`` processes (two cells) and three scripted ``m2mc chat --infra``
    participants that reply to each other; every transcript holds the same thread tree."""
    cells = loopback_cells(2)
    backbone = [f"127.0.0.1:{free_port()}" for _ in cells]
    trace = tmp_path / "trace"
    trace.mkdir()
    m2mc = [sys.executable, "-m", "m2mc.cli"]
    procs: list[Proc] = []
    try:
        for i, cell in enumerate(cells):
            peer = backbone[1 - i]
            procs.append(Proc([*m2mc, "host", "--id", f"H{i + 1}", "--listen", backbone[i],
                               "--peer", peer, "--cell", cell_url(cell),
                               "--trace-dir", str(trace)], tmp_path))
        wait_for(lambda: coordinator_elected(trace), 30, "a coordinator")
        chats: dict[str, Proc] = {}
        # One after the other: a member joining later reads what was said before from
        # the hosts (the scripts are ad hoc mode's, unchanged).
        for name, script, order in (("alice", "alice.txt", cells),
                                    ("bob", "bob.txt", cells[::-1]),     # the other cell
                                    ("carol", "carol.txt", cells)):
            chats[name] = proc = Proc(
                [*m2mc, "-v", "chat", "--nick", name, "--device-id", name,
                 "--data-dir", str(tmp_path / name), "--infra", ",".join(order),
                 "--script", str(SCRIPTS / script), "--step-timeout", "30",
                 "--transcript", str(tmp_path / f"{name}.json")], tmp_path)
            procs.append(proc)
            wait_for(lambda proc=proc, name=name: proc.said(f"[{name}] step 2:")  # type: ignore[misc]
                     or proc.p.poll() is not None, 40, f"{name} to join")
        for name, proc in chats.items():
            wait_for(lambda proc=proc: proc.p.poll() is not None, 60,  # type: ignore[misc]
                     f"{name} to finish its script")
            assert proc.p.returncode == 0, (name, proc.tail())
    finally:
        for proc in reversed(procs):
            proc.stop()
    transcripts = {name: json.loads((tmp_path / f"{name}.json").read_text())
                   for name in ("alice", "bob", "carol")}
    trees = [t["tree"] for t in transcripts.values()]
    assert trees[0] == trees[1] == trees[2]
    assert all(t["group"] == "lunch" for t in transcripts.values())
    assert transcripts["alice"]["node"] == "alice"

    def shape(nodes: list[dict[str, object]]) -> list[object]:
        return [(n["nick"], n["text"], shape(n["children"])) for n in nodes]  # type: ignore[arg-type]

    assert shape(trees[0]) == [
        ("alice", "Where shall we eat today?", [
            ("bob", "Pizza?", [("carol", "Pizza is fine", [("alice", "Then pizza it is", [])])]),
            ("bob", "I will book a table", [])]),
        ("carol", "Anyone for coffee after?", [])]
