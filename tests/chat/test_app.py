"""The TUI driven by keys (Textual Pilot), on the in-process fake network."""

from __future__ import annotations

import asyncio
from pathlib import Path

from m2mc_chat.app import ChatApp
from m2mc_chat.backend import Delivered, SyncProgress
from m2mc_chat.config import load_config
from m2mc_chat.fake import DEMO_KEYS, FakeBackend, FakeNetwork, FakeStore, demo_network
from m2mc_chat.session import ChatSession
from m2mc_chat.testing import NOW, deep_chain, make_app, screen_text, settle, type_text
from m2mc_chat.ui.browser import GroupBrowser
from m2mc_chat.ui.dialogs import ConfirmDialog, TextPrompt
from m2mc_chat.ui.help import HelpScreen
from m2mc_chat.ui.main_screen import MainScreen

SIZE = (110, 32)


def main(app: ChatApp) -> MainScreen:
    assert app.main is not None
    return app.main


def backend(app: ChatApp) -> FakeBackend:
    return app.backends[0]  # type: ignore[attr-defined,no-any-return]


def conversation_pane(app: ChatApp) -> list[str]:
    """The groups list and the thread tree, without members (whose presence is live)."""
    return [line[:82].rstrip() for line in screen_text(app).splitlines()[1:-6]]


async def open_browser_on(pilot, desc: str) -> GroupBrowser:  # type: ignore[no-untyped-def]
    await pilot.press("ctrl+g")
    await settle(pilot)
    browser = pilot.app.screen
    assert isinstance(browser, GroupBrowser)
    for _ in range(10):
        gid = browser.selected_gid()
        if gid and browser.session.groups[gid].desc == desc:
            return browser
        await pilot.press("down")
    raise AssertionError(f"no row {desc!r} in the browser")


async def test_create_a_group_and_another_member_discovers_it(tmp_path: Path) -> None:
    net = FakeNetwork()
    bob = FakeBackend(net, "bob")
    await bob.start()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "You are in no group yet" in screen_text(app)
        await pilot.press("ctrl+g", "n")
        await settle(pilot)
        assert isinstance(app.screen, TextPrompt)
        await type_text(pilot, "lunch plans")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        text = screen_text(app)
        assert "lunch plans" in text and "You are in no group yet" not in text
        assert [g.desc for g in bob.known_groups()] == ["lunch plans"]
        assert main(app).current == bob.known_groups()[0].gid
        assert bob.known_groups()[0].members == ("alice",)


async def test_join_a_discovered_group_shows_its_threads_and_members(tmp_path: Path) -> None:
    net, gids = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "travel stories")
        await pilot.press("j")
        await settle(pilot)
        screen = main(app)
        assert screen.current == gids["travel"]
        tree = screen.conversation
        top = [node.data for node in tree.root.children]
        assert top == ["carol:1", "carol:2", "dave:2"]
        node = tree.node_for("carol:1")
        assert node is not None and [c.data for c in node.children] == ["bob:1"]
        text = screen_text(app)
        assert "Did you visit Delhi?" in text and "Yes! The Red Fort at dawn." in text
        assert "◌ gita  not heard from" in text
        assert "○ hari  left" in text
        assert "● alice (you)" in text


async def test_reply_to_the_selected_message_lands_under_it_everywhere(tmp_path: Path) -> None:
    net, gids = demo_network()
    carol = ChatSession(FakeBackend(net, "carol2"), "carol", clock=lambda: NOW, keys=DEMO_KEYS)
    await carol.start()
    await carol.join_group(gids["travel"])
    pump = asyncio.create_task(carol.run())
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "travel stories")
        await pilot.press("j")
        await settle(pilot)
        tree = main(app).conversation
        for _ in range(10):
            if tree.cursor_mid == "carol:2":
                break
            await pilot.press("down")
        assert tree.cursor_mid == "carol:2"     # "Did you visit Chennai?"
        await pilot.press("ctrl+r")
        assert "replying to carol: Did you visit Chennai?" in screen_text(app)
        await type_text(pilot, "Not yet")
        await pilot.press("enter")
        await settle(pilot)
        gid, mid, reply_to = backend(app).sent[-1]
        assert (gid, reply_to) == (gids["travel"], "carol:2")
        chennai = tree.node_for("carol:2")
        assert chennai is not None and mid in [c.data for c in chennai.children]
        assert tree.cursor_mid == mid            # the cursor follows what we wrote
        assert "New thread in travel stories" in screen_text(app)
    assert await carol.wait_until(lambda: mid in carol.views[gid].tree, 5)
    assert carol.views[gid].tree.parent_of(mid) == "carol:2"
    await carol.close()
    await pump


async def test_a_thread_that_arrives_out_of_order_renders_in_place(tmp_path: Path) -> None:
    net = FakeNetwork()
    gid = net.add_group("quiz", "carol")
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "quiz")
        await pilot.press("j")
        await settle(pilot)
        question = net.post(gid, "carol", "carol", "Capital of Australia?", deliver=False,
                            ts=NOW - 30)
        answer = net.post(gid, "bob", "bob", "Canberra", parent=question.mid, deliver=False,
                          ts=NOW - 20)
        thanks = net.post(gid, "carol", "carol", "Right!", parent=answer.mid, deliver=False,
                          ts=NOW - 10)
        backend(app).inject(thanks)      # the grandchild first,
        await settle(pilot)
        text = screen_text(app)
        assert f"(message {answer.mid} not received yet)" in text
        assert "Right!" in text
        backend(app).inject(question)    # then the root,
        backend(app).inject(answer)      # then the middle.
        await settle(pilot)
        text = screen_text(app)
        assert "not received yet" not in text
        tree = main(app).conversation
        assert [n.data for n in tree.root.children] == [question.mid]
        q = tree.node_for(question.mid)
        assert q is not None and [c.data for c in q.children] == [answer.mid]
        a = tree.node_for(answer.mid)
        assert a is not None and [c.data for c in a.children] == [thanks.mid]
        order = [text.index(s) for s in ("Capital of Australia?", "Canberra", "Right!")]
        assert order == sorted(order)


async def test_leaving_asks_first_and_the_others_see_it(tmp_path: Path) -> None:
    net, gids = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "lunch")
        await pilot.press("j")
        await settle(pilot)
        browser = await open_browser_on(pilot, "lunch")
        await pilot.press("l")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")                       # changed my mind
        await settle(pilot)
        assert pilot.app.screen is browser
        assert gids["lunch"] in main(app).session.views
        await pilot.press("l")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert gids["lunch"] not in main(app).session.views
        assert "alice" in net.group_info(gids["lunch"]).left
        await pilot.press("escape")
        await settle(pilot)
        assert "You are in no group yet" in screen_text(app)


async def test_belong_to_several_groups_and_switch(tmp_path: Path) -> None:
    net, gids = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for desc in ("lunch", "travel stories"):
            await open_browser_on(pilot, desc)
            await pilot.press("j")
            await settle(pilot)
        screen = main(app)
        assert screen.current == gids["travel"]
        await pilot.press("f7")
        await settle(pilot)
        assert screen.current == gids["lunch"]
        assert "Pizza or curry today?" in screen_text(app)
        net.post(gids["travel"], "bob", "bob", "Back from Delhi!", ts=NOW)
        await settle(pilot)
        assert "travel stories (8)" in screen_text(app)   # 7 unread + the new one


async def test_fold_threads_jump_to_unread_and_mark_read(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "travel stories")
        await pilot.press("j")
        await settle(pilot)
        tree = main(app).conversation
        assert tree.cursor_mid == "carol:1"     # the first unread, now read
        view = main(app).view
        assert view is not None and not view.tree.is_unread("carol:1")
        await pilot.press("enter")              # fold Delhi's thread
        await settle(pilot)
        assert view.tree.is_collapsed("carol:1")
        assert "Did you visit Delhi?  15:06  [+3, 3 new]" in screen_text(app)
        assert "Lahori Gate" not in screen_text(app)
        await pilot.press("ctrl+o")             # the next unread is inside the fold:
        await settle(pilot)
        assert tree.cursor_mid == "bob:1"       # the thread unfolds to show it
        assert not view.tree.is_collapsed("carol:1")
        assert "Lahori Gate" in screen_text(app)
        await pilot.press("ctrl+o", "ctrl+o")
        await settle(pilot)
        assert tree.cursor_mid == "bob:2"
        assert view.tree.unread_count == 4
        await pilot.press("ctrl+l")
        await settle(pilot)
        assert view.tree.unread_count == 0
        assert "● " not in screen_text(app).replace("● alice", "").replace("● bob", "") \
            .replace("● carol", "").replace("● dave", "")
        await pilot.press("f5")
        await settle(pilot)
        assert "Lahori Gate" not in screen_text(app) and "[+3]" in screen_text(app)
        assert tree.cursor_mid == "carol:1"     # on the top of the thread it was in
        await pilot.press("f6")
        await settle(pilot)
        assert "Lahori Gate" in screen_text(app)


async def test_catch_up_progress_in_the_status_bar(tmp_path: Path) -> None:
    net = FakeNetwork()
    gid = net.add_group("busy", "carol")
    for i in range(1240):
        net.post(gid, "carol", "carol", f"message {i}", ts=NOW - 2000 + i)
    app = make_app(net, tmp_path, catch_up_batch=6)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "busy")
        await pilot.press("j")
        await settle(pilot)
        assert "synchronizing 1,234 messages" in screen_text(app)
        backend(app).inject(Delivered(gid, "carol:7", "", "carol", net._group(gid).log[6].payload))
        backend(app).inject(SyncProgress(gid, 0))
        await settle(pilot)
        assert "synchronizing" not in screen_text(app)


async def test_first_run_asks_for_a_nick_and_remembers_it(tmp_path: Path) -> None:
    net = FakeNetwork()
    app = make_app(net, tmp_path, node="d3c0", nick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TextPrompt)
        assert "Choose the name the others will see" in screen_text(app)
        await pilot.press("escape")             # cannot skip it
        await pilot.press("enter")              # nor leave it empty
        await settle(pilot)
        assert isinstance(app.screen, TextPrompt)
        assert "the nick must not be empty" in screen_text(app)
        await type_text(pilot, "zoe")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert "zoe @ d3c0" in screen_text(app)
    saved = load_config(tmp_path / "d3c0")
    assert (saved.nick, saved.device_id) == ("zoe", "d3c0")


async def test_help_screen_lists_the_keys(tmp_path: Path) -> None:
    app = make_app(FakeNetwork(), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        footer = screen_text(app).splitlines()[-1]
        for label in ("^r Reply", "^n New thread", "^g Groups", "F1 Help", "^q Quit"):
            assert label in footer
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.resize_terminal(110, 60)    # all of it at once (it scrolls otherwise)
        await settle(pilot)
        text = screen_text(app)
        for line in ("Reply to the selected message", "Fold or unfold the thread",
                     "Leave the selected group (asks first)"):
            assert line in text
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_restart_shows_the_conversation_as_it_was(tmp_path: Path) -> None:
    net, gids = demo_network()
    store = FakeStore()
    app = make_app(net, tmp_path, store=store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "travel stories")
        await pilot.press("j")
        await settle(pilot)
        await pilot.press("enter")   # fold Delhi's thread (the cursor is on it)
        await settle(pilot)
        before = conversation_pane(app)
        await pilot.press("ctrl+q")
    again = make_app(net, tmp_path, store=store)
    async with again.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert main(again).current == gids["travel"]
        assert conversation_pane(again) == before
        assert "▶   carol: Did you visit Delhi?  15:06  [+3, 3 new]" in "\n".join(before)


async def test_a_network_that_cannot_start_exits_2_and_saves_nothing(tmp_path: Path) -> None:
    from m2mc.errors import ConfigError
    from m2mc_chat.config import ChatConfig

    class Unreachable(FakeBackend):
        async def start(self) -> None:
            raise ConfigError("cannot join multicast group 239.255.9.9:7777 on 10.9.9.9: "
                              "No such device")

    config = ChatConfig(nick=None, device_id="d1", data_dir=tmp_path / "d")
    app = ChatApp(config, lambda cfg: Unreachable(FakeNetwork(), cfg.device_id),
                  clock=lambda: NOW, save_config=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_text(pilot, "zoe")           # the first-run nick prompt
        await pilot.press("enter")
        await settle(pilot)
    assert app.return_code == 2
    assert app.start_error == ("cannot start the network: cannot join multicast group "
                               "239.255.9.9:7777 on 10.9.9.9: No such device")
    assert not (tmp_path / "d").exists()        # neither chat.toml nor read marks


async def test_a_deep_thread_stays_on_screen(tmp_path: Path) -> None:
    app = make_app(deep_chain(), tmp_path)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "rabbit hole")
        await pilot.press("j")
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        tree = main(app).conversation
        assert tree.cursor_mid == "bob:15"                  # level 29, the deepest
        lines = screen_text(app).splitlines()
        deep = [line for line in lines if "↳" in line and "└─" in line]
        assert len(deep) >= 15
        # Indented 5 levels at most: every deeper reply starts in the same column ...
        assert len({line.index("└─") for line in deep}) == 1
        assert "↳ 29 bob: level 29" in deep[-1]
        # ... so nothing needs sideways scrolling but long texts, and the selected
        # message is readable in full under the tree.
        assert tree.virtual_size.width < 80
        assert "bob  15:03  ↳ 29  level 29: and why is that so, exactly?" in "\n".join(lines)
        await pilot.press("shift+left")                     # its parent, one level up
        await settle(pilot)
        assert tree.cursor_mid == "carol:15"
        assert "carol  15:03  ↳ 28  level 28:" in screen_text(app)
        for _ in range(4):
            await pilot.press("up")
        await pilot.press("enter")                          # fold level 24: 25-29 go
        await settle(pilot)
        text = screen_text(app)
        assert "↳ 24 carol: level 24" in text and "[+5 folded]" in text
        assert "↳ 25" not in text


async def test_open_a_group_shows_the_selected_message_in_full(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "travel stories")
        await pilot.press("j")
        await settle(pilot)
        assert "carol  15:06  Did you visit Delhi?" in screen_text(app)
        await pilot.press("down")
        await settle(pilot)
        assert "bob  15:07  ↳ 1  Yes! The Red Fort at dawn." in screen_text(app)


async def test_the_browser_names_members_by_nick_where_known(tmp_path: Path) -> None:
    """Members of groups we have not joined: nicks learned from any group's messages."""
    net = FakeNetwork()
    quiz = net.add_group("quiz", "c0ffee01")
    net.post(quiz, "c0ffee01", "carol", "Capital of Australia?", ts=NOW - 30)
    net.add_group("poker night", "d00d0002", members=("c0ffee01",))
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        row = next(line for line in screen_text(app).splitlines() if "poker night" in line)
        assert "d00d0002, c0ffee01" in row                 # nobody known yet: device ids
        await pilot.press("escape")
        await open_browser_on(pilot, "quiz")
        await pilot.press("j")                              # carol's message names her
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        row = next(line for line in screen_text(app).splitlines() if "poker night" in line)
        assert "d00d0002, carol" in row
        quiz_row = next(line for line in screen_text(app).splitlines() if "quiz" in line)
        assert "carol, alice" in quiz_row


async def test_joining_a_keyed_group_asks_for_its_passphrase(tmp_path: Path) -> None:
    from m2mc.security.keys import GroupKey

    net, gids = demo_network()                  # "travel stories" is keyed
    app = make_app(net, tmp_path, keys={})      # and we were given no key for it
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_browser_on(pilot, "travel stories")
        await pilot.press("j")
        await settle(pilot)
        assert isinstance(app.screen, TextPrompt)
        assert "travel stories is a keyed group" in screen_text(app)
        await pilot.press("escape")             # changed my mind: not joined
        await settle(pilot)
        assert isinstance(app.screen, GroupBrowser)
        assert gids["travel"] not in main(app).session.views
        await pilot.press("j")
        await settle(pilot)
        await type_text(pilot, "red fort")
        assert "red fort" not in screen_text(app)   # typed as a password
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert main(app).current == gids["travel"]
        assert backend(app).keys_used[gids["travel"]] == GroupKey(passphrase="red fort")
        assert "Did you visit Delhi?" in screen_text(app)


async def test_create_a_keyed_group_from_the_browser(tmp_path: Path) -> None:
    net = FakeNetwork()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g", "k")
        await settle(pilot)
        await type_text(pilot, "ops")
        await pilot.press("enter")
        await settle(pilot)
        assert "ops: passphrase" in screen_text(app)
        await pilot.press("enter")                   # empty: refused, the dialog stays
        await settle(pilot)
        assert "type the passphrase" in screen_text(app)
        await type_text(pilot, "s3cret")
        await pilot.press("enter")
        await settle(pilot)
        [info] = net.groups()
        assert info.desc == "ops" and info.authenticated
        assert backend(app).keys_used[info.gid] is not None
        assert "🔒 ops" in screen_text(app)
    assert "s3cret" not in "".join(p.read_text() for p in (tmp_path / "alice").glob("*"))


async def test_nicks_show_from_the_first_packet_of_members_who_never_wrote(
        tmp_path: Path) -> None:
    """The group layer carries each member's nick (its display name): the browser and
    the member list name members who never wrote, a newcomer from its join, and a
    rename at once; a keyed group's names are its members' only."""
    net = FakeNetwork()
    quiet = net.add_group("quiet room", "c0ffee01", members=("d00d0002",),
                          names={"c0ffee01": "carol", "d00d0002": "dave"})
    net.add_group("vault", "f00d0003", authenticated=True, names={"f00d0003": "fay"})
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        rows = screen_text(app).splitlines()
        assert "carol, dave" in next(line for line in rows if "quiet room" in line)
        assert "f00d0003" in next(line for line in rows if "vault" in line)
        await pilot.press("escape")
        await open_browser_on(pilot, "quiet room")
        await pilot.press("j")
        await settle(pilot)
        text = screen_text(app)
        assert "● alice (you)" in text and "carol  not heard from" in text
        assert "dave  not heard from" in text and "d00d0002" not in text
        net.member_joined(quiet, "e5e5e5e5", "erin")          # joins, writes nothing
        await settle(pilot)
        assert "● erin" in screen_text(app) and "e5e5e5e5" not in screen_text(app)
        net.rename("d00d0002", "david")                       # restarted as david
        await settle(pilot)
        text = screen_text(app)
        assert "david  not heard from" in text and "dave " not in text
        net.rename("d00d0002", "")                            # announces none: the id
        await settle(pilot)
        assert "d00d0002  not heard from" in screen_text(app)
        await pilot.press("ctrl+g")
        await settle(pilot)
        row = next(line for line in screen_text(app).splitlines() if "quiet room" in line)
        assert "carol, d00d0002, alice, erin" in row
