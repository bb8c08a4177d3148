"""The thread tree of one group's conversation (seeds/000 section II, Fig. 4).

Every chat message answers at most one other message (its *parent*, the ``mid_p``
of the seed) or starts a thread (parent ``""``, the ordering-tree root). The
group layer delivers in S_b order, so a reply normally arrives after what it
answers; this model does not rely on it. A reply whose parent has not arrived
yet hangs under a *placeholder* for the missing parent at the top level; when the
parent arrives, the placeholder becomes that message and moves under its own
parent. The final tree depends only on the set of messages, never on the order
they arrived in, which is what lets every member show the same conversation.

Siblings are shown in the order their senders wrote them (the sender's clock,
carried in the message), ties broken by message identity; transcripts sort
children by identity alone so that they compare equal between members.

Pure data: no clocks, no I/O, no UI.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ROOT", "AddResult", "ChatMessage", "ThreadTree", "mid_key"]

ROOT = ""
"""The parent of a message that starts a thread (the OTR of seeds/003)."""

SortKey = tuple[float, str, int]


def mid_key(mid: str) -> tuple[str, int]:
    """Sort key of a message identity ``"pid:seq"``: pid, then the number ``seq``.

    ``"b:10"`` sorts after ``"b:9"``. An identity without a numeric sequence number
    sorts by its whole text.
    """
    pid, sep, seq = mid.rpartition(":")
    if sep and seq.isdigit() and seq.isascii():
        return (pid, int(seq))
    return (mid, -1)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message as every member sees it.

    ``mid`` is ``"pid:seq"`` (seeds/000 IV.C.1), ``parent`` the mid it answers or
    :data:`ROOT`, ``author`` the sender's pid, ``nick`` the name the sender chose,
    ``sent_at`` the sender's clock in seconds (only used to order siblings).
    """

    mid: str
    parent: str
    author: str
    nick: str
    text: str
    sent_at: float


@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`ThreadTree.add` did.

    ``added`` is False for a duplicate. ``restructured`` is True when nodes other
    than the new one changed place (a placeholder appeared or became a message),
    so a view that inserts nodes one by one must rebuild instead.
    """

    added: bool
    restructured: bool = False


class ThreadTree:
    """The conversation of one group: messages, placeholders, unread and collapse marks."""

    def __init__(self) -> None:
        self._messages: dict[str, ChatMessage] = {}
        # Every node (message or placeholder) has a parent and a sort key; ROOT has neither.
        self._parent: dict[str, str] = {}
        self._keys: dict[str, SortKey] = {}
        self._children: dict[str, list[str]] = {ROOT: []}
        self._unread: set[str] = set()
        self._collapsed: set[str] = set()
        self.anomalies = 0
        """Messages whose parent would have made a cycle; they were put at the top level."""

    # ----------------------------------------------------------------- building

    def add(self, message: ChatMessage, *, unread: bool = False) -> AddResult:
        """Insert ``message``; a second copy of a known mid is ignored."""
        mid = message.mid
        if not mid:
            raise ValueError("a chat message needs a non-empty mid")
        if mid in self._messages:
            return AddResult(added=False)
        was_placeholder = mid in self._parent
        parent = message.parent
        # A parent that is the message itself or hangs below it would close a cycle
        # (only a faulty or hostile sender can do that): keep the message, at the top.
        if parent == mid or (was_placeholder and parent != ROOT and self._is_below(parent, mid)):
            self.anomalies += 1
            parent = ROOT
        if was_placeholder:
            self._detach(mid)
        self._messages[mid] = message
        self._keys[mid] = (message.sent_at, *mid_key(mid))
        created_placeholder = False
        if parent != ROOT and parent not in self._parent:
            self._attach(parent, ROOT, (message.sent_at, *mid_key(parent)))
            created_placeholder = True
        self._attach(mid, parent, self._keys[mid])
        if unread:
            self._unread.add(mid)
        return AddResult(added=True, restructured=was_placeholder or created_placeholder)

    def _attach(self, mid: str, parent: str, key: SortKey) -> None:
        self._parent[mid] = parent
        self._keys[mid] = key
        self._children.setdefault(mid, [])
        siblings = self._children.setdefault(parent, [])
        bisect.insort(siblings, mid, key=self._keys.__getitem__)

    def _detach(self, mid: str) -> None:
        siblings = self._children[self._parent[mid]]
        siblings.remove(mid)

    def _is_below(self, node: str, ancestor: str) -> bool:
        """True if ``node`` is ``ancestor`` or one of its descendants."""
        while node != ROOT:
            if node == ancestor:
                return True
            node = self._parent.get(node, ROOT)
        return False

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        """The number of messages (placeholders not counted)."""
        return len(self._messages)

    def __contains__(self, mid: object) -> bool:
        return mid in self._messages

    def get(self, mid: str) -> ChatMessage | None:
        return self._messages.get(mid)

    def has_node(self, mid: str) -> bool:
        """True for a message or a placeholder."""
        return mid in self._parent

    def is_placeholder(self, mid: str) -> bool:
        return mid in self._parent and mid not in self._messages

    def parent_of(self, mid: str) -> str:
        """The node ``mid`` hangs under (``ROOT`` at the top level)."""
        return self._parent[mid]

    def children(self, mid: str = ROOT) -> Sequence[str]:
        """The nodes under ``mid`` in display order."""
        return tuple(self._children.get(mid, ()))

    def sibling_index(self, mid: str) -> int:
        """Position of ``mid`` among the children of its parent, in display order."""
        return self._children[self._parent[mid]].index(mid)

    def walk(self, *, skip_collapsed: bool = False) -> Iterator[tuple[int, str]]:
        """``(depth, mid)`` of every node in display order (depth-first, pre-order).

        With ``skip_collapsed`` the nodes under a collapsed one are left out, which
        is what a screen shows.
        """
        stack: list[tuple[int, str]] = [(0, mid) for mid in reversed(self._children[ROOT])]
        while stack:
            depth, mid = stack.pop()
            yield depth, mid
            if skip_collapsed and mid in self._collapsed:
                continue
            stack.extend((depth + 1, child) for child in reversed(self._children[mid]))

    def display_order(self) -> list[str]:
        """The mids of all messages in display order, every thread expanded."""
        return [mid for _, mid in self.walk() if mid in self._messages]

    def nth(self, n: int) -> str:
        """The ``n``-th message (1-based) in :meth:`display_order`."""
        order = self.display_order()
        if not 1 <= n <= len(order):
            raise IndexError(f"there is no message number {n}; the tree holds {len(order)}")
        return order[n - 1]

    def descendants(self, mid: str) -> Iterator[str]:
        stack = list(self._children.get(mid, ()))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(self._children[node])

    def subtree_size(self, mid: str) -> int:
        """Messages below ``mid`` (not counting itself)."""
        return sum(1 for node in self.descendants(mid) if node in self._messages)

    def subtree_unread(self, mid: str) -> int:
        """Unread messages below ``mid`` (not counting itself)."""
        return sum(1 for node in self.descendants(mid) if node in self._unread)

    def depth(self, mid: str) -> int:
        depth = 0
        while (mid := self._parent[mid]) != ROOT:
            depth += 1
        return depth

    # ------------------------------------------------------------------- unread

    @property
    def unread_count(self) -> int:
        return len(self._unread)

    def is_unread(self, mid: str) -> bool:
        return mid in self._unread

    def unread_mids(self) -> frozenset[str]:
        return frozenset(self._unread)

    def mark_read(self, mid: str) -> bool:
        """Clear the unread mark of ``mid``; True if it was unread."""
        if mid in self._unread:
            self._unread.discard(mid)
            return True
        return False

    def mark_all_read(self) -> int:
        count = len(self._unread)
        self._unread.clear()
        return count

    def next_unread(self, after: str | None = None) -> str | None:
        """The first unread message after ``after`` in display order, wrapping around."""
        if not self._unread:
            return None
        order = self.display_order()
        start = order.index(after) + 1 if after in self._messages else 0
        for mid in order[start:] + order[:start]:
            if mid in self._unread:
                return mid
        return None

    # ----------------------------------------------------------------- collapse

    def is_collapsed(self, mid: str) -> bool:
        return mid in self._collapsed

    def set_collapsed(self, mid: str, collapsed: bool) -> None:
        if collapsed and self.has_node(mid):
            self._collapsed.add(mid)
        else:
            self._collapsed.discard(mid)

    def collapsed_mids(self) -> frozenset[str]:
        return frozenset(self._collapsed)

    def collapse_all(self) -> None:
        self._collapsed = {mid for mid, kids in self._children.items() if kids and mid != ROOT}

    def expand_all(self) -> None:
        self._collapsed.clear()

    # --------------------------------------------------------------- transcript

    def transcript(self) -> list[dict[str, Any]]:
        """The tree as nested dicts, children sorted by mid: equal at every member.

        Each node: ``{"mid", "parent", "author", "nick", "text", "children"}``; a
        placeholder for a message that never arrived is ``{"mid", "missing": true,
        "children"}``.
        """

        # Iterative, so that a very deep thread cannot hit the recursion limit.
        nodes: dict[str, dict[str, Any]] = {}
        for mid in self._parent:
            message = self._messages.get(mid)
            if message is None:
                nodes[mid] = {"mid": mid, "missing": True, "children": []}
            else:
                nodes[mid] = {"mid": mid, "parent": self._parent[mid], "author": message.author,
                              "nick": message.nick, "text": message.text, "children": []}
        for parent, kids in self._children.items():
            if parent != ROOT:
                nodes[parent]["children"] = [nodes[kid] for kid in sorted(kids, key=mid_key)]
        return [nodes[mid] for mid in sorted(self._children[ROOT], key=mid_key)]
