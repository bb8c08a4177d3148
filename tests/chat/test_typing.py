"""The chat keeps what you type (Textual Pilot, fake network).

Every printable key goes to the message line whenever no dialog is open, whatever
pane has focus; commands are control and function keys; a reply with nothing
selected says so and keeps the text; a send in flight or a send that fails loses
nothing typed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from m2mc.errors import UsageError
from m2mc_chat.app import ChatApp
from m2mc_chat.fake import FakeBackend, FakeNetwork, demo_network
from m2mc_chat.testing import make_app, screen_text, settle, type_text
from m2mc_chat.ui.browser import GroupBrowser
from m2mc_chat.ui.conversation import ConversationTree
from m2mc_chat.ui.main_screen import MainScreen
from m2mc_chat.ui.panels import GroupList

SIZE = (110, 32)
# Every letter that used to be a command of the main screen, and the keys that fold,
# open the help and switch groups: typed now, they are text.
FORMER_COMMANDS = "rnugmcep[]? "


def main(app: ChatApp) -> MainScreen:
    assert app.main is not None
    return app.main


def notices(app: ChatApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def join(pilot: Any, desc: str) -> None:
    await pilot.press("ctrl+g")
    await settle(pilot)
    browser = pilot.app.screen
    assert isinstance(browser, GroupBrowser)
    for _ in range(10):
        gid = browser.selected_gid()
        if gid and browser.session.groups[gid].desc == desc:
            break
        await pilot.press("down")
    await pilot.press("j")
    await settle(pilot)


async def test_keys_typed_in_the_conversation_go_to_the_message_line(tmp_path: Path) -> None:
    net, gids = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "travel stories")
        screen = main(app)
        assert isinstance(app.focused, ConversationTree)
        view = screen.view
        assert view is not None
        unread, cursor = view.tree.unread_count, screen.conversation.cursor_mid
        await type_text(pilot, FORMER_COMMANDS)
        await settle(pilot)
        assert app.screen is screen                       # no browser, no help opened
        assert screen.message_line.value == FORMER_COMMANDS
        assert app.focused is screen.message_line
        assert screen.current == gids["travel"]           # no group switch
        assert view.tree.unread_count == unread           # nothing marked read
        assert screen.conversation.cursor_mid == cursor   # no jump, no fold
        assert not view.tree.is_collapsed(cursor or "")
        assert backend_sent(app) == []                    # and nothing sent


async def test_keys_typed_in_the_group_list_go_to_the_message_line(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "lunch")
        main(app).query_one(GroupList).focus()
        await settle(pilot)
        await type_text(pilot, "go team")
        await settle(pilot)
        assert main(app).message_line.value == "go team"


async def test_reply_with_nothing_selected_says_so_and_keeps_the_text(tmp_path: Path) -> None:
    net = FakeNetwork()
    net.add_group("empty room", "bob")
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "empty room")
        screen = main(app)
        assert screen.conversation.cursor_mid is None     # no message to select
        await type_text(pilot, "draft")
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert any("No message is selected" in n for n in notices(app))
        assert screen.message_line.value == "draft"
        assert app.focused is screen.message_line
        await type_text(pilot, " and more")                # the reply the user meant
        assert screen.message_line.value == "draft and more"
        assert screen.reply_to is None


async def test_pick_the_message_to_answer_while_writing(tmp_path: Path) -> None:
    net, gids = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "travel stories")
        screen = main(app)
        await type_text(pilot, "Not yet")                 # focus moves to the line
        assert app.focused is screen.message_line
        for _ in range(10):                               # arrows still move the cursor
            if screen.conversation.cursor_mid == "carol:2":
                break
            await pilot.press("down")
        assert screen.conversation.cursor_mid == "carol:2"
        assert screen.message_line.value == "Not yet"
        await pilot.press("ctrl+r", "enter")
        await settle(pilot)
        gid, _mid, reply_to = backend_sent(app)[-1]
        assert (gid, reply_to) == (gids["travel"], "carol:2")
        assert screen.message_line.value == ""
        assert "Not yet" in screen_text(app)


async def test_text_typed_while_a_send_is_in_flight_is_kept(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "lunch")
        screen = main(app)
        release = asyncio.Event()
        real_send = screen.session.send

        async def slow_send(gid: str, text: str, reply_to: str | None = None) -> str:
            await release.wait()
            return await real_send(gid, text, reply_to)

        screen.session.send = slow_send  # type: ignore[method-assign]
        await type_text(pilot, "first")
        await pilot.press("enter")
        await settle(pilot)
        await type_text(pilot, "second")                  # the send has not completed
        release.set()
        await settle(pilot)
        assert [text for _, text in sent_texts(app)][-1:] == ["first"]
        assert screen.message_line.value == "second"


async def test_a_send_that_fails_puts_the_text_back(tmp_path: Path) -> None:
    net, _ = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "lunch")
        screen = main(app)

        async def refused(gid: str, text: str, reply_to: str | None = None) -> str:
            raise UsageError("message too long")

        screen.session.send = refused  # type: ignore[method-assign]
        await type_text(pilot, "a long story")
        await pilot.press("enter")
        await settle(pilot)
        assert screen.message_line.value == "a long story"
        assert any("message too long" in n and "kept" in n for n in notices(app))


async def test_without_a_group_enter_keeps_the_text(tmp_path: Path) -> None:
    app = make_app(FakeNetwork(), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_text(pilot, "hello?")
        await pilot.press("enter")
        await settle(pilot)
        assert main(app).message_line.value == "hello?"
        assert any("Join or create a group first" in n for n in notices(app))


async def test_a_dialog_takes_its_own_keys_and_the_draft_survives(tmp_path: Path) -> None:
    net, gids = demo_network()
    app = make_app(net, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await join(pilot, "lunch")
        await type_text(pilot, "draft")
        await join(pilot, "travel stories")               # j in the browser is a command
        screen = main(app)
        assert screen.current == gids["travel"]
        assert screen.message_line.value == "draft"


def backend_sent(app: ChatApp) -> list[tuple[str, str, str | None]]:
    backend: FakeBackend = app.backends[0]  # type: ignore[attr-defined]
    return list(backend.sent)


def sent_texts(app: ChatApp) -> list[tuple[str, str]]:
    screen = main(app)
    out = []
    for gid, mid, _ in backend_sent(app):
        view = screen.session.views.get(gid)
        message = view.tree.get(mid) if view else None
        out.append((mid, message.text if message else ""))
    return out
