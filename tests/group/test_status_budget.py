"""Statuses have a budget (group/status_budget.py): a fixed size whatever the group's
size, the changes first, everything in turn, and a period that keeps the group's
statuses within their share of its data rate."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from m2mc.group.codec import Body
from m2mc.group.config import GroupConfig
from m2mc.group.messages import MemberEntry, Status
from m2mc.group.status_budget import StatusBudget, StatusSlicer, status_bytes

from .harness import Net

GID = "g-status"
PIDS = [f"n{i:03d}" for i in range(100)]
HIGH_WATERS = {pid: i + 1 for i, pid in enumerate(PIDS)}
ENTRIES = tuple(MemberEntry(pid, 1, True) for pid in PIDS)


def test_a_small_group_says_everything_in_every_status() -> None:
    slicer = StatusSlicer(8)
    few = dict(list(HIGH_WATERS.items())[:8])
    assert slicer.summary(few, fill=True) == few
    assert slicer.summary(few, fill=False) == few
    assert slicer.members(ENTRIES[:8], fill=False) == ENTRIES[:8]


@given(st.integers(min_value=1, max_value=20))
def test_periodic_statuses_go_round_every_high_water_and_entry(limit: int) -> None:
    slicer = StatusSlicer(limit)
    rounds = -(-len(PIDS) // limit)
    said: set[str] = set()
    told: set[str] = set()
    for _ in range(rounds):
        summary = slicer.summary(HIGH_WATERS, fill=True)
        members = slicer.members(ENTRIES, fill=True)
        assert len(summary) == len(members) == min(limit, len(PIDS))
        assert all(HIGH_WATERS[pid] == hw for pid, hw in summary.items())
        said |= summary.keys()
        told |= {e.pid for e in members}
    assert said == told == set(PIDS)


def test_what_changed_goes_first_and_a_status_after_sending_carries_only_that() -> None:
    slicer = StatusSlicer(8)
    slicer.summary(HIGH_WATERS, fill=True)  # the rotation has started somewhere
    slicer.read_from("n050")
    slicer.read_from("n099")
    slicer.membership_changed(["n042"])
    assert slicer.summary(HIGH_WATERS, fill=False) == {"n050": 51, "n099": 100}
    assert slicer.members(ENTRIES, fill=False) == (ENTRIES[42],)
    # said once: the next status after sending carries nothing more
    assert slicer.summary(HIGH_WATERS, fill=False) == {}
    slicer.read_from("n007")
    periodic = slicer.summary(HIGH_WATERS, fill=True)
    assert "n007" in periodic and len(periodic) == 8


def test_a_status_is_the_same_size_whatever_the_group() -> None:
    sizes = []
    for n in (10, 100, 1000):
        pids = [f"n{i:04d}" for i in range(n)]
        slicer = StatusSlicer(8)
        summary = slicer.summary({pid: 1 for pid in pids}, fill=True)
        members = slicer.members(tuple(MemberEntry(pid, 1, True) for pid in pids), fill=True)
        sizes.append(status_bytes(summary, members))
    assert len(set(sizes)) == 1


def test_the_period_keeps_the_budget_and_never_goes_below_status_interval() -> None:
    config = GroupConfig()
    size = 120
    small = StatusBudget(config)
    assert small.interval(0.0, 4, size) == config.status_interval
    assert StatusBudget(config).interval(0.0, config.status_slice, size) \
        == config.status_interval
    idle = StatusBudget(config)
    period = idle.interval(0.0, 100, size)
    # the mean of [T/2, T], over 100 members, is the budget of an idle group: the floor
    assert period > config.status_interval
    assert 100 * size / (0.75 * period) <= config.status_floor * 1.0001
    busy = StatusBudget(config)
    for t in range(1, 61):  # 20 KB/s of data for a minute
        busy.data(20_000)
        quick = busy.interval(float(t), 100, size)
    assert config.status_interval <= quick < period
    assert 100 * size / (0.75 * quick) <= config.status_share * 20_000 * 1.05


def test_a_periodic_status_carries_the_freshest_reads_and_half_goes_round() -> None:
    slicer = StatusSlicer(8, start="n050")
    for pid in PIDS[:40]:  # more than a status can carry, read since the last one
        slicer.read_from(pid)
    slicer.read_from("n003")  # read again: fresh again
    periodic = slicer.summary(HIGH_WATERS, fill=True)
    assert len(periodic) == 8
    assert {"n003", "n039", "n038", "n037"} <= periodic.keys()  # the four freshest
    assert periodic.keys() - set(PIDS[:40]) == {"n051", "n052", "n053", "n054"}  # in turn


def test_each_member_goes_round_from_its_own_place() -> None:
    # In a large group a member sends few statuses: turns that all began at the first
    # pid would tell of the same few members (and never of a message the others lost).
    first = {pid: set(StatusSlicer(8, start=pid).summary(HIGH_WATERS, fill=True))
             for pid in ("n010", "n050", "n090")}
    assert first["n050"] == {f"n{i:03d}" for i in range(51, 59)}
    assert not first["n010"] & first["n050"] and not first["n050"] & first["n090"]


# ---------------------------------------------------------------- in a group
def large_group(size: int, loss: float) -> tuple[Net, list[str]]:
    net = Net(seed=5, loss=loss, tracing=False)
    pids = [f"m{i:02d}" for i in range(size)]
    for pid in pids:
        net.add(pid)
    net.do(pids[0], lambda n: n.create_group("room", net.now, gid=GID))
    net.run(0.5)
    for pid in pids[1:]:
        net.do(pid, lambda n: n.join_group(GID, net.now, order="sb"))
    net.run(3.0)
    return net, pids


def test_in_a_large_group_the_status_after_sending_is_bare() -> None:
    net, pids = large_group(12, loss=0.0)
    node = net.nodes[pids[3]]
    statuses: list[tuple[float, Status]] = []
    original = node.send_body

    def spy(tag: bytes, body: Body) -> None:
        original(tag, body)
        if isinstance(body, Status):
            statuses.append((net.now, body))

    node.send_body = spy  # type: ignore[method-assign]
    sent_at = net.now
    net.send(pids[3], GID, b"hello, room")
    net.run(0.5)
    after = [st for t, st in statuses if t - sent_at <= 0.2]
    assert after, "a status follows the data"
    assert all(st.own_hw == 1 and not st.summary and not st.members for st in after)
    net.run(120.0)  # the periodic ones: a slice each
    periodic = [st for t, st in statuses if t - sent_at > 0.2]
    assert periodic and all(len(st.summary) <= 8 and len(st.members) <= 8 for st in periodic)


def test_a_large_lossy_group_still_delivers_every_last_message() -> None:
    # Every message is its sender's last (one each): only statuses tell a member
    # that lost one that it exists.
    net, pids = large_group(20, loss=0.1)
    for pid in pids:
        net.send(pid, GID, f"from {pid}".encode())
        net.run(0.2)
    net.run(60.0)
    net.check_group(GID, pids)


def test_a_mass_join_is_told_within_seconds_not_at_the_budgets_pace() -> None:
    # Thirty members join by name within three seconds, 10% of each JOIN lost: those
    # who missed one hear of it from the joiner's own statuses (its entry is in every
    # one) and from the news statuses of those who heard it (group/status_clock.py).
    net = Net(seed=7, loss=0.1, tracing=False)
    pids = [f"m{i:02d}" for i in range(30)]
    for pid in pids:
        net.add(pid)
    spread = random.Random(7)
    for pid in pids:
        net.run(spread.uniform(0.0, 0.2))
        net.do(pid, lambda n: n.join_group(GID, net.now, order="causal"))
    waited = 0
    while min(len(net.nodes[pid].members(GID)) for pid in pids) < len(pids):
        # 12 s here (5 s when every member sent everything every 0.5-1 s; 36 s at the
        # budget's pace, with no news statuses and no own entry in every status)
        assert waited < 20, "every member sees every other within 20 s of the last join"
        net.run(1.0)
        waited += 1
