"""The first repair goes with the data: a node's own records sent again, unasked
(docs/decisions.md, "In a large lossy group the first repair goes unasked").

In a group of n members where each receiver loses a datagram with probability p, some
member lacks a new message with probability ``1 - (1 - p) ** (n - 1)``: at 10% loss
and 100 members, always. Its NACK and the repair that answers it are then certain to
follow, a NACK window later. So in a group larger than ``status_slice`` (where the
status after sending is bare: our high-water only) a node sends, in place of that
status, the records it sent since the last one again, as a REPAIR, when that chance is
at least ``repeat_above``. Those who lost the data have it ``status_delay`` after it
was sent, with no NACK; those who lost both copies learn of it from the copy's
high-water if they got either, or as they did before from the next statuses.

``p`` is this node's own: of the records new to it, the share that came by REPAIR
rather than DATA (over about the last ``WEIGHT`` records, older ones weighing less;
records of a SYNC_RESP, history, are not counted). At 10% loss p is about 0.1; a loss-free node
measures 0 and never repeats. At most ``MAX_PENDING`` records wait for their copy
between two statuses (a fast sender's others are repaired on request as before).
"""

from __future__ import annotations

from m2mc.ordering import Message

WEIGHT = 64  # the moving average's span, in records
_KEEP = 1.0 - 1.0 / WEIGHT
MAX_PENDING = 64  # own records held for their copy between two statuses


class Repeats:
    """What to send again in place of the status after sending (sans-IO)."""

    __slots__ = ("above", "lost", "pending", "seen", "sent")

    def __init__(self, above: float) -> None:
        self.above = above  # repeat when P(some member lacks a message) >= this
        self.seen = 0.0  # new records, older ones weighing less (by _KEEP per record)
        self.lost = 0.0  # ... of them, those that came by repair
        self.pending: list[Message] = []  # our records since the last status after sending
        self.sent = 0  # records sent again (the node's stats: ``repeats_sent``)

    @property
    def loss(self) -> float:
        """Our own loss: the share of new records that came by repair."""
        return self.lost / self.seen if self.seen else 0.0

    def fresh(self, records: int) -> None:
        """``records`` new to us came with their sender's data."""
        if records:
            keep = _KEEP ** records
            self.seen = self.seen * keep + records
            self.lost *= keep

    def repaired(self, records: int) -> None:
        """``records`` new to us came by repair: their data had not reached us."""
        if records:
            keep = _KEEP ** records
            self.seen = self.seen * keep + records
            self.lost = self.lost * keep + records

    def own(self, message: Message) -> None:
        """We sent ``message``."""
        if len(self.pending) < MAX_PENDING:
            self.pending.append(message)

    def lacking(self, members: int) -> float:
        """The chance that some other member of ``members`` lacks a datagram of ours."""
        return 1.0 - (1.0 - self.loss) ** max(0, members - 1)

    def take(self, members: int, bare: bool) -> list[Message]:
        """At the status after sending (``bare``: a large group's, our high-water only):
        the records to send again with it (none when a member is unlikely to lack them)."""
        pending, self.pending = self.pending, []
        if not bare or self.lacking(members) < self.above:
            return []
        self.sent += len(pending)
        return pending
