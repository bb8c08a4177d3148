"""A member's NACKs (seeds/001 3.3, figure 6 lines 14-23): :class:`Nacks`, one object
of a :class:`~m2mc.infra.member.MemberCore` holding ``mynack``, the NACK timer and the
NACK waiting for the uplink; it sees the member only through the narrow port
:class:`~m2mc.infra.member_ports.NackSeat`. Sans-IO.

``mylow`` is kept as ``seen_high`` (the highest sequence number known to exist);
while the NACK timer runs no further NACK is sent. No NACK while the application has
no room (the core is paused) or while a catch-up after a return reads the hosts' log
first (:mod:`m2mc.infra.member_history`).
"""

from __future__ import annotations

from collections.abc import Container

from m2mc.infra import messages as msg
from m2mc.infra.member_events import Phase
from m2mc.infra.member_ports import NackSeat
from m2mc.trace.schema import detail_json

# A NACK's range may take in records the member holds, so that one round trip repairs
# several holes; at least this share of the range is missing records.
NACK_MISSING_SHARE = 3


def nack_end(held: Container[int], mystable: int, first_held: int,
             cap: int) -> int:
    """Where a NACK's range (mystable, s2) ends: past the first run of holes (up to
    ``first_held``, seeds/001 figure 6), then past each further hole below ``cap``
    while at least a third of the range is still missing records. One NACK then
    repairs the holes that loss left close together, and sends again at most two
    held records for each missing one (docs/decisions.md, "A NACK asks for the holes
    close together")."""
    end = first_held
    missing = first_held - mystable - 1
    g = first_held
    while g < cap:
        if g not in held:
            missing += 1
            if missing * NACK_MISSING_SHARE >= g - mystable:
                end = g + 1
        g += 1
    return end


class Nacks:
    __slots__ = ("mynack", "pending", "seat", "timer")

    def __init__(self, seat: NackSeat) -> None:
        self.seat = seat
        self.mynack: msg.NackReq | None = None
        self.timer: float | None = None  # the NACK timer (figure 6), when it runs out
        self.pending: msg.NackReq | None = None  # the next NACK the uplink sends

    def reset(self) -> None:
        """A new membership: no NACK outstanding."""
        self.mynack = None
        self.timer = None
        self.pending = None

    def take_pending(self) -> msg.NackReq | None:
        n, self.pending = self.pending, None
        return n

    def nack_now(self) -> msg.NackReq | None:
        core = self.seat
        if core.seen_high <= core.mystable or core.mid is None or core.paused \
                or core.catchup is not None \
                or core.phase not in (Phase.JOINING, Phase.MEMBER, Phase.LEAVING):
            return None  # mylow = 0, nothing more to deliver, or no room: not now
        if core.mybuf:
            s2 = nack_end(core.mybuf, core.mystable, min(core.mybuf),
                          min(core.seen_high + 1, core.mystable + 1 + core.cfg.transfer_chunk))
        else:
            s2 = core.seen_high + 1
        if core.phase == Phase.JOINING:
            # Which multicasts we need starts at our "has joined", unknown yet: ask
            # for all we know of; the gateway starts the transfer at first[mid].
            s2 = core.seen_high + 1
        return msg.NackReq(core.node, "", 0, core.mid, core.mystable, s2)

    def maybe_nack(self, now: float) -> None:
        if self.mynack is not None:
            return  # the timer runs: no further NACK (lines 14-17)
        nack = self.nack_now()
        if nack is not None:
            self.send_nack(nack, now)

    def send_nack(self, nack: msg.NackReq, now: float) -> None:
        core = self.seat
        self.mynack = nack
        self.pending = nack
        core.sender.abandon_nacks()  # the newer NACK supersedes the unacknowledged one
        self.timer = now + core.cfg.nack_timer
        core.stats.nacks += 1
        if core.trace.enabled:
            # gseq_ranges: the sequence numbers asked for (s1 < gseq < s2), as the group
            # layer's NACKs name theirs: what the pipeline's time to repair starts from.
            wanted = [[nack.s1 + 1, nack.s2 - 1]] if nack.s2 - nack.s1 > 1 else []
            core.emit("nack", now, detail=detail_json(s1=nack.s1, s2=nack.s2,
                                                      gseq_ranges=wanted))
        core.pump(now)

    def expired(self, now: float) -> None:
        """Figure 6 lines 18-23."""
        self.timer = None
        nack = self.nack_now()
        if nack is not None:
            self.send_nack(nack, now)
        else:
            self.mynack = None


__all__ = ["Nacks"]
