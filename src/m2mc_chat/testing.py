"""Helpers for testing the chat: a fixed clock, apps on a fake network, the screen as text.

Used by tests/chat and by the screenshot script; imports textual.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from m2mc.security.keys import GroupKey
from m2mc_chat.app import ChatApp
from m2mc_chat.backend import FULL_FEATURES, BackendLimits
from m2mc_chat.config import ChatConfig
from m2mc_chat.fake import DEMO_KEYS, DEMO_T0, FakeBackend, FakeNetwork, FakeStore

NOW = DEMO_T0 + 400.0
"""The wall clock of every app under test: screenshots never change."""


def screen_text(app: App[Any]) -> str:
    """What the terminal shows, as plain text (the same render the SVG export uses)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False,
                      safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


def make_app(net: FakeNetwork, tmp_path: Path, *, node: str = "alice", nick: str | None = "alice",
             store: FakeStore | None = None, catch_up_batch: int = 0,
             limits: BackendLimits = FULL_FEATURES,
             keys: Mapping[str, GroupKey] = DEMO_KEYS) -> ChatApp:
    """A chat app on ``net``; ``app.backends`` collects the backends it made.

    ``keys``: the configured group keys (by default the demo's, so joining the keyed
    "travel stories" asks nothing)."""
    config = ChatConfig(nick=nick, device_id=node, data_dir=tmp_path / node, keys=keys)
    backends: list[FakeBackend] = []

    def factory(cfg: ChatConfig) -> FakeBackend:
        backend = FakeBackend(net, cfg.device_id, store=store, catch_up_batch=catch_up_batch,
                              limits=limits)
        backends.append(backend)
        return backend

    app = ChatApp(config, factory, clock=lambda: NOW, tz=UTC)
    app.backends = backends  # type: ignore[attr-defined]
    return app


async def type_text(pilot: Pilot[Any], text: str) -> None:
    await pilot.press(*["space" if ch == " " else ch for ch in text])


async def settle(pilot: Pilot[Any]) -> None:
    """Let messages, workers and refreshes run to completion."""
    for _ in range(4):
        await pilot.pause()


def deep_chain(levels: int = 30) -> FakeNetwork:
    """A network with one group, "rabbit hole", holding a thread ``levels`` replies deep
    (carol and bob answering each other)."""
    net = FakeNetwork()
    gid = net.add_group("rabbit hole", "carol", members=("bob",))
    parent = ""
    for level in range(levels):
        who = ("carol", "bob")[level % 2]
        parent = net.post(gid, who, who, f"level {level}: and why is that so, exactly?",
                          parent=parent, ts=NOW - 600 + level).mid
    return net
