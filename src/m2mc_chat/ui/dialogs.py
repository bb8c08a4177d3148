"""Small modal dialogs: ask for a line of text, ask yes or no."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from m2mc.errors import UsageError

__all__ = ["ConfirmDialog", "TextPrompt"]

_DIALOG_CSS = """
TextPrompt, ConfirmDialog { align: center middle; }
TextPrompt > Vertical, ConfirmDialog > Vertical {
    width: 64; height: auto; padding: 1 2; border: thick $accent; background: $surface;
}
TextPrompt Label, ConfirmDialog Label { width: 100%; }
TextPrompt .title, ConfirmDialog .title { text-style: bold; margin-bottom: 1; }
TextPrompt #prompt-error { color: $error; height: auto; }
ConfirmDialog Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
ConfirmDialog Button { margin-left: 2; }
"""


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line; dismisses with the text, or None on escape.

    ``validate`` may raise :class:`UsageError`; its message is shown and the
    dialog stays open.
    """

    DEFAULT_CSS = _DIALOG_CSS
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, *, placeholder: str = "", value: str = "",
                 help_text: str = "", validate: Callable[[str], object] | None = None,
                 cancellable: bool = True, password: bool = False,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.password = password
        self.title_text = title
        self.placeholder = placeholder
        self.value = value
        self.help_text = help_text
        self.validator = validate
        self.cancellable = cancellable

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, classes="title")
            if self.help_text:
                yield Label(self.help_text)
            yield Input(value=self.value, placeholder=self.placeholder, password=self.password,
                        id="prompt-input")
            yield Label("", id="prompt-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value if self.password else event.value.strip()
        try:
            if self.validator is not None:
                self.validator(text)
            elif not text:
                raise UsageError("please type something")
        except UsageError as exc:
            self.query_one("#prompt-error", Label).update(str(exc))
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        if self.cancellable:
            self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """Yes or no; ``y``/``n``/escape work as well as the buttons."""

    DEFAULT_CSS = _DIALOG_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, title: str, question: str, *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.title_text, self.question, self.yes, self.no = title, question, yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, classes="title")
            yield Label(self.question)
            with Horizontal():
                yield Button(f"{self.no} (n)", id="no")
                yield Button(f"{self.yes} (y)", id="yes", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
