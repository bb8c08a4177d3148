"""Receiver-paced flow control (group/window.py): the sender's window and the
receivers' early statuses.

What a user relies on: a sender never runs more than a window ahead of the members
that are reading; a member that stops acknowledging (crashed, out of range) holds
the sender up for ``wait`` at most; nothing blocks a sender nobody acknowledges.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from m2mc.group.window import RECORD_COST, Credit, SendWindow

LIMIT = 10_000
MEMBERS = ("a", "b", "c")


def cost(size: int) -> int:
    return size + RECORD_COST


def test_nobody_acknowledging_never_blocks() -> None:
    w = SendWindow(LIMIT, 0.5, 16)
    for seq in range(1, 1001):
        w.sent(seq, 1000, 0.0)
    assert not w.blocked and w.in_flight == 0


def test_a_window_of_unacknowledged_bytes_blocks_until_the_slowest_reads() -> None:
    w = SendWindow(LIMIT, 0.5, 16)
    w.acked("a", 1, 0.0)  # a and b acknowledge something: from now on they count
    w.acked("b", 1, 0.0)
    seq = 1
    while not w.blocked:
        seq += 1
        w.sent(seq, 1000, 0.1)
    assert w.in_flight >= LIMIT and w.in_flight < LIMIT + cost(1000)
    assert w.stats.window_blocks == 1
    w.acked("a", seq, 0.2)  # a has read everything: b has not
    assert w.blocked
    w.acked("b", seq - 2, 0.2)  # b read all but two: room again
    assert not w.blocked and w.in_flight == 2 * cost(1000)


def full(acks: dict[str, float], max_members: int = 16, at: float = 0.1) -> SendWindow:
    """A window whose members acknowledged seqno 1 at the given times, then 18
    messages of 1,000 bytes sent at ``at``: more than LIMIT."""
    w = SendWindow(LIMIT, 0.5, max_members)
    for member, when in acks.items():
        w.acked(member, 1, when)
    for seq in range(2, 20):
        w.sent(seq, 1000, at)
    return w


def test_a_silent_member_holds_the_sender_for_wait_at_most() -> None:
    w = full({"a": 0.0, "b": 0.0})
    assert w.blocked
    w.acked("a", 19, 0.3)  # a reads on; b is silent since 0.0
    deadline = w.deadline()
    assert deadline == 0.5  # b's last acknowledgement + wait
    w.on_timer(deadline)
    assert not w.blocked  # b is a laggard now, left out
    assert w.stats.window_laggards == 1
    w.acked("b", 10, 0.6)  # b is back: it counts again, from where the floor is
    assert not w.blocked and w.in_flight == 0


def test_every_member_silent_unblocks_at_the_last_ones_deadline() -> None:
    w = full({"a": 0.0, "b": 0.2}, at=0.3)
    assert w.blocked and w.deadline() == 0.5
    w.on_timer(0.5)  # a left out; b still active until 0.7
    assert w.blocked and w.deadline() == 0.7
    w.on_timer(0.7)
    assert not w.blocked and w.deadline() is None


def test_a_member_that_left_is_not_waited_for() -> None:
    w = full({"a": 0.0, "b": 0.0})
    w.acked("a", 19, 0.2)
    assert w.blocked
    w.forget("b", 0.2)
    assert not w.blocked


def test_acknowledging_members_are_bounded() -> None:
    w = full({"a": 0.0, "b": 0.0, "c": 0.0}, max_members=2)  # c: past the bound
    w.acked("a", 19, 0.2)
    w.acked("b", 19, 0.2)
    assert not w.blocked


def test_no_window() -> None:
    w = SendWindow(0, 0.5, 16)
    w.acked("a", 1, 0.0)
    for seq in range(2, 1000):
        w.sent(seq, 60_000, 0.1)
    assert not w.blocked and w.deadline() is None


@given(st.lists(st.integers(0, 70_000), max_size=200))
def test_a_receiver_speaks_once_per_quarter_window(sizes: list[int]) -> None:
    credit = Credit(4 * 50_000)
    read = 0
    for size in sizes:
        read += size
        if credit.read(size):
            assert read >= 50_000
            credit.status_sent()
            read = 0
        assert read < 50_000


class Window(RuleBasedStateMachine):
    """The window against a plain model, with the sender as the API drives it: it
    sends only while the window is not blocked, and reads on its timer."""

    WAIT = 0.5

    def __init__(self) -> None:
        super().__init__()
        self.w = SendWindow(LIMIT, self.WAIT, 16)
        self.now = 0.0
        self.seq = 0
        self.costs: dict[int, int] = {}  # seq -> cost, of what was sent after the first ack
        self.acks: dict[str, int] = {}
        self.moved: dict[str, float] = {}
        self.passed = 0  # the highest floor applied: a newcomer counts from there

    @precondition(lambda self: not self.w.blocked)
    @rule(size=st.integers(0, 3000))
    def send(self, size: int) -> None:
        self.seq += 1
        self.w.sent(self.seq, size, self.now)
        if self.acks:
            self.costs[self.seq] = cost(size)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def ack(self, member: str, data: st.DataObject) -> None:
        low = self.acks.get(member, 0)
        if low >= self.seq:
            return
        seq = data.draw(st.integers(low + 1, self.seq))
        self.w.acked(member, seq, self.now)
        self.acks[member] = seq
        self.moved[member] = self.now
        self.passed = max(self.passed, min(self.acks.values()))

    @rule(dt=st.floats(0.0, 0.4))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        deadline = self.w.deadline()
        if deadline is not None and deadline <= self.now:
            self.w.on_timer(self.now)

    @invariant()
    def never_more_than_a_window_ahead_of_the_readers(self) -> None:
        """Counted from the slowest member that acknowledged lately, what is in flight
        never passes the window by more than the message that filled it."""
        assert 0 <= self.w.in_flight < LIMIT + cost(3000)

    @invariant()
    def in_flight_is_what_the_slowest_active_reader_lacks(self) -> None:
        active = [s for m, s in self.acks.items() if self.moved[m] + self.WAIT > self.now]
        if not self.acks or len(active) != len(self.acks):
            return  # laggards: the window may count less than the model (it forgets)
        floor = min(active)
        assert self.w.in_flight <= sum(c for s, c in self.costs.items() if s > floor)

    @invariant()
    def blocked_has_a_way_out(self) -> None:
        if self.w.blocked:
            deadline = self.w.deadline()
            assert deadline is not None and math.isfinite(deadline)


class PatientWindow(Window):
    """No laggards ever (``wait`` longer than any run): the window is exactly the model,
    in which a member's first acknowledgement counts from the floor already passed
    (a newcomer catching up is not waited for on what was sent before it spoke)."""

    WAIT = 1e9

    @invariant()
    def exactly_the_model(self) -> None:
        if not self.acks:
            assert self.w.in_flight == 0 and not self.w.blocked
            return
        in_flight = sum(c for s, c in self.costs.items() if s > self.passed)
        assert self.w.in_flight == in_flight
        assert self.w.blocked == (in_flight >= LIMIT)


TestWindow = Window.TestCase
TestWindow.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
TestPatientWindow = PatientWindow.TestCase
TestPatientWindow.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
