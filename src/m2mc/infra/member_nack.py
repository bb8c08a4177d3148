"""A member's NACKs (seeds/001 3.3, figure 6 lines 14-23), split from
:mod:`m2mc.infra.member`; sans-IO, on the core's own state.

``mylow`` is kept as ``seen_high`` (the highest sequence number known to exist);
while the NACK timer runs no further NACK is sent. No NACK while the application has
no room (the core is paused) or while a catch-up after a return reads the hosts' log
first (:mod:`m2mc.infra.member_history`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m2mc.infra import messages as msg
from m2mc.infra.member_events import Phase
from m2mc.trace.schema import detail_json

if TYPE_CHECKING:
    from m2mc.infra.member import MemberCore


def nack_now(core: MemberCore) -> msg.NackReq | None:
    if core.seen_high <= core.mystable or core.mid is None or core.paused \
            or core.catchup is not None \
            or core.phase not in (Phase.JOINING, Phase.MEMBER, Phase.LEAVING):
        return None  # mylow = 0, nothing more to deliver, or no room: not now
    s2 = min(core.mybuf) if core.mybuf else core.seen_high + 1
    if core.phase == Phase.JOINING:
        # Which multicasts we need starts at our "has joined", unknown yet: ask
        # for all we know of; the gateway starts the transfer at first[mid].
        s2 = core.seen_high + 1
    return msg.NackReq(core.node, "", 0, core.mid, core.mystable, s2)


def maybe_nack(core: MemberCore, now: float) -> None:
    if core.mynack is not None:
        return  # the timer runs: no further NACK (lines 14-17)
    nack = nack_now(core)
    if nack is not None:
        send_nack(core, nack, now)


def send_nack(core: MemberCore, nack: msg.NackReq, now: float) -> None:
    core.mynack = nack
    core._nack_pending = nack
    out = core._sender.outstanding
    if out is not None and isinstance(out.frame, msg.NackReq):
        core._sender.abandon()  # the newer NACK supersedes the unacknowledged one
    core._nack_timer = now + core.cfg.nack_timer
    core.stats.nacks += 1
    if core.trace.enabled:
        # gseq_ranges: the sequence numbers asked for (s1 < gseq < s2), as the group
        # layer's NACKs name theirs: what the pipeline's time to repair starts from.
        wanted = [[nack.s1 + 1, nack.s2 - 1]] if nack.s2 - nack.s1 > 1 else []
        core._emit("nack", now, detail=detail_json(s1=nack.s1, s2=nack.s2,
                                                   gseq_ranges=wanted))
    core._pump(now)


def nack_expired(core: MemberCore, now: float) -> None:
    """Figure 6 lines 18-23."""
    core._nack_timer = None
    nack = nack_now(core)
    if nack is not None:
        send_nack(core, nack, now)
    else:
        core.mynack = None
