"""The periodic statuses of a large group sweep its senders together.

In a group larger than ``status_slice`` a periodic status carries a slice of the
senders' high-waters. With each member's turns its own, a given sender came round in a
given status with a chance of about slice / members, and a member that lost a sender's
last message (its data, its copy and its bare status) waited with a geometric tail: 37 s
once on real processes at 50 members (docs/group.md section 7). A member now takes
first the senders no status told lately, its own or one overheard, so the group's
statuses together tell every sender once about every members / slice statuses.
"""

from __future__ import annotations

import math
import random

from m2mc.group.messages import Status
from m2mc.group.status_budget import StatusSlicer

SENDERS = [f"n{i:02d}" for i in range(40)]
LIMIT = 8


def _status(sender: str, summary: dict[str, int]) -> Status:
    return Status(sender, 0, summary, (), None, 0)


def _gaps(rounds: int, overhear: bool, loss: float, seed: int) -> list[int]:
    """Statuses (by any member) between two tellings of a sender's high-water, heard by
    a listener that loses ``loss`` of them, for 20 members that all know every sender."""
    rng = random.Random(seed)
    high_waters = {pid: 3 for pid in SENDERS}
    members = SENDERS[:20]
    slicers = {pid: StatusSlicer(LIMIT, start=pid) for pid in members}
    last = dict.fromkeys(SENDERS, 0)
    gaps: list[int] = []
    for step in range(1, rounds + 1):
        speaker = rng.choice(members)
        summary = slicers[speaker].summary(high_waters, fill=True)
        assert len(summary) == LIMIT
        for pid, slicer in slicers.items():
            if pid != speaker and overhear and rng.random() >= loss:
                slicer.heard(_status(speaker, summary), high_waters.get)
        if rng.random() >= loss:  # the listener heard it
            for pid in summary:
                gaps.append(step - last[pid])
                last[pid] = step
    return gaps


def test_the_group_tells_every_sender_once_a_sweep() -> None:
    sweep = math.ceil(len(SENDERS) / LIMIT)  # 5 statuses
    for seed in range(5):
        gaps = _gaps(400, overhear=True, loss=0.0, seed=seed)
        assert max(gaps) <= sweep + 1, (seed, max(gaps))


def test_each_members_own_turns_left_a_long_tail() -> None:
    """The same without overhearing (every member in its own turn, as before)."""
    gaps = [g for seed in range(5) for g in _gaps(400, overhear=False, loss=0.0, seed=seed)]
    assert max(gaps) > 3 * math.ceil(len(SENDERS) / LIMIT)


def test_at_ten_percent_loss_the_tail_stays_short() -> None:
    """A listener that loses a tenth of the statuses (and members that lose a tenth
    of each other's) waits a sweep more now and then: the mean gap is the same either
    way (each status tells 8 of 40), the tail is shorter (20 seeds: p99 14 statuses
    against 22, the longest 24 against 46)."""
    def p99(gaps: list[int]) -> int:
        return sorted(gaps)[int(0.99 * len(gaps))]

    swept = [g for seed in range(20) for g in _gaps(400, overhear=True, loss=0.1, seed=seed)]
    own = [g for seed in range(20) for g in _gaps(400, overhear=False, loss=0.1, seed=seed)]
    assert p99(swept) <= 15 and p99(own) >= 20, (p99(swept), p99(own))
    assert max(swept) < max(own) * 0.6, (max(swept), max(own))


def test_a_high_water_told_below_ours_does_not_count() -> None:
    slicer = StatusSlicer(LIMIT, start="n00")
    ours = {pid: 5 for pid in SENDERS}
    slicer.heard(_status("n01", {pid: 4 for pid in SENDERS[:30]}), ours.get)  # behind what we know
    first = slicer.summary(ours, fill=True)
    slicer = StatusSlicer(LIMIT, start="n00")
    plain = slicer.summary(ours, fill=True)
    assert first == plain  # the same turn: nothing counted as told
    slicer = StatusSlicer(LIMIT, start="n00")
    slicer.heard(_status("n01", {pid: 5 for pid in SENDERS[:30]}), ours.get)
    assert set(slicer.summary(ours, fill=True)) <= set(SENDERS[30:])  # the untold first
