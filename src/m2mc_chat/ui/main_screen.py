"""The main screen: groups on the left, the thread tree, members on the right.

What you type is never lost: every printable key goes to the message line
(:meth:`MainScreen.on_key`), whatever pane has focus, so the commands are control
and function keys (:data:`~m2mc_chat.ui.keys.MAIN_KEYS`); the keys that move around
the conversation also work while you write. Dialogs (the group browser, prompts, the
help) take their own keys while they are open.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Label, OptionList, Static, Tree

from m2mc.errors import UsageError
from m2mc_chat.model import ROOT
from m2mc_chat.session import (
    ChatSession,
    GroupsChanged,
    GroupView,
    MembersChanged,
    MessageAdded,
    Notice,
    SessionChange,
    SyncChanged,
)
from m2mc_chat.ui.browser import GroupBrowser
from m2mc_chat.ui.conversation import ConversationTree
from m2mc_chat.ui.help import HelpScreen
from m2mc_chat.ui.keys import FORWARDED_TO_TREE, MAIN_KEYS, bindings
from m2mc_chat.ui.labels import group_title, nick_style, selected_line
from m2mc_chat.ui.panels import Composer, GroupList, MemberList, StatusBar

__all__ = ["MainScreen"]

EMPTY_HINT = ("You are in no group yet.\n\nPress ctrl+g to see the groups on this network, "
              "join one, or create your own.\nPress F1 for help.")


class MainScreen(Screen[None]):
    DEFAULT_CSS = """
    MainScreen #body { height: 1fr; }
    MainScreen #groups-pane { width: 24; background: $panel; }
    MainScreen #members-pane { width: 28; background: $panel; }
    MainScreen .pane-title { width: 1fr; padding: 0 1; text-style: bold; background: $boost; }
    MainScreen #conversation-pane { width: 1fr; }
    MainScreen #selected-message {
        height: auto; max-height: 2; padding: 0 1; background: $boost;
    }
    MainScreen.no-group #selected-message { display: none; }
    MainScreen #empty-hint { padding: 2 4; color: $text-muted; display: none; }
    MainScreen #mode-notice { height: 1; padding: 0 1; color: $warning; background: $boost; }
    MainScreen.no-group #empty-hint { display: block; }
    MainScreen.no-group ConversationTree { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings(MAIN_KEYS),
        *(Binding(key, f"tree('{action}')", show=False)
          for key, action in FORWARDED_TO_TREE.items()),
    ]

    def __init__(self, session: ChatSession, *, clock: Callable[[], float],
                 tz: tzinfo | None = None) -> None:
        super().__init__()
        self.session = session
        self.clock = clock
        self.tz = tz
        self.current: str | None = None
        self.reply_to: str | None = None

    # ----------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="groups-pane"):
                yield Label("Groups", classes="pane-title")
                yield GroupList(id="group-list")
            with Vertical(id="conversation-pane"):
                yield Label("", id="conversation-title", classes="pane-title")
                yield Static(EMPTY_HINT, id="empty-hint")
                yield ConversationTree(self.session.node_id, tz=self.tz, id="conversation")
                yield Static("", id="selected-message")
            with Vertical(id="members-pane"):
                yield Label("Members", classes="pane-title")
                yield MemberList(id="member-list")
        if notice := self.session.limits.notice:   # what this mode cannot do, said once
            yield Label(notice, id="mode-notice")
        yield StatusBar(id="status")
        yield Composer(id="composer")
        yield Footer()

    @property
    def conversation(self) -> ConversationTree:
        return self.query_one(ConversationTree)

    @property
    def view(self) -> GroupView | None:
        return self.session.views.get(self.current) if self.current else None

    def on_mount(self) -> None:
        self.refresh_groups()
        self.set_interval(5.0, self.refresh_members)  # "not heard from" changes with time
        self.conversation.focus()

    @property
    def message_line(self) -> Input:
        return self.query_one(Composer).input

    def on_key(self, event: events.Key) -> None:
        """A printable key typed outside the message line goes into it (and focus with
        it): nothing typed is taken for a command or dropped. Keys reach this handler
        before any binding is looked up, and only while this screen is the active
        one, so dialogs keep their own keys."""
        line = self.message_line
        if self.focused is line or not event.is_printable or not event.character:
            return
        event.stop()
        event.prevent_default()
        line.focus()
        line.insert_text_at_cursor(event.character)

    def action_tree(self, action: str) -> None:
        """A key the message line has no use for, passed to the conversation."""
        if self.view is not None:
            getattr(self.conversation, f"action_{action}")()

    # --------------------------------------------------------------- showing

    def open_group(self, gid: str | None) -> None:
        """Show ``gid`` (or nothing) in the middle pane."""
        self.current = gid if gid in self.session.views else None
        self.reply_to = None
        view = self.view
        self.set_class(view is None, "no-group")
        self._refresh_title()
        self.conversation.show(view.tree if view else None, cursor=view.cursor if view else None)
        self.show_selected()
        self.query_one(GroupList).show_groups(self.session.views, self.current)
        self._update_target()
        self.refresh_members()
        self.refresh_status()
        self.conversation.focus()

    def refresh_groups(self) -> None:
        if self.current not in self.session.views:
            first = sorted(self.session.views.values(), key=lambda v: (v.info.desc, v.info.gid))
            self.open_group(first[0].info.gid if first else None)
        else:
            self.query_one(GroupList).show_groups(self.session.views, self.current)
            self._refresh_title()

    def _refresh_title(self) -> None:
        view = self.view
        self.query_one("#conversation-title", Label).update(
            group_title(view.info) if view else Text("No group", style="dim"))

    def show_selected(self) -> None:
        """The selected message in full under the tree (lines there are cut at the edge)."""
        view = self.view
        self.query_one("#selected-message", Static).update(
            selected_line(view.tree, self.conversation.cursor_mid, self.session.node_id,
                          self.tz) if view else "")

    def refresh_members(self) -> None:
        view = self.view
        self.query_one(MemberList).show_members(
            view.presence.members(self.clock()) if view else [])

    def refresh_status(self) -> None:
        self.query_one(StatusBar).show_status(self.view, self.clock())

    def _update_target(self) -> None:
        composer = self.query_one(Composer)
        view = self.view
        if view is None:
            composer.set_target(Text("join or create a group to write (ctrl+g)", style="dim"))
            return
        message = view.tree.get(self.reply_to) if self.reply_to else None
        if message is None:
            composer.set_target(Text.assemble(("New thread in ", "dim"), view.info.desc))
            return
        preview = message.text if len(message.text) <= 50 else message.text[:49] + "…"
        composer.set_target(Text.assemble(("↳ replying to ", "dim"),
                                          (message.nick, nick_style(message.author)),
                                          ": ", (preview, "italic")))

    # -------------------------------------------------------- session changes

    def on_session_change(self, change: SessionChange) -> None:
        match change:
            case GroupsChanged():
                self.refresh_groups()
            case MessageAdded(gid=gid, mid=mid, restructured=restructured):
                view = self.session.views.get(gid)
                if view is not None:
                    self.query_one(GroupList).update_group(view)
                if gid == self.current:
                    self.conversation.message_added(mid, restructured=restructured)
                    self.refresh_status()
                    self.show_selected()
            case MembersChanged(gid=gid) if gid == self.current:
                self.refresh_members()
                self.refresh_status()
            case SyncChanged(gid=gid) if gid == self.current:
                self.refresh_status()
            case Notice(text=text):
                self.notify(text, severity="warning")

    # ------------------------------------------------------------ tree events

    @on(Tree.NodeHighlighted)
    def _seen(self, event: Tree.NodeHighlighted[str]) -> None:
        view, mid = self.view, event.node.data
        if view is None or mid is None:
            return
        view.cursor = mid
        self.show_selected()
        if not view.tree.mark_read(mid):
            return
        self.conversation.refresh_label(mid)
        self.conversation.refresh_ancestors(mid)
        self.query_one(GroupList).update_group(view)
        self.refresh_status()

    @on(Tree.NodeCollapsed)
    def _folded(self, event: Tree.NodeCollapsed[str]) -> None:
        self.conversation.sync_fold(event.node, True)
        self.show_selected()

    @on(Tree.NodeExpanded)
    def _unfolded(self, event: Tree.NodeExpanded[str]) -> None:
        self.conversation.sync_fold(event.node, False)
        self.show_selected()

    @on(OptionList.OptionSelected, "#group-list")
    def _group_chosen(self, event: OptionList.OptionSelected) -> None:
        self.open_group(event.option.id)

    # ---------------------------------------------------------------- writing

    @on(Input.Submitted, "#message-input")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value
        if not text.strip():
            return
        if self.current is None:
            self.notify("Join or create a group first (ctrl+g). Your text is kept.",
                        severity="warning")
            return
        # The line is emptied now, not when the send completes: what is typed meanwhile
        # belongs to the next message. A send that fails puts its text back in front.
        self.message_line.value = ""
        self.run_worker(self._send(self.current, text, self.reply_to), group="send")

    async def _send(self, gid: str, text: str, reply_to: str | None) -> None:
        try:
            mid = await self.session.send(gid, text, reply_to)
        except UsageError as exc:
            line = self.message_line
            typed_since = line.value
            line.value = text + (" " + typed_since if typed_since else "")
            line.cursor_position = len(line.value)
            self.notify(f"{exc} (your text is kept)", severity="error")
            return
        if self.reply_to == reply_to:
            self.reply_to = None
            self._update_target()
        if gid == self.current and not self.message_line.value:
            self.conversation.focus()
            self.conversation.move_to(mid)

    # ---------------------------------------------------------------- actions

    def action_reply(self) -> None:
        view, mid = self.view, self.conversation.cursor_mid
        if view is None:
            self.notify("Join or create a group first (ctrl+g). What you type is kept.",
                        severity="warning")
        elif mid is None or mid not in view.tree:
            self.notify("No message is selected: pick one with ↑ ↓, then ctrl+r. "
                        "What you type is kept.", severity="warning")
        else:
            self.reply_to = mid
            self._update_target()
        self.message_line.focus()

    def action_new_thread(self) -> None:
        if self.view is None:
            self.notify("Join or create a group first (ctrl+g). What you type is kept.",
                        severity="warning")
        self.reply_to = None
        self._update_target()
        self.message_line.focus()

    def action_cancel(self) -> None:
        self.reply_to = None
        self._update_target()
        self.conversation.focus()

    def action_toggle_fold(self) -> None:
        if self.view is not None:
            self.conversation.action_toggle_node()

    def action_next_unread(self) -> None:
        view = self.view
        if view is None:
            return
        mid = view.tree.next_unread(self.conversation.cursor_mid)
        if mid is None:
            self.notify("Nothing unread here.")
            return
        self.conversation.move_to(mid)

    def action_mark_all_read(self) -> None:
        view = self.view
        if view is None:
            return
        view.tree.mark_all_read()
        self.conversation.refresh_all_labels()
        self.query_one(GroupList).update_group(view)
        self.refresh_status()

    def action_collapse_all(self) -> None:
        view = self.view
        if view is None:
            return
        cursor = self.conversation.cursor_mid
        while cursor is not None and view.tree.parent_of(cursor) != ROOT:
            cursor = view.tree.parent_of(cursor)   # keep the cursor on what stays visible
        view.tree.collapse_all()
        self.conversation.show(view.tree, cursor=cursor)

    def action_expand_all(self) -> None:
        view = self.view
        if view is None:
            return
        view.tree.expand_all()
        self.conversation.show(view.tree, cursor=self.conversation.cursor_mid)

    def action_go_parent(self) -> None:
        self.conversation.action_cursor_parent()

    def _step_group(self, step: int) -> None:
        gids = [v.info.gid for v in sorted(self.session.views.values(),
                                           key=lambda v: (v.info.desc.casefold(), v.info.gid))]
        if not gids:
            return
        index = gids.index(self.current) if self.current in gids else -step
        self.open_group(gids[(index + step) % len(gids)])

    def action_previous_group(self) -> None:
        self._step_group(-1)

    def action_next_group(self) -> None:
        self._step_group(1)

    def action_groups(self) -> None:
        def chosen(gid: str | None) -> None:
            if gid is not None:
                self.open_group(gid)
            else:
                self.refresh_groups()

        self.app.push_screen(GroupBrowser(self.session), chosen)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())
