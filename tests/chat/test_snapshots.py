"""Screenshots of the main screens, compared with the accepted SVGs in __snapshots__/.

After an intended change of the look: ``pytest tests/chat/test_snapshots.py --snapshot-update``,
then look at the new SVGs before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from m2mc_chat.app import ChatApp
from m2mc_chat.fake import demo_network
from m2mc_chat.testing import deep_chain, make_app, settle

SIZE = (110, 30)
SnapCompare = Callable[..., bool]


def joined_app(tmp_path: Path) -> ChatApp:
    net, _ = demo_network()
    return make_app(net, tmp_path)


async def join(pilot: Pilot[Any], *descs: str) -> None:
    """Join the groups named, through the browser, as a user would."""
    for desc in descs:
        await settle(pilot)
        await pilot.press("g")
        await settle(pilot)
        for _ in range(10):
            browser = pilot.app.screen
            gid = browser.selected_gid()  # type: ignore[attr-defined]
            if gid and browser.session.groups[gid].desc == desc:  # type: ignore[attr-defined]
                break
            await pilot.press("down")
        await pilot.press("j")
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
        await pilot.press("down", "r", "N", "o", "t", "space", "y", "e", "t")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_group_browser(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "lunch")
        await pilot.press("g")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_leave_confirmation(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await join(pilot, "lunch")
        await pilot.press("g", "l")
        await settle(pilot)

    assert snap_compare(joined_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_help_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(joined_app(tmp_path), terminal_size=(110, 44), press=["question_mark"])


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
