"""Every key of the chat, in one table: the bindings and the help screen both read it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

__all__ = ["BROWSER_KEYS", "FORWARDED_TO_TREE", "MAIN_KEYS", "TREE_KEYS", "KeyHelp",
           "bindings"]


@dataclass(frozen=True, slots=True)
class KeyHelp:
    key: str          # Textual key name(s), comma-separated
    action: str       # action name, "" for keys the Tree widget handles itself
    description: str
    show: bool = False  # in the footer
    display: str = ""   # how the help screen and footer write the key
    short: str = ""     # footer label (default: the description)


# Printable keys always go to the message line (see MainScreen.on_key), so no command of
# the main screen is a printable key: they are control and function keys, which work
# whether the conversation or the message line has focus.
MAIN_KEYS: tuple[KeyHelp, ...] = (
    KeyHelp("ctrl+r", "reply", "Reply to the selected message", show=True, display="^r",
            short="Reply"),
    KeyHelp("ctrl+n", "new_thread", "Start a new thread", show=True, display="^n",
            short="New thread"),
    KeyHelp("ctrl+o", "next_unread", "Jump to the next unread message", show=True,
            display="^o", short="Next unread"),
    KeyHelp("ctrl+g", "groups", "Browse, create, join and leave groups", show=True,
            display="^g", short="Groups"),
    KeyHelp("f1", "help", "This help", show=True, display="F1", short="Help"),
    KeyHelp("ctrl+t", "toggle_fold", "Fold or unfold the thread under the message",
            display="^t"),
    KeyHelp("ctrl+l", "mark_all_read", "Mark every message of the group read", display="^l"),
    KeyHelp("f5", "collapse_all", "Collapse every thread", display="F5"),
    KeyHelp("f6", "expand_all", "Expand every thread", display="F6"),
    KeyHelp("ctrl+p", "go_parent", "Go to the message this one answers", display="^p"),
    KeyHelp("f7,ctrl+up", "previous_group", "Previous group", display="F7 ^↑"),
    KeyHelp("f8,ctrl+down", "next_group", "Next group", display="F8 ^↓"),
    KeyHelp("escape", "cancel", "Stop replying (what you typed stays); back to the "
            "conversation", display="esc"),
)

# Moving around the conversation. The first group also works while you type: the message
# line has no use for these keys, so the screen passes them to the conversation.
TREE_KEYS: tuple[KeyHelp, ...] = (
    KeyHelp("up,down", "", "Previous / next message", display="↑ ↓"),
    KeyHelp("pageup,pagedown", "", "A screen up / down", display="PgUp PgDn"),
    KeyHelp("home,end", "", "First / last message (^Home ^End while you write)",
            display="Home End"),
    KeyHelp("shift+up,shift+down", "", "Previous / next answer to the same message",
            display="shift+↑ shift+↓"),
    KeyHelp("shift+left", "", "In the conversation: go to the parent message",
            display="shift+←"),
    KeyHelp("enter", "", "In the conversation: fold or unfold; in the message line: send",
            display="enter"),
    KeyHelp("tab", "", "Move between panes", display="tab"),
    KeyHelp("", "", "Any other key you type goes to the message line", display="a-z …"),
)

# Keys the message line has no use for: while it has focus, the screen passes them to
# the conversation (key -> the conversation's action), so you can pick the message to
# answer without leaving what you are writing.
FORWARDED_TO_TREE: dict[str, str] = {
    "up": "cursor_up", "down": "cursor_down", "pageup": "page_up", "pagedown": "page_down",
    "ctrl+home": "scroll_home", "ctrl+end": "scroll_end",
    "shift+up": "cursor_previous_sibling", "shift+down": "cursor_next_sibling",
}

BROWSER_KEYS: tuple[KeyHelp, ...] = (
    KeyHelp("j", "join", "Join the selected group (enter opens a joined one)", show=True,
            short="Join"),
    KeyHelp("n", "create", "Create a new group", show=True, short="New group"),
    KeyHelp("k", "create_keyed", "Create a keyed group (asks for a passphrase)", show=True,
            short="New keyed group"),
    KeyHelp("l", "leave", "Leave the selected group (asks first)", show=True, short="Leave"),
    KeyHelp("escape", "close", "Back to the conversation", show=True, display="esc",
            short="Back"),
)

APP_KEYS: tuple[KeyHelp, ...] = (
    KeyHelp("ctrl+q", "quit", "Quit", show=True, display="^q"),
)


def bindings(keys: tuple[KeyHelp, ...]) -> list[Binding]:
    return [Binding(k.key, k.action, k.short or k.description, show=k.show,
                    key_display=k.display or None, tooltip=k.description)
            for k in keys if k.action]
