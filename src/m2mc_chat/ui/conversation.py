"""The conversation pane: a Textual ``Tree`` kept in step with a :class:`ThreadTree`.

The model is the truth (what is unread, what is folded); this widget mirrors it.
A new message whose parent is already on screen is inserted in place; anything
that moves existing nodes (a placeholder filled in) rebuilds the widget, keeping
the cursor on the message it was on.

Deep threads do not run off the screen: replies are indented one step per level
down to :data:`MAX_INDENT` levels; deeper ones line up at that indentation and
say how deep they are (``↳ 17``). The tree is still the whole tree (folding,
parent and sibling keys work at every depth); only the drawing is capped.
"""

from __future__ import annotations

from collections import deque
from datetime import tzinfo
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from m2mc_chat.model import ROOT, ThreadTree
from m2mc_chat.ui.labels import message_label

__all__ = ["MAX_INDENT", "ConversationTree"]

MAX_INDENT = 5
"""Reply levels drawn indented; deeper replies are drawn at this depth, with their level."""


class ConversationTree(Tree[str]):
    """Messages as a tree; ``node.data`` is the mid."""

    DEFAULT_CSS = """
    ConversationTree { background: $surface; padding: 0 1; }
    """
    # Enter folds (space is a printable key: it goes to the message line, see
    # MainScreen.on_key). Tree's scroll_home/scroll_end move the cursor to the first and
    # last line; ctrl+home/ctrl+end do it too, as they do from the message line.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "toggle_node", "Fold", show=False),
        Binding("ctrl+home", "scroll_home", "First", show=False),
        Binding("ctrl+end", "scroll_end", "Last", show=False),
    ]

    def __init__(self, self_pid: str, *, tz: tzinfo | None = None, id: str | None = None) -> None:
        super().__init__("conversation", id=id)
        self.show_root = False
        self.auto_expand = False
        self.guide_depth = 3
        self.self_pid = self_pid
        self.tz = tz
        self.model: ThreadTree | None = None
        self._by_mid: dict[str, TreeNode[str]] = {}
        self._mirroring = False  # True while we expand/collapse nodes to match the model

    # ---------------------------------------------------------------- queries

    @property
    def cursor_mid(self) -> str | None:
        node = self.cursor_node
        return node.data if node is not None else None

    def node_for(self, mid: str) -> TreeNode[str] | None:
        return self._by_mid.get(mid)

    # --------------------------------------------------------------- building

    def show(self, model: ThreadTree | None, *, cursor: str | None = None) -> None:
        """Display ``model`` from scratch; put the cursor on ``cursor`` if given."""
        keep = cursor or (self.cursor_mid if model is self.model else None)
        self.model = model
        self._mirroring = True
        try:
            self.clear()
            self._by_mid.clear()
            if model is None:
                return
            pending = deque((self.root, mid) for mid in model.children(ROOT))
            while pending:
                parent_node, mid = pending.popleft()
                node = self._add(parent_node, mid, None)
                pending.extend((node, child) for child in model.children(mid))
        finally:
            self._mirroring = False
        if keep is None:
            keep = self._landing(model)
        if keep is not None:
            self.move_to(keep)

    @staticmethod
    def _landing(model: ThreadTree) -> str | None:
        """Where the cursor starts: the first unread message on screen, else the last one.

        Folded threads stay folded (their label counts what is new inside).
        """
        visible = [mid for _, mid in model.walk(skip_collapsed=True)]
        for mid in visible:
            if model.is_unread(mid):
                return mid
        return visible[-1] if visible else None

    def _label(self, mid: str) -> Text:
        assert self.model is not None
        depth = self.model.depth(mid)
        return message_label(self.model, mid, self.self_pid, self.tz,
                             depth=depth if depth >= MAX_INDENT else None)

    def _add(self, parent_node: TreeNode[str], mid: str, before: int | None) -> TreeNode[str]:
        assert self.model is not None
        model = self.model
        has_children = bool(model.children(mid))
        node = parent_node.add(self._label(mid), data=mid,
                               before=before, expand=not model.is_collapsed(mid),
                               allow_expand=has_children)
        self._by_mid[mid] = node
        return node

    def message_added(self, mid: str, *, restructured: bool) -> None:
        """Mirror one new message of the model."""
        model = self.model
        if model is None or (mid in self._by_mid and not restructured):
            return
        parent_mid = model.parent_of(mid)
        parent_node = self.root if parent_mid == ROOT else self._by_mid.get(parent_mid)
        if restructured or parent_node is None:
            self.show(model)
            return
        siblings = len(parent_node.children)
        index = model.sibling_index(mid)
        self._mirroring = True
        try:
            self._add(parent_node, mid, index if index < siblings else None)
            if parent_node is not self.root:
                parent_node.allow_expand = True
                if not model.is_collapsed(parent_mid):
                    parent_node.expand()
        finally:
            self._mirroring = False
        self.refresh_ancestors(mid)

    def refresh_label(self, mid: str) -> None:
        node = self._by_mid.get(mid)
        if node is not None and self.model is not None:
            node.set_label(self._label(mid))

    def refresh_ancestors(self, mid: str) -> None:
        """Folded ancestors show counts of what is under them: redraw them."""
        if self.model is None:
            return
        node = mid
        while node != ROOT:
            node = self.model.parent_of(node)
            if node != ROOT:
                self.refresh_label(node)

    def refresh_all_labels(self) -> None:
        for mid in self._by_mid:
            self.refresh_label(mid)

    # ------------------------------------------------------- capped indentation

    def _build(self) -> None:
        """Lay out the lines as Tree does, then draw lines deeper than MAX_INDENT levels
        at that depth: a line's guides are drawn from its path of ancestors, so the
        path keeps the top MAX_INDENT - 1 ancestors and the node itself.

        This reaches into Tree's line cache (``_tree_lines_cached``, ``path``); if a
        Textual release changes it, the lines are left as they are (indentation
        uncapped) rather than failing.
        """
        super()._build()
        lines = getattr(self, "_tree_lines_cached", None)
        keep = MAX_INDENT + 1
        if not lines or not all(hasattr(line, "path") for line in lines):
            return
        trimmed = False
        for line in lines:
            if len(line.path) > keep:
                line.path = [*line.path[:keep - 1], line.path[-1]]
                trimmed = True
        if trimmed:     # the widest line is narrower now: no needless sideways scrolling
            width = max(self.get_label_width(line.node)
                        + line._get_guide_width(self.guide_depth, self.show_root)
                        for line in lines)
            self.virtual_size = Size(width, len(lines))

    # ---------------------------------------------------------------- cursor

    def move_to(self, mid: str) -> None:
        """Put the cursor on ``mid``, unfolding its ancestors if needed."""
        node = self._by_mid.get(mid)
        if node is None or self.model is None:
            return
        ancestor = node.parent
        while ancestor is not None and ancestor is not self.root:
            if not ancestor.is_expanded:
                ancestor.expand()   # fires NodeExpanded: the model learns it too
            ancestor = ancestor.parent
        _ = self.last_line  # lay out the lines now so the node knows its line
        line_before = self.cursor_line
        self.move_cursor(node)
        if self.cursor_line == line_before:
            # Tree only announces a highlight when the line number changes; a new
            # node on the same line is still news (it gets marked read).
            self.post_message(Tree.NodeHighlighted(node))

    # ------------------------------------------------------- folding (model side)

    def sync_fold(self, node: TreeNode[str], collapsed: bool) -> None:
        """The user folded or unfolded ``node``: record it and redraw its label."""
        if self._mirroring or self.model is None or node.data is None:
            return
        self.model.set_collapsed(node.data, collapsed)
        self.refresh_label(node.data)
