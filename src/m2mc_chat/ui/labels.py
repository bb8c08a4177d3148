"""How messages, members and groups look on screen (Rich ``Text``, never markup strings).

Everything a peer sends (nicks, texts, descriptions) is inserted as plain text,
so a message like ``[bold]hi`` shows literally instead of styling the screen.
"""

from __future__ import annotations

import zlib
from datetime import datetime, tzinfo

from rich.text import Text

from m2mc_chat.backend import GroupInfo
from m2mc_chat.model import ThreadTree
from m2mc_chat.presence import Member, MemberState

__all__ = ["DEPTH_MARK", "LOCK_MARK", "OPEN_MARK", "UNREAD_MARK", "group_title", "member_line",
           "message_label", "nick_style", "security_mark", "selected_line"]

UNREAD_MARK = "● "
DEPTH_MARK = "↳ "
LOCK_MARK = "🔒"
OPEN_MARK = "unauthenticated"
READ_MARK = "  "
_PALETTE = ("cyan", "magenta", "green", "yellow", "bright_blue", "bright_red",
            "bright_cyan", "bright_magenta", "bright_green", "orange1")
_MAX_LABEL = 300


def nick_style(pid: str, *, is_self: bool = False) -> str:
    """A colour per participant, the same at every member and on every run."""
    if is_self:
        return "bold bright_white"
    return f"bold {_PALETTE[zlib.crc32(pid.encode()) % len(_PALETTE)]}"


def _one_line(text: str) -> str:
    flat = " ⏎ ".join(part for part in text.splitlines() if part.strip()) or text
    flat = "".join(ch if ch.isprintable() else "�" for ch in flat)
    return flat if len(flat) <= _MAX_LABEL else flat[: _MAX_LABEL - 1] + "…"


def message_label(tree: ThreadTree, mid: str, self_pid: str, tz: tzinfo | None, *,
                  depth: int | None = None) -> Text:
    """``● bob: Yes! The Red Fort at dawn.  14:03  [+2, 1 new]``.

    ``depth``: for a reply drawn less indented than it is deep, its level
    (``● ↳ 17 bob: ...``).
    """
    message = tree.get(mid)
    label = Text()
    unread = message is not None and tree.is_unread(mid)
    label.append(UNREAD_MARK if unread else READ_MARK, style="bold orange1")
    if depth is not None:
        label.append(f"{DEPTH_MARK}{depth} ", style="bold cyan")
    if message is None:
        label.append(f"(message {mid} not received yet)", style="italic dim")
    else:
        label.append(_one_line(message.nick) or message.author,
                     style=nick_style(message.author, is_self=message.author == self_pid))
        label.append(": ")
        label.append(_one_line(message.text), style="bold" if unread else "")
        if message.sent_at > 0:
            stamp = datetime.fromtimestamp(message.sent_at, tz=tz).strftime("%H:%M")
            label.append(f"  {stamp}", style="dim")
    if tree.is_collapsed(mid) and tree.children(mid):
        hidden, new = tree.subtree_size(mid), tree.subtree_unread(mid)
        folded = f"  [+{hidden}" + (f", {new} new]" if new else "]")
        label.append(folded, style="bold orange1" if new else "dim")
    return label


def selected_line(tree: ThreadTree, mid: str | None, self_pid: str, tz: tzinfo | None) -> Text:
    """The selected message in full, under the tree: ``bob  15:06  ↳ 29  level 29: ...``.

    A tree line is cut at the pane's edge (long texts, deep threads); this one wraps.
    """
    if mid is None or not tree.has_node(mid):
        return Text("")
    depth = tree.depth(mid)
    message = tree.get(mid)
    line = Text()
    if message is None:
        line.append(f"(message {mid} not received yet)", style="italic dim")
        return line
    line.append(_one_line(message.nick) or message.author,
                style=nick_style(message.author, is_self=message.author == self_pid))
    if message.sent_at > 0:
        stamp = datetime.fromtimestamp(message.sent_at, tz=tz).strftime("%H:%M")
        line.append(f"  {stamp}", style="dim")
    if depth:
        line.append(f"  {DEPTH_MARK}{depth}", style="bold cyan")
    line.append("  ")
    line.append(_one_line(message.text))
    if tree.is_collapsed(mid) and tree.children(mid):
        line.append(f"  [+{tree.subtree_size(mid)} folded]", style="dim")
    return line


_PRESENCE = {
    MemberState.JOINED: ("● ", "green", ""),
    MemberState.SILENT: ("◌ ", "yellow", "not heard from"),
    MemberState.LEFT: ("○ ", "dim", "left"),
}


def member_line(member: Member) -> Text:
    """``● alice (you)`` / ``◌ carol  not heard from`` / ``○ dave  left``."""
    mark, style, note = _PRESENCE[member.state]
    line = Text(mark, style=style)
    line.append(_one_line(member.nick), style=nick_style(member.pid, is_self=member.is_self)
                if member.state is not MemberState.LEFT else "dim")
    if member.is_self:
        line.append(" (you)", style="dim")
    if note:
        line.append(f"  {note}", style=style)
    return line


def security_mark(authenticated: bool) -> Text:
    """A lock for a group whose messages are authenticated (issue 9); a warning word otherwise:
    anyone on the network can write in an open group under any name."""
    if authenticated:
        return Text(f"{LOCK_MARK} authenticated", style="green")
    return Text(OPEN_MARK, style="yellow")


def group_title(info: GroupInfo) -> Text:
    """The conversation header: ``🔒 travel stories`` / ``lunch · unauthenticated``."""
    if info.authenticated:
        return Text.assemble((f"{LOCK_MARK} ", "green"), info.desc)
    return Text.assemble(info.desc, ("  · ", "dim"), (OPEN_MARK, "yellow"))
