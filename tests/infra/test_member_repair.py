"""A member on a lossy cell: one NACK asks for the holes close together, and a member
behind does not send its own messages again (docs/decisions.md, "A NACK asks for the
holes close together" and "A member behind does not send its messages again")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_member import ack_last, delivered, frames, joined, member, rec

from m2mc.infra import messages as m
from m2mc.infra.member_nack import NACK_MISSING_SHARE, nack_end


@given(st.integers(0, 50), st.sets(st.integers(1, 140), min_size=1), st.integers(1, 64))
def test_a_nack_ends_on_a_hole_and_at_least_a_third_of_it_is_missing(
        mystable: int, held_offsets: set[int], chunk: int) -> None:
    held = {mystable + 1 + o for o in held_offsets}
    first = min(held)
    if first == mystable + 1:
        return  # nothing missing at the front: the member delivers, no NACK
    cap = min(max(held) + 1, mystable + 1 + chunk)
    end = nack_end(held, mystable, first, max(cap, first))
    assert first <= end <= max(cap, first)  # the first run of holes, always
    span = range(mystable + 1, end)
    missing = [g for g in span if g not in held]
    assert missing[:first - mystable - 1] == list(range(mystable + 1, first))
    assert end - 1 not in held  # it ends on a hole
    assert len(missing) * NACK_MISSING_SHARE >= len(span)
    # and it could not have gone further on those terms
    for later in range(end + 1, max(cap, first) + 1):
        if later - 1 not in held:
            extra = sum(1 for g in range(mystable + 1, later) if g not in held)
            assert extra * NACK_MISSING_SHARE < later - mystable - 1


def test_holes_close_together_are_asked_for_in_one_nack() -> None:
    core = member(nack_timer=1.0)
    joined(core)  # "has joined" at 1
    frames(core)
    # 2 lost, 3 held, 4 lost, 5 held, 6 and 7 lost, 8 held, then 9..20 held
    core.receive(m.Normals("G", tuple(rec(g) for g in (3, 5, 8, *range(9, 21)))), 0.0)
    (nack,) = [f for f in frames(core) if isinstance(f, m.NackReq)]
    assert (nack.s1, nack.s2) == (1, 8)  # 2, 4, 6 and 7 (with 3 and 5 again)
    ack_last(core)
    core.receive(m.Transfer("G", core.mid, tuple(rec(g) for g in range(2, 8))), 0.1)  # type: ignore[arg-type]
    assert delivered(core) == list(range(2, 21))


def test_a_lone_hole_is_asked_for_alone() -> None:
    core = member()
    joined(core)
    frames(core)
    core.receive(m.Normals("G", tuple(rec(g) for g in range(3, 40))), 0.0)
    (nack,) = [f for f in frames(core) if isinstance(f, m.NackReq)]
    assert (nack.s1, nack.s2) == (1, 3)  # nothing it holds is sent again


def test_a_member_behind_waits_to_be_caught_up_before_sending_its_own_again() -> None:
    core = member(confirm_timeout=2.0, nack_timer=10.0)
    joined(core)
    frames(core)
    core.send(b"x", 0.0)
    ack_last(core)
    frames(core)
    core.receive(m.Normals("G", (rec(3),)), 0.1)  # 2 is missing: we are behind
    (nack,) = frames(core)
    assert isinstance(nack, m.NackReq)
    ack_last(core, 0.1)
    core.on_timer(2.5)  # acked, not seen, but 2 may be ours: no resend while behind
    assert [f for f in frames(core) if isinstance(f, m.NewReq)] == []
    deadline = core.next_deadline()
    assert deadline is not None and deadline > 2.5  # no timer of a resend that would spin
    core.receive(m.Transfer("G", core.mid, (rec(2),)), 2.6)  # 2 was B's, not ours
    assert delivered(core) == [2, 3]
    core.on_timer(2.6)  # caught up, still not seen: sent again
    (again,) = [f for f in frames(core) if isinstance(f, m.NewReq)]
    assert again.items[0].nseq == 1
