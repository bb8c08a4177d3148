"""The group browser: every group GJLP discovered; create, join, leave (seeds/000 V, IX.E)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Label

from m2mc.errors import ConfigError, UsageError
from m2mc.security import KeyRequiredError
from m2mc.security.keys import GroupKey
from m2mc_chat.backend import GroupInfo
from m2mc_chat.codec import clean_nick
from m2mc_chat.ui.dialogs import ConfirmDialog, TextPrompt
from m2mc_chat.ui.keys import BROWSER_KEYS, bindings
from m2mc_chat.ui.labels import LOCK_MARK, security_mark

if TYPE_CHECKING:
    from m2mc_chat.session import ChatSession

__all__ = ["GroupBrowser"]

MAX_DESC = 80
HINT = ("Groups on this network: j join (a 🔒 group asks its passphrase) · n new · "
        "k new keyed · l leave · esc back")
NO_KEYS_HINT = ("The hosts' groups (infrastructure mode): j join · n new · l leave · "
                "esc back")


def _check_passphrase(passphrase: str) -> None:
    if not passphrase:
        raise UsageError("type the passphrase (Esc cancels)")


def passphrase_prompt(title: str, help_text: str) -> TextPrompt:
    return TextPrompt(title, help_text=help_text, placeholder="passphrase", password=True,
                      validate=_check_passphrase, id="passphrase-prompt")


def _check_desc(desc: str) -> None:
    if not desc:
        raise UsageError("a group needs a description")
    if len(desc) > MAX_DESC:
        raise UsageError(f"at most {MAX_DESC} characters")


class GroupBrowser(Screen[str | None]):
    """Dismisses with the gid to open (joined or created), or None."""

    DEFAULT_CSS = """
    GroupBrowser #browser-hint { padding: 0 1; color: $text-muted; }
    GroupBrowser DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = list(bindings(BROWSER_KEYS))

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        yield Header()
        yield Label(HINT if self.session.limits.group_keys else NO_KEYS_HINT,
                    id="browser-hint")
        table: DataTable[Text] = DataTable(id="groups-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "groups"
        table = self.query_one(DataTable)
        table.add_columns("", "Group", "Security", "Members", "Who", "Group id")
        self.refresh_groups()
        table.focus()

    def _who(self, info: GroupInfo) -> Text:
        """Members by nick where one is known: the one the group's record carries (the
        group layer's display names: known before they write, groups not joined too),
        else what the session knows (announced elsewhere, or written under in any group
        we hold); by device id otherwise."""
        announced = dict(info.names)
        names = [clean_nick(announced.get(pid, "")) or self.session.nick_of(pid)
                 for pid in info.members]
        text = Text(", ".join(names) if names else "nobody", style="" if names else "dim")
        if info.left:
            text.append(f"  ({len(info.left)} left)", style="dim")
        if len(text) > 48:
            text.truncate(47)
            text.append("…")
        return text

    def refresh_groups(self) -> None:
        """Redraw the table, keeping the cursor on the same group."""
        table: DataTable[Text] = self.query_one(DataTable)
        current = self.selected_gid()
        table.clear()
        groups = sorted(self.session.groups.values(), key=lambda g: (g.desc.casefold(), g.gid))
        for info in groups:
            joined = info.gid in self.session.views
            table.add_row(Text("✓ joined" if joined else "", style="bold green"),
                          Text(info.desc, style="bold" if joined else ""),
                          security_mark(info.authenticated),
                          Text(str(len(info.members)), justify="right"),
                          self._who(info), Text(info.gid, style="dim"), key=info.gid)
        if current is not None and current in self.session.groups:
            table.move_cursor(row=table.get_row_index(current))

    def selected_gid(self) -> str | None:
        table: DataTable[Text] = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return row_key.value

    # ---------------------------------------------------------------- actions

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        gid = event.row_key.value
        if gid in self.session.views:
            self.dismiss(gid)
        else:
            self.action_join()

    def action_join(self) -> None:
        gid = self.selected_gid()
        if gid is None:
            self.notify("No group to join yet: press n to create one.")
            return
        if gid in self.session.views:
            self.dismiss(gid)
            return
        if self.session.needs_key(gid):
            self._ask_passphrase(gid)
            return
        self.run_worker(self._join(gid), exclusive=True, group="browser")

    def _ask_passphrase(self, gid: str) -> None:
        """A keyed group: ask for its passphrase (kept in memory only) and join with it."""
        desc = self.session.groups[gid].desc

        def typed(passphrase: str | None) -> None:
            if passphrase:
                key = self.session.passphrase_key(passphrase)
                self.run_worker(self._join(gid, key), exclusive=True, group="browser")

        self.app.push_screen(passphrase_prompt(f"{LOCK_MARK} {desc} is a keyed group",
                                               "Its passphrase (it stays in memory: never "
                                               "saved, asked again after a restart):"),
                             typed)

    async def _join(self, gid: str, key: GroupKey | None = None) -> None:
        try:
            info = await self.session.join_group(gid, key)
        except KeyRequiredError:
            self._ask_passphrase(gid)
            return
        except (UsageError, ConfigError) as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"Joined {info.desc}")
        self.dismiss(gid)

    def action_create(self) -> None:
        def created(desc: str | None) -> None:
            if desc:
                self.run_worker(self._create(desc), exclusive=True, group="browser")

        self.app.push_screen(TextPrompt("New group", placeholder="what is it about?",
                                        help_text="Others on the network will see this "
                                                  "description and can join.",
                                        validate=_check_desc, id="new-group-prompt"),
                             created)

    def action_create_keyed(self) -> None:
        if not self.session.limits.group_keys:
            self.notify("The hosts' groups have no keys of their own: the deployment key "
                        "covers them all.", severity="warning")
            return

        def created(desc: str | None) -> None:
            if not desc:
                return

            def typed(passphrase: str | None) -> None:
                if passphrase:
                    key = self.session.passphrase_key(passphrase)
                    self.run_worker(self._create(desc, key), exclusive=True, group="browser")

            self.app.push_screen(passphrase_prompt(
                f"{LOCK_MARK} {desc}: passphrase", "Everyone who joins types the same "
                "passphrase; messages of others are refused. It is never saved."), typed)

        self.app.push_screen(TextPrompt("New keyed group", placeholder="what is it about?",
                                        help_text="Only people who know its passphrase can "
                                                  "join, read and write.",
                                        validate=_check_desc, id="new-keyed-group-prompt"),
                             created)

    async def _create(self, desc: str, key: GroupKey | None = None) -> None:
        try:
            info = await self.session.create_group(desc, key)
        except (UsageError, ConfigError) as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"Created {info.desc}")
        self.dismiss(info.gid)

    def action_leave(self) -> None:
        gid = self.selected_gid()
        if gid is None or gid not in self.session.views:
            self.notify("Select a group you belong to (✓ joined) to leave it.")
            return
        desc = self.session.views[gid].info.desc

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._leave(gid, desc), exclusive=True, group="browser")

        self.app.push_screen(ConfirmDialog(f"Leave {desc}?",
                                           "You will stop receiving its messages; the others "
                                           "see that you left.", yes="Leave"), answered)

    async def _leave(self, gid: str, desc: str) -> None:
        try:
            await self.session.leave_group(gid)
        except UsageError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"Left {desc}")
        self.refresh_groups()

    def action_close(self) -> None:
        self.dismiss(None)
