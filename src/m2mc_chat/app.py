"""``m2mc chat``: the Textual application.

Start-up: ask for a nick if none is configured (first run), then build the
backend and start it; once the network is up, push the main screen, save a first
run's ``chat.toml`` and pump backend events through the
:class:`~m2mc_chat.session.ChatSession` in a worker on the app's own event loop,
so model updates and screen updates never race. A network that cannot start ends
the app with :attr:`ChatApp.start_error` and status 2 (nothing saved).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import tzinfo
from typing import ClassVar

from textual.app import App
from textual.binding import BindingType

from m2mc.errors import M2MCError
from m2mc_chat.backend import ChatBackend
from m2mc_chat.codec import validate_nick
from m2mc_chat.config import ChatConfig, save_config
from m2mc_chat.session import ChatSession, GroupsChanged, SessionChange
from m2mc_chat.state import UiStateStore
from m2mc_chat.ui.browser import GroupBrowser
from m2mc_chat.ui.dialogs import TextPrompt
from m2mc_chat.ui.keys import APP_KEYS, bindings
from m2mc_chat.ui.main_screen import MainScreen

__all__ = ["ChatApp"]

log = logging.getLogger("m2mc.chat")

BackendFactory = Callable[[ChatConfig], ChatBackend]


class ChatApp(App[int]):
    """The threaded chat. ``clock`` and ``tz`` are injectable so screenshots are stable."""

    TITLE = "m2mc chat"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = list(bindings(APP_KEYS))

    def __init__(self, config: ChatConfig, backend_factory: BackendFactory, *,
                 clock: Callable[[], float] = time.time, tz: tzinfo | None = None,
                 save_nick: bool = True, save_config: bool = False) -> None:
        super().__init__()
        self.config = config
        self.backend_factory = backend_factory
        self.clock = clock
        self.tz = tz
        self.save_nick = save_nick
        self._save_pending = save_config
        """Write chat.toml once the network has started (first run, or a nick typed in)."""
        self.session: ChatSession | None = None
        self.main: MainScreen | None = None
        self.start_error: str | None = None
        """Why the network could not start; the app then exits with status 2."""

    def on_mount(self) -> None:
        if self.config.nick:
            self._begin(self.config.nick)
            return
        self.push_screen(
            TextPrompt("Welcome to m2mc chat",
                       help_text="Choose the name the others will see. It is saved in "
                                 f"{self.config.config_path} (change it there or with --nick).",
                       placeholder="your nick", validate=validate_nick, cancellable=False,
                       id="nick-prompt"),
            self._nick_chosen)

    def _nick_chosen(self, nick: str | None) -> None:
        if not nick:
            return
        self.config = self.config.with_nick(nick)
        self._save_pending = self._save_pending or self.save_nick
        self._begin(nick)

    def _save_config(self) -> None:
        if not self._save_pending:
            return
        self._save_pending = False
        try:
            save_config(self.config)
        except OSError as exc:
            self.notify(f"could not save {self.config.config_path}: {exc.strerror}",
                        severity="warning")

    def _begin(self, nick: str) -> None:
        backend = self.backend_factory(self.config)
        self.session = ChatSession(backend, nick, clock=self.clock,
                                   ui_state=UiStateStore(self.config.data_dir / "chat_state.json"),
                                   keys=self.config.keys, key_suite=self.config.key_suite)
        self.session.subscribe(self._on_change)
        self.sub_title = f"{nick} @ {backend.node_id} · {backend.mode}"
        self.run_worker(self._pump(self.session), name="session", group="session")

    async def _pump(self, session: ChatSession) -> None:
        try:
            await session.start()
        except (OSError, M2MCError) as exc:
            # Nothing to chat on: say why in one line (the command line prints it) and
            # exit with status 2, as for any other bad setting; nothing is saved.
            log.debug("chat backend did not start", exc_info=True)
            self.start_error = f"cannot start the network: {' '.join(str(exc).split())}"
            self.session = None
            await session.backend.close()      # not session.close(): it saves read marks
            self.exit(2, return_code=2)
            return
        self.main = MainScreen(session, clock=self.clock, tz=self.tz)
        await self.push_screen(self.main)
        self._save_config()
        try:
            await session.run()
        except (OSError, M2MCError) as exc:
            log.exception("chat backend stopped")
            self.notify(f"network stopped: {exc}", severity="error", timeout=30)

    def _on_change(self, change: SessionChange) -> None:
        if self.main is not None and self.main.is_mounted:
            self.main.on_session_change(change)
        if isinstance(change, GroupsChanged):
            for screen in self.screen_stack:
                if isinstance(screen, GroupBrowser) and screen.is_mounted:
                    screen.refresh_groups()

    async def action_quit(self) -> None:
        await self.shutdown()
        self.exit(0)

    async def shutdown(self) -> None:
        """Save read marks and folds, leave the network. Safe to call twice."""
        session, self.session = self.session, None
        if session is not None:
            await session.close()
