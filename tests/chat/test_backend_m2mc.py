"""The chat on the real group layer (m2mc.api.Node) over an in-process mem:// channel."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import m2mc_chat.backend_infra  # noqa: F401 (registers the infra variant, as `m2mc chat` does)
from m2mc.errors import ConfigError
from m2mc.security import KeyRequiredError
from m2mc.security.keys import GroupKey
from m2mc_chat.backend import ChatBackend
from m2mc_chat.backend_m2mc import M2MCBackend, describe_channel
from m2mc_chat.codec import encode_body
from m2mc_chat.config import ChatConfig
from m2mc_chat.presence import MemberState
from m2mc_chat.session import ChatSession

WAIT = 10.0  # generous: polled, never slept
HEARD_WAIT = 30.0  # a silent member's status: at least every 10 s (group.instance.STATUS_KEEPALIVE)


class Participant:
    def __init__(self, session: ChatSession) -> None:
        self.session = session
        self.pump: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ChatSession:
        await self.session.start()
        self.pump = asyncio.create_task(self.session.run())
        return self.session

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()
        assert self.pump is not None
        await asyncio.wait_for(self.pump, WAIT)


def participant(tmp_path: Path, channel: str, name: str, *,
                clock: Callable[[], float] = time.time,
                keys: dict[str, GroupKey] | None = None) -> Participant:
    config = ChatConfig(nick=name, device_id=name, data_dir=tmp_path / name, channel=channel,
                        keys=keys or {})
    return Participant(ChatSession(M2MCBackend(config), name, clock=clock, keys=config.keys))


class ManualClock:
    """The chat's wall clock, moved by the test (the network still runs in real time)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Poll a condition of the real network (no event to wait on), within WAIT seconds."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.02)


@pytest.fixture
def channel() -> str:
    return f"mem://chat-{uuid.uuid4().hex}"


def test_m2mc_backend_is_a_chat_backend(tmp_path: Path, channel: str) -> None:
    config = ChatConfig(nick="a", device_id="a", data_dir=tmp_path, channel=channel)
    assert isinstance(M2MCBackend(config), ChatBackend)
    with pytest.raises(ConfigError, match="is not a cell"):   # a backbone address, not a cell
        M2MCBackend(ChatConfig(nick="a", device_id="a", data_dir=tmp_path,
                               infra=("127.0.0.1:7001",)))
    assert describe_channel("udp-multicast://239.255.77.77:7777?iface=127.0.0.1&ttl=1") == \
        "ad hoc 239.255.77.77:7777 (loopback only)"
    assert describe_channel("udp-multicast://239.255.77.77:7777?iface=lo&ttl=1") == \
        "ad hoc 239.255.77.77:7777 (loopback only)"
    assert describe_channel("udp-multicast://239.255.77.77:7777?iface=wlan0&ttl=1") == \
        "ad hoc 239.255.77.77:7777 on wlan0"
    assert describe_channel("udp-multicast://239.255.77.77:7777?iface=10.1.2.3&ttl=1") == \
        "ad hoc 239.255.77.77:7777"


async def test_create_discover_join_reply_leave(tmp_path: Path, channel: str) -> None:
    async with participant(tmp_path, channel, "alice") as alice, \
            participant(tmp_path, channel, "bob") as bob:
        info = await alice.create_group("lunch")
        assert await bob.wait_until(lambda: bob.find_group("lunch") is not None, WAIT)
        question = await alice.send(info.gid, "Pizza or curry?")
        await bob.join_group(info.gid)
        bob_tree = bob.views[info.gid].tree
        assert await bob.wait_until(lambda: question in bob_tree, WAIT)   # caught up
        answer = await bob.send(info.gid, "Curry", reply_to=question)
        alice_tree = alice.views[info.gid].tree
        assert await alice.wait_until(lambda: answer in alice_tree, WAIT)
        assert alice_tree.parent_of(answer) == question
        assert alice_tree.get(answer).nick == "bob"  # type: ignore[union-attr]
        assert alice_tree.transcript() == bob_tree.transcript()
        presence = alice.views[info.gid].presence
        assert await alice.wait_until(lambda: "bob" in presence, WAIT)
        await bob.leave_group(info.gid)
        assert await alice.wait_until(
            lambda: presence.state("bob", alice.clock()) is MemberState.LEFT, WAIT)


async def test_restart_brings_back_groups_and_history(tmp_path: Path, channel: str) -> None:
    async with participant(tmp_path, channel, "alice") as alice:
        info = await alice.create_group("diary")
        first = await alice.send(info.gid, "day one")
        await alice.send(info.gid, "and a follow-up", reply_to=first)
        before = alice.views[info.gid].tree.transcript()
    async with participant(tmp_path, channel, "alice") as again:
        assert list(again.views) == [info.gid]
        assert again.views[info.gid].info.desc == "diary"
        assert again.views[info.gid].tree.transcript() == before
        third = await again.send(info.gid, "day two")
        assert third == "alice:3"          # identities never reused after a restart


async def test_the_tui_on_the_real_group_layer(tmp_path: Path, channel: str) -> None:
    from m2mc_chat.app import ChatApp
    from m2mc_chat.testing import screen_text, settle, type_text

    config = ChatConfig(nick="alice", device_id="alice", data_dir=tmp_path / "alice",
                        channel=channel)
    app = ChatApp(config, M2MCBackend)
    async with participant(tmp_path, channel, "bob") as bob, \
            app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g", "n")
        await settle(pilot)
        await type_text(pilot, "standup")
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("ctrl+n")
        await type_text(pilot, "Who goes first?")
        await pilot.press("enter")
        await settle(pilot)
        assert await bob.wait_until(lambda: bob.find_group("standup") is not None, WAIT)
        gid = bob.find_group("standup").gid  # type: ignore[union-attr]
        await bob.join_group(gid)
        assert await bob.wait_until(lambda: "alice:1" in bob.views[gid].tree, WAIT)
        await bob.send(gid, "Me", reply_to="alice:1")
        for _ in range(200):                    # polled; the network is real
            if "bob: Me" in screen_text(app):
                break
            await pilot.pause(0.05)
        text = screen_text(app)
        assert "alice: Who goes first?" in text and "└─ ● bob: Me" in text
        assert "ad hoc" in text
        await pilot.press("ctrl+q")


async def test_keyed_groups_show_as_authenticated(tmp_path: Path, channel: str) -> None:
    """Issue 9: the chat marks groups by whether their messages are authenticated."""
    from m2mc.errors import UsageError

    async with participant(tmp_path, channel, "alice") as alice, \
            participant(tmp_path, channel, "bob") as bob:
        backend = alice.backend
        assert isinstance(backend, M2MCBackend)
        try:
            await backend.node.create_group("secret", key=bytes(range(32)))  # type: ignore[call-arg]
        except TypeError:
            pytest.skip("this group layer has no keyed groups yet")
        await alice.create_group("open")
        by_desc = {g.desc: g for g in backend.joined_groups()}
        assert by_desc["secret"].authenticated and not by_desc["open"].authenticated
        assert await bob.wait_until(lambda: bob.find_group("secret") is not None
                                    and bob.find_group("open") is not None, WAIT)
        assert bob.find_group("secret").authenticated  # type: ignore[union-attr]
        assert not bob.find_group("open").authenticated  # type: ignore[union-attr]
        with pytest.raises(UsageError):        # the chat has no key to give: refused, no crash
            await bob.join_group(bob.find_group("secret").gid)  # type: ignore[union-attr]
        assert "secret" not in {v.info.desc for v in bob.views.values()}


async def test_silent_members_stay_present_and_stopped_ones_go_silent(
        tmp_path: Path, channel: str) -> None:
    """Presence from the group layer's heartbeats: bob never writes and stays present;
    carol stops (no leave) and turns "not heard from". Time is driven: the chat's clock
    jumps past the 30 s threshold twice; after each jump the test waits until bob has
    been heard from again, which only his heartbeats can cause."""
    clock = ManualClock()
    carol = participant(tmp_path, channel, "carol")
    async with participant(tmp_path, channel, "alice", clock=clock) as alice, \
            participant(tmp_path, channel, "bob") as bob:
        carol_session = await carol.__aenter__()
        try:
            info = await alice.create_group("standup")
            for other in (bob, carol_session):
                assert await other.wait_until(lambda o=other: o.find_group("standup")  # type: ignore[misc]
                                              is not None, WAIT)
                await other.join_group(info.gid)
            presence = alice.views[info.gid].presence
            assert await alice.wait_until(lambda: "bob" in presence and "carol" in presence,
                                          WAIT)
        finally:
            await carol.__aexit__(None, None, None)          # gone: no leave, no more packets
        backend = alice.backend
        assert isinstance(backend, M2MCBackend)
        group = backend.node.group(info.gid)
        await until(lambda: time.time() - group.last_heard()["carol"] > 1.0,
                    "carol's last packets arrived")
        assert alice.silent_after == 30.0
        for _ in range(2):
            clock.now += 31.0
            assert await alice.wait_until(
                lambda j=clock.now: (presence.last_heard("bob") or 0.0) > j - 10.0, HEARD_WAIT), \
                "bob's heartbeats keep him heard from"
            assert presence.state("bob", clock.now) is MemberState.JOINED
        assert presence.state("carol", clock.now) is MemberState.SILENT
        assert not any(d.author == "bob" for d in await backend.history(info.gid))
        rows = {m.pid: m.state for m in presence.members(clock.now)}
        assert rows == {"alice": MemberState.JOINED, "bob": MemberState.JOINED,
                        "carol": MemberState.SILENT}


async def test_after_a_restart_live_members_show_as_present(tmp_path: Path,
                                                             channel: str) -> None:
    """A restarted chat learns presence from the network, not from new messages."""
    clock = ManualClock()
    async with participant(tmp_path, channel, "bob") as bob:
        async with participant(tmp_path, channel, "alice", clock=clock) as alice:
            info = await alice.create_group("diary")
            assert await bob.wait_until(lambda: bob.find_group("diary") is not None, WAIT)
            await bob.join_group(info.gid)
            assert await alice.wait_until(lambda: "bob" in alice.views[info.gid].presence,
                                          WAIT)
        clock.now += 3600.0                      # an hour later, bob has said nothing
        async with participant(tmp_path, channel, "alice", clock=clock) as again:
            presence = again.views[info.gid].presence
            assert "bob" in presence             # from the membership kept in the log
            assert await again.wait_until(
                lambda: presence.state("bob", clock.now) is MemberState.JOINED, HEARD_WAIT)
            assert again.views[info.gid].tree.transcript() == []


async def test_keyed_groups_with_configured_keys_and_typed_passphrases(
        tmp_path: Path, channel: str) -> None:
    """Issue 9 from the chat: create with a configured key, join with a typed passphrase;
    after a restart the group reopens only with its key."""
    secret = GroupKey(passphrase="correct horse battery staple")
    async with participant(tmp_path, channel, "alice", keys={"secret": secret}) as alice:
        async with participant(tmp_path, channel, "bob") as bob:
            info = await alice.create_group("secret")        # keyed: a key is configured
            assert info.authenticated
            question = await alice.send(info.gid, "Who has the key?")
            assert await bob.wait_until(lambda: bob.find_group("secret") is not None, WAIT)
            assert bob.needs_key(info.gid)
            with pytest.raises(KeyRequiredError, match="is keyed: give its key"):
                await bob.join_group(info.gid)
            await bob.join_group(info.gid, bob.passphrase_key("correct horse battery staple"))
            assert await bob.wait_until(lambda: question in bob.views[info.gid].tree, WAIT)
            assert bob.views[info.gid].info.authenticated
        # bob restarts without the key: the group stays closed, offered in the browser
        async with participant(tmp_path, channel, "bob") as bob:
            assert info.gid not in bob.views
            assert bob.groups[info.gid].authenticated and bob.needs_key(info.gid)
        # with its key configured (by description) it comes back, history and all
        async with participant(tmp_path, channel, "bob", keys={"secret": secret}) as bob:
            assert info.gid in bob.views
            assert question in bob.views[info.gid].tree
            answer = await bob.send(info.gid, "I do", reply_to=question)
            assert await alice.wait_until(lambda: answer in alice.views[info.gid].tree, WAIT)


async def test_catch_up_progress_from_the_real_group_layer(tmp_path: Path, channel: str) -> None:
    """A late joiner is caught up by MSP; the chat counts down what is still coming
    ("synchronizing 1,234 messages") and ends with everything and nothing pending."""
    from m2mc_chat.presence import sync_status
    from m2mc_chat.session import SessionChange, SyncChanged

    count = 1500
    async with participant(tmp_path, channel, "alice") as alice, \
            participant(tmp_path, channel, "bob") as bob:
        info = await alice.create_group("archive")
        backend = alice.backend
        assert isinstance(backend, M2MCBackend)
        group = backend.node.group(info.gid)
        parent = None
        for i in range(count):       # straight to the group layer: quicker than the chat
            mid = await group.send(encode_body("alice", f"note {i}", 0.0),
                                   reply_to=parent if i % 3 else None)
            parent = mid
        assert await alice.wait_until(lambda: len(alice.views[info.gid].tree) == count, WAIT)
        pending: list[int] = []

        def note(change: SessionChange) -> None:
            if isinstance(change, SyncChanged) and change.gid == info.gid:
                pending.append(change.pending)

        bob.subscribe(note)
        assert await bob.wait_until(lambda: bob.find_group("archive") is not None, WAIT)
        await bob.join_group(info.gid)
        tree = bob.views[info.gid].tree
        assert await bob.wait_until(lambda: len(tree) == count and bool(pending)
                                    and pending[-1] == 0, 30.0), (len(tree), pending[-5:])
        assert max(pending) > 0, pending
        assert sync_status(max(pending)).startswith("synchronizing ")
        assert bob.views[info.gid].pending_sync == 0
        assert tree.transcript() == alice.views[info.gid].tree.transcript()


async def test_back_in_range_the_browser_shows_groups_made_meanwhile(
        tmp_path: Path, channel: str) -> None:
    """Issue 15: alice's device is out of range while bob creates a group (she misses its
    announcement); when her network comes back (``Node.network_changed``, what the
    interface watcher calls), her node advertises and the open group browser shows the
    new group by itself, with a notice; no key pressed, no restart."""
    from m2mc.api import NodeConfig
    from m2mc.group.config import GroupConfig
    from m2mc.transport.mem import MemChannel
    from m2mc_chat.app import ChatApp
    from m2mc_chat.backend_m2mc import BACK_IN_RANGE
    from m2mc_chat.testing import screen_text, settle

    config = ChatConfig(nick="alice", device_id="alice", data_dir=tmp_path / "alice",
                        channel=channel)
    backends: list[M2MCBackend] = []

    def factory(cfg: ChatConfig) -> M2MCBackend:
        # reconnect_holdoff: a return counts even this soon after the start.
        backend = M2MCBackend(cfg, node_config=NodeConfig(
            channel=cfg.channel or channel, data_dir=cfg.data_dir / "node",
            group=GroupConfig(reconnect_holdoff=0.1)))
        backends.append(backend)
        return backend

    notices: list[str] = []
    app = ChatApp(config, factory)
    async with participant(tmp_path, channel, "bob") as bob, \
            app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        assert app.session is not None
        app.session.subscribe(lambda change: notices.append(getattr(change, "text", "")))
        await pilot.press("ctrl+g")
        await settle(pilot)
        node = backends[0].node
        radio = node._drv().channel
        assert isinstance(radio, MemChannel) and radio._members is not None
        bus = radio._members
        bus.discard(radio)  # alice walks out of range
        await bob.create_group("made while away")
        for _ in range(20):
            await pilot.pause(0.05)
        assert "made while away" not in screen_text(app)
        bus.add(radio)  # ... and back
        node.network_changed()
        for _ in range(200):  # polled; the network is real
            if "made while away" in screen_text(app):
                break
            await pilot.pause(0.05)
        assert "made while away" in screen_text(app)  # the browser redrew by itself
        assert BACK_IN_RANGE in notices
        await pilot.press("escape")
        await pilot.press("ctrl+q")


async def test_the_tui_names_members_who_never_wrote_on_the_real_group_layer(
        tmp_path: Path, channel: str) -> None:
    """Nicks from the first packet (the group layer's display names): the browser names
    bob, who created a group and wrote nothing; so does the member list after joining,
    carol from her JOIN, and her new nick after she changes it, all without a message."""
    from m2mc_chat.app import ChatApp
    from m2mc_chat.testing import screen_text, settle

    def quiet(nick: str, device: str) -> Participant:
        config = ChatConfig(nick=nick, device_id=device, data_dir=tmp_path / device,
                            channel=channel)
        return Participant(ChatSession(M2MCBackend(config), nick))

    async def shows(pilot, *wanted: str, unwanted: str) -> None:  # type: ignore[no-untyped-def]
        for _ in range(int(WAIT / 0.05)):              # polled: the network is real
            text = screen_text(pilot.app)
            if all(w in text for w in wanted) and unwanted not in text:
                return
            await pilot.pause(0.05)
        raise AssertionError(f"{wanted} never shown without {unwanted!r}:\n{text}")

    config = ChatConfig(nick="alice", device_id="a11ce000", data_dir=tmp_path / "alice",
                        channel=channel)
    app = ChatApp(config, M2MCBackend)
    async with quiet("bob", "b0b0b0b0") as bob, app.run_test(size=(110, 30)) as pilot:
        info = await bob.create_group("standup")
        await settle(pilot)
        await pilot.press("ctrl+g")
        # The browser row: description, members by nick (bob's), then the group id.
        await shows(pilot, f"1  bob  {info.gid}", unwanted=f"b0b0b0b0  {info.gid}")
        await pilot.press("j")
        await shows(pilot, "● alice (you)", "bob", unwanted="b0b0b0b0")
        async with quiet("carol", "ca401111") as carol:
            assert await carol.wait_until(lambda: carol.find_group("standup") is not None,
                                          WAIT)
            await carol.join_group(info.gid)
            await shows(pilot, "carol", unwanted="ca401111")
            carol.backend.set_nick("caroline")               # a status tells it at once
            await shows(pilot, "caroline", unwanted="ca401111")
        assert not (await app.session.backend.history(info.gid))  # type: ignore[union-attr]
        await pilot.press("ctrl+q")
