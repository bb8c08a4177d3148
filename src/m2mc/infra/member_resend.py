"""A member's own NEWs sent again (seeds/001 3.3; docs/infra.md, "Hops and their
reliability", item 5): :class:`Resends`, one object of a
:class:`~m2mc.infra.member.MemberCore`, seeing the member only through the narrow port
:class:`~m2mc.infra.member_ports.ResendSeat`. Sans-IO.

A NEW the gateway acknowledged but the member has not seen in the total order after
``confirm_timeout`` is queued again (a coordinator may have lost it; the coordinator
drops copies by ``recv[mid]``), and so is every such NEW when the member changes
gateway. The timer counts only while the member lacks no record it knows of: one that
is behind (``seen_high`` above ``mystable``: holes its NACKs are filling, or an
application that paused it) cannot tell a NEW that was lost from one sequenced among
the records it still lacks, and sending them all again filled the uplink its NACKs
wait for (docs/decisions.md, "A member behind does not send its messages again").
"""

from __future__ import annotations

from collections import deque

from m2mc.infra.member_ports import ResendSeat


class Resends:
    __slots__ = ("seat",)

    def __init__(self, seat: ResendSeat) -> None:
        self.seat = seat

    def deadline(self) -> float | None:
        """When the oldest NEW not seen in the order is sent again (None: no such NEW,
        or the member is behind)."""
        core = self.seat
        if not core.unconfirmed or core.seen_high > core.mystable:
            return None
        return next(iter(core.unconfirmed.values()))[1] + core.cfg.confirm_timeout

    def requeue(self) -> None:
        """Every NEW acked but not seen in the order, back in the queue in order."""
        core = self.seat
        if not core.unconfirmed:
            return
        queued = {i.nseq for i in core.news}
        again = [item for item, _ in core.unconfirmed.values()
                 if item.nseq not in queued and item.nseq > core.confirmed]
        core.stats.resent_news += len(again)
        core.news = deque(sorted([*again, *core.news], key=lambda i: i.nseq))
        core.unconfirmed.clear()


__all__ = ["Resends"]
