"""The help screen: every key, from the same table the bindings are made of."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from m2mc_chat.ui.keys import APP_KEYS, BROWSER_KEYS, MAIN_KEYS, TREE_KEYS, KeyHelp

__all__ = ["HelpScreen"]

ABOUT = ("Messages form threads: select a message (↑ ↓) and press ctrl+r to answer it; the "
         "answer hangs under it at every member, whatever order the network delivers in. "
         "● marks what you have not read yet. Whatever you type goes to the message line, "
         "so every command is a control or function key.")


def _section(title: str, keys: tuple[KeyHelp, ...]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", show_header=False,
                  box=None, padding=(0, 2, 0, 0), expand=False)
    table.add_column(style="bold cyan", no_wrap=True, min_width=18)
    table.add_column()
    for key in keys:
        table.add_row(key.display or key.key.replace(",", " "), key.description)
    return table


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-height: 90%; border: thick $accent; background: $surface; padding: 1 2;
    }
    HelpScreen Static { margin-bottom: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1", "close", "Close", key_display="esc")]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("m2mc chat: keys", style="bold"))
            yield Static(ABOUT)
            yield Static(_section("Conversation", MAIN_KEYS + APP_KEYS))
            yield Static(_section("Moving around", TREE_KEYS))
            yield Static(_section("Group browser (ctrl+g)", BROWSER_KEYS))

    def action_close(self) -> None:
        self.dismiss(None)
