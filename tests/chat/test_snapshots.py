"""Screenshots of the main screens, compared with the accepted SVGs in __snapshots__/.

After an intended change of the look: ``pytest tests/chat/test_snapshots.py --snapshot-update``,
then look at the new SVGs before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from m2mc_chat.app import ChatApp
from m2mc_chat.config import ChatConfig
from m2mc_chat.fake import FakeBackend, FakeNetwork, demo_network
from m2mc_chat.testing import NOW, deep_chain, make_app, settle

SIZE = (110, 30)
SnapCompare = Callable[..., bool]


def joined_app(tmp_path: Path) -> ChatApp:
    net, _ = demo_network()
    return make_app(net, tmp_path)


async def join(pilot: Pilot[Any], *descs: str) -> None:
    """Join the groups named, through the browser, as a user would."""
    for desc in descs:
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        for _ in range(10):
            browser = pilot.app.screen
            gid = browser.selected_gid()  # type: ignore[attr-defined]
            if gid and browser.session.groups[gid].desc == desc:  # type: ignore[attr-defined]
                break
            await pilot.press("down")
        await pilot.press("j")
        await settle(pilot)
    await no_toasts(pilot)


async def no_toasts(pilot: Pilot[Any]) -> None:
    """Toasts time out on their own clock: keep them out of the pictures."""
    pilot.app.clear_notifications()
    await settle(pilot)


def test_main_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "lunch", "travel stories")
        await pilot.press("down", "down")   # onto Carol's follow-up question: read now
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_replying(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "travel stories")
        await pilot.press("down", "ctrl+r", "N", "o", "t", "space", "y", "e", "t")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_group_browser(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "lunch")
        await pilot.press("ctrl+g")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_leave_confirmation(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "lunch")
        await pilot.press("ctrl+g", "l")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_help_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(joined_app(tmp_path), terminal_size=(110, 44), press=["f1"])


def test_empty_start(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE)


def test_deep_thread(snap_compare: SnapCompare, tmp_path: Path) -> None:
    """A 30-deep chain: indentation stops at 5 levels, deeper replies say their level,
    and the selected (deepest) message is shown in full under the tree."""
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "rabbit hole")
        await pilot.press("end")
        await settle(pilot)

    assert snap_compare(make_app(deep_chain(), tmp_path), terminal_size=SIZE,
                        run_before=run_before)


def test_nick_prompt(snap_compare: SnapCompare) -> None:
    """The first run: no nick configured. (Nothing is written until one is typed.)"""
    config = ChatConfig(nick=None, device_id="d3c0ffee", data_dir=Path("/home/zoe/.m2mc"))
    app = ChatApp(config, lambda cfg: FakeBackend(FakeNetwork(), cfg.device_id),
                  clock=lambda: NOW, tz=UTC)
    assert snap_compare(app, terminal_size=SIZE)


def test_new_group_prompt(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "lunch")
        await pilot.press("ctrl+g", "n")
        await settle(pilot)
        await pilot.press(*"board games")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_passphrase_prompt(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        while pilot.app.screen.selected_gid() != gids["travel"]:  # type: ignore[attr-defined]
            await pilot.press("down")
        await pilot.press("j")
        await settle(pilot)
        await pilot.press(*"red fort")
        await settle(pilot)

    net, gids = demo_network()
    assert snap_compare(make_app(net, tmp_path, keys={}), terminal_size=SIZE,
                        run_before=run_before)


def test_sync_status(snap_compare: SnapCompare, tmp_path: Path) -> None:
    """Catch-up in progress: the status bar says how many messages are still coming."""
    net = FakeNetwork()
    gid = net.add_group("busy", "carol", members=("bob",))
    for i in range(1240):
        net.post(gid, ("carol", "bob")[i % 2], ("carol", "bob")[i % 2], f"message {i}",
                 ts=NOW - 2000 + i)

    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "busy")

    assert snap_compare(make_app(net, tmp_path, catch_up_batch=6), terminal_size=SIZE,
                        run_before=run_before)
