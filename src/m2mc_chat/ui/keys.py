"""Every key of the chat, in one table: the bindings and the help screen both read it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

__all__ = ["BROWSER_KEYS", "MAIN_KEYS", "TREE_KEYS", "KeyHelp", "bindings"]


@dataclass(frozen=True, slots=True)
class KeyHelp:
    key: str          # Textual key name(s), comma-separated
    action: str       # action name, "" for keys the Tree widget handles itself
    description: str
    show: bool = False  # in the footer
    display: str = ""   # how the help screen and footer write the key
    short: str = ""     # footer label (default: the description)


MAIN_KEYS: tuple[KeyHelp, ...] = (
    KeyHelp("r", "reply", "Reply to the selected message", show=True, short="Reply"),
    KeyHelp("n", "new_thread", "Start a new thread", show=True, short="New thread"),
    KeyHelp("u", "next_unread", "Jump to the next unread message", show=True,
            short="Next unread"),
    KeyHelp("g", "groups", "Browse, create, join and leave groups", show=True,
            short="Groups"),
    KeyHelp("question_mark,f1", "help", "This help", show=True, display="?", short="Help"),
    KeyHelp("m", "mark_all_read", "Mark every message of the group read"),
    KeyHelp("c", "collapse_all", "Collapse every thread"),
    KeyHelp("e", "expand_all", "Expand every thread"),
    KeyHelp("p", "go_parent", "Go to the message this one answers"),
    KeyHelp("left_square_bracket", "previous_group", "Previous group", display="["),
    KeyHelp("right_square_bracket", "next_group", "Next group", display="]"),
    KeyHelp("escape", "cancel", "Stop writing; back to the conversation", display="esc"),
)

TREE_KEYS: tuple[KeyHelp, ...] = (
    KeyHelp("up,down", "", "Previous / next message", display="↑ ↓"),
    KeyHelp("pageup,pagedown", "", "A screen up / down", display="PgUp PgDn"),
    KeyHelp("home,end", "", "First / last message", display="Home End"),
    KeyHelp("space", "", "Fold or unfold the thread under the message", display="space"),
    KeyHelp("shift+left", "", "Go to the parent message", display="shift+←"),
    KeyHelp("shift+up,shift+down", "", "Previous / next answer to the same message",
            display="shift+↑ shift+↓"),
    KeyHelp("tab", "", "Move between panes", display="tab"),
    KeyHelp("enter", "", "In the message line: send", display="enter"),
)

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
