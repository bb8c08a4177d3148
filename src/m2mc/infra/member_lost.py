"""A member's membership ending without the member delivering its end: expelled
while away (its record freed since: the gateway says NotMember), or gone with a
sequence every host lost (a beacon names another sequence). Split from
:mod:`m2mc.infra.member`; sans-IO, these functions see the member only through the
narrow port :class:`~m2mc.infra.member_ports.LostSeat`."""

from __future__ import annotations

from m2mc.infra import messages as msg
from m2mc.infra.member_events import Phase
from m2mc.infra.member_ports import LostSeat


def not_member(core: LostSeat, now: float) -> None:
    """Our membership ended without us delivering its end: behave as if expelled now."""
    if core.phase in (Phase.MEMBER, Phase.LEAVING):
        assert core.mid is not None
        if core.power_on:  # switched off longer than the hosts kept us (persist.py)
            core.stats.resumes_refused += 1
        core.deliver(msg.Record(0, core.mystable, msg.EXPELLED, core.mid), now)
    elif core.phase == Phase.CLOSING:
        core.phase = Phase.LEFT  # our LEAVEOK was processed; its ack got lost
        core.sender.abandon()


def new_sequence(core: LostSeat, b: msg.Beacon, now: float) -> None:
    """The hosts run another sequence than ours: every one of them lost its state
    (docs/infra.md, "Hosts without a data directory"). Our membership went with it:
    it ends as an expulsion at ``mystable`` (the rest of the old sequence is lost to
    us, and counted in ``stats.sequence_lost``), and we join the new sequence."""
    old, core.sequence = core.sequence, b.sequence
    if not old or core.phase in (Phase.IDLE, Phase.LEFT):
        return  # the first sequence we hear of
    core.stats.sequence_lost += 1
    core.last_high = b.high
    if core.phase == Phase.JOINING:
        core.phase = Phase.LEFT  # our JOIN went to the old sequence
        core.join(now, core.join_groups)
    else:
        not_member(core, now)
