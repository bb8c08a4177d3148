"""The side panels and bars of the main screen: groups, members, status, composer."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option, OptionDoesNotExist

from m2mc_chat.presence import Member, MemberState, sync_status
from m2mc_chat.session import GroupView
from m2mc_chat.ui.labels import member_line

__all__ = ["Composer", "GroupList", "MemberList", "StatusBar"]


class GroupList(OptionList):
    """The groups this participant belongs to, with unread counts. Option ids are gids."""

    DEFAULT_CSS = """
    GroupList { height: 1fr; border: none; background: $panel; }
    """

    def show_groups(self, views: dict[str, GroupView], current: str | None) -> None:
        rows = sorted(views.values(), key=lambda v: (v.info.desc.casefold(), v.info.gid))
        self.clear_options()
        self.add_options([Option(self._prompt(v), id=v.info.gid) for v in rows])
        if current is not None and current in views:
            self.highlighted = self.get_option_index(current)

    def update_group(self, view: GroupView) -> None:
        try:
            self.replace_option_prompt(view.info.gid, self._prompt(view))
        except OptionDoesNotExist:  # not listed yet: nothing to redraw
            return

    @staticmethod
    def _prompt(view: GroupView) -> Text:
        unread = view.tree.unread_count
        text = Text(view.info.desc, style="bold" if unread else "")
        if unread:
            text.append(f" ({unread})", style="bold orange1")
        return text


class MemberList(Static):
    """Members with presence: joined, not heard from, left."""

    DEFAULT_CSS = """
    MemberList { height: 1fr; padding: 0 1; background: $panel; }
    """

    def show_members(self, members: list[Member]) -> None:
        if not members:
            self.update(Text("no group", style="dim"))
            return
        present = sum(1 for m in members if m.state is MemberState.JOINED)
        silent = sum(1 for m in members if m.state is MemberState.SILENT)
        out = Text(f"{present} present" + (f", {silent} silent" if silent else "") + "\n",
                   style="dim")
        out.append(Text("\n").join(member_line(m) for m in members))
        self.update(out)


class StatusBar(Static):
    """``travel stories · 3 members · 2 unread · synchronizing 1,234 messages``."""

    DEFAULT_CSS = """
    StatusBar { height: 1; padding: 0 1; background: $boost; color: $text-muted; }
    """

    def show_status(self, view: GroupView | None, now: float) -> None:
        if view is None:
            self.update("no group yet: press ctrl+g to browse, create or join groups")
            return
        parts = [Text(view.info.desc, style="bold"),
                 Text(f"{view.presence.count(now)} present"),
                 Text(f"{len(view.tree):,} messages")]
        if view.tree.unread_count:
            parts.append(Text(f"{view.tree.unread_count:,} unread", style="bold orange1"))
        if sync := sync_status(view.pending_sync):
            parts.append(Text(sync, style="bold yellow"))
        self.update(Text(" · ").join(parts))


class Composer(Vertical):
    """Where the user writes: says what the message will answer, then an input line."""

    DEFAULT_CSS = """
    Composer { height: auto; padding: 0 1; }
    Composer #reply-target { height: 1; color: $text-muted; }
    Composer Input { margin: 0; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="reply-target")
        # No select-all on focus: focus arrives with the first key typed elsewhere (see
        # MainScreen.on_key), and the next key would replace a selected draft.
        yield Input(placeholder="Write a message: Enter sends, Esc stops replying",
                    id="message-input", select_on_focus=False)

    def set_target(self, text: Text) -> None:
        self.query_one("#reply-target", Label).update(text)

    @property
    def input(self) -> Input:
        return self.query_one("#message-input", Input)
