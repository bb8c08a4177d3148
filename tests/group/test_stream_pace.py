"""A stream's sender paced by its receivers (m2mc.group.stream_pace; docs/group.md
section 12, "Pacing"), against a model of receivers on a lossy network.

A seeded model in virtual time, its shapes drawn by Hypothesis: one sender with a
body of chunks, receivers that are fast, slow (they take chunks from a queue at a
rate of their own), dead from some moment on, or older nodes that never
acknowledge; chunks, acknowledgements and repairs lost at random. What a user sees:

* the sender is never more than its window ahead of the slowest receiver that is
  still there (by what that receiver actually holds, not what it said), unless that
  receiver's every acknowledgement was lost for the whole wait (then it is left out,
  as a dead one is, until one gets through);
* so a receiver never left out never refuses a chunk (its window is the sender's);
* a receiver that dies, or never acknowledges, holds the sender for at most the
  stated wait at a time: whenever the sender has been blocked longer than that, a
  live receiver is what holds it;
* every receiver still there ends with every chunk (loss is repaired), and the
  sender with every chunk sent.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.group.stream_pace import PaceTally, Silent, StreamPace, ack_every, pace_window

TICK = 0.005  # the model's step (s)
WAIT = 1.0  # the pace's wait (2 * send_window_wait)
REPEAT = 0.25  # a receiver acknowledges again after this long (send_window_wait / 2)
NACK_EVERY = 0.05  # a receiver with a hole, or stalled, asks again this often


@dataclass
class Receiver:
    name: str
    kind: str  # "fast", "slow", "dead", "old"
    rate: int  # chunks it takes per tick
    dies_at: float = float("inf")
    queue: deque[tuple[float, int]] = field(default_factory=deque)
    next: int = 0
    have: set[int] = field(default_factory=set)
    refused: int = 0
    acked: int = -1
    acked_at: float = float("-inf")
    nacked_at: float = float("-inf")
    progress_at: float = 0.0

    def alive(self, now: float) -> bool:
        return now < self.dies_at


@dataclass
class Model:
    rng: random.Random
    chunks: int
    window: int
    loss: float
    receivers: list[Receiver]
    pace: StreamPace = field(init=False)
    index: int = 0  # next chunk the sender sends
    acks: deque[tuple[float, str, int]] = field(default_factory=deque)
    repairs: deque[tuple[float, str, int]] = field(default_factory=deque)
    now: float = 0.0
    ever_left_out: set[str] = field(default_factory=set)
    told: dict[str, int] = field(default_factory=dict)  # the last ack the sender got
    checking: bool = True  # False: the reference without pacing (nothing to check)

    def __post_init__(self) -> None:
        self.pace = StreamPace(self.window, WAIT, [r.name for r in self.receivers], 0.0,
                               stats=PaceTally())

    def delay(self) -> float:
        return self.rng.uniform(0.0, 0.02)

    def lost(self) -> bool:
        return self.rng.random() < self.loss

    def deliver(self, r: Receiver, index: int) -> None:
        if not self.lost():
            r.queue.append((self.now + self.delay(), index))

    def step(self) -> None:
        now = self.now
        # Acknowledgements and repair requests reach the sender.
        while self.acks and self.acks[0][0] <= now:
            _, name, upto = self.acks.popleft()
            self.pace.heard(name, upto, now)
            self.told[name] = max(upto, self.told.get(name, 0))
        while self.repairs and self.repairs[0][0] <= now:
            _, name, index = self.repairs.popleft()
            r = next(x for x in self.receivers if x.name == name)
            if index < self.index:
                self.deliver(r, index)
        # The sender: as many chunks as the pace allows, up to 8 a tick.
        for _ in range(8):
            if self.index >= self.chunks or not self.pace.may_send(self.index, now):
                break
            if self.checking:
                self.check_ahead()
            for r in self.receivers:
                self.deliver(r, self.index)
            self.index += 1
        if self.index < self.chunks and self.pace.blocked_since is not None:
            self.check_blocked()
        self.ever_left_out |= self.pace.left_out()
        for r in self.receivers:
            if r.alive(now):
                self.receive(r)

    def receive(self, r: Receiver) -> None:
        now = self.now
        for _ in range(r.rate):
            if not r.queue or r.queue[0][0] > now:
                break
            _, index = r.queue.popleft()
            if index < r.next or index in r.have:
                continue
            if index >= r.next + self.window:
                r.refused += 1
                continue
            r.have.add(index)
            r.progress_at = now
            while r.next in r.have:
                r.have.discard(r.next)
                r.next += 1
        if r.kind != "old" and (r.next - r.acked >= ack_every(self.window)
                                or r.next == self.chunks > r.acked
                                or now - r.acked_at >= REPEAT):
            r.acked, r.acked_at = r.next, now
            if not self.lost():
                self.acks.append((now + self.delay(), r.name, r.next))
        stalled = now - r.progress_at >= 0.1
        if r.next < self.chunks and (r.have or stalled) and now - r.nacked_at >= NACK_EVERY:
            r.nacked_at = now
            top = max(r.have) if r.have and not stalled else r.next + self.window - 1
            for index in range(r.next, min(top, self.chunks - 1) + 1):
                if index not in r.have and not self.lost():
                    self.repairs.append((now + self.delay(), r.name, index))

    def live(self) -> list[Receiver]:
        return [r for r in self.receivers if r.kind != "old" and r.alive(self.now)]

    def check_ahead(self) -> None:
        """The chunk about to go is within the window of every live receiver's actual
        progress (what it holds in order, not what it said)."""
        left_out = self.pace.left_out()
        for r in self.live():
            if r.name not in left_out:
                assert self.index < r.next + self.window, (r.name, self.index, r.next)

    def check_blocked(self) -> None:
        since = self.pace.blocked_since
        assert since is not None
        if self.now - since <= WAIT + REPEAT + 2 * TICK:
            return
        # Blocked longer than the wait: a live receiver that acknowledged lately holds it.
        holders = [r for r in self.live() if self.told.get(r.name, 0) + self.window <= self.index
                   and self.now - r.acked_at <= WAIT]
        assert holders, (self.now, since, self.index, [(r.name, r.next) for r in self.receivers])

    def run(self, limit: float) -> None:
        while self.now < limit:
            self.step()
            if self.index >= self.chunks and all(r.next >= self.chunks for r in self.live()):
                return
            self.now += TICK


receiver_kinds = st.lists(st.sampled_from(["fast", "slow", "dead", "old"]), min_size=1,
                          max_size=5)


@settings(max_examples=60, deadline=None)
@given(kinds=receiver_kinds, chunks=st.integers(1, 400), window=st.integers(1, 64),
       loss=st.sampled_from([0.0, 0.01, 0.05, 0.2]), seed=st.integers(0, 10_000))
def test_the_sender_keeps_within_a_window_of_its_slowest_live_receiver(
        kinds: list[str], chunks: int, window: int, loss: float, seed: int) -> None:
    rng = random.Random(seed)
    receivers = []
    for i, kind in enumerate(kinds):
        rate = {"fast": 50, "slow": 1, "dead": 50, "old": 50}[kind]
        dies = rng.uniform(0.0, 1.0) if kind == "dead" else float("inf")
        receivers.append(Receiver(f"r{i}", kind, rate, dies))
    model = Model(rng, chunks, window, loss, receivers)
    model.run(600.0)
    # Everything was sent, and every live receiver holds every chunk (loss repaired).
    assert model.index == chunks
    for r in model.live():
        assert r.next == chunks, (r.name, r.next, chunks)
        if r.name not in model.ever_left_out:
            assert r.refused == 0  # never further ahead than its window
        if loss == 0.0:  # nothing lost: no live receiver is ever left out
            assert r.name not in model.ever_left_out
    if loss == 0.0:  # a dead or old receiver: left out, not waited for again
        silent = [r for r in receivers if r.kind in ("dead", "old")]
        assert model.pace.stats.stream_laggards <= len(silent)


@settings(max_examples=30, deadline=None)
@given(chunks=st.integers(50, 400), window=st.integers(2, 32), seed=st.integers(0, 10_000))
def test_a_receiver_that_dies_holds_the_sender_for_the_wait_at_most(
        chunks: int, window: int, seed: int) -> None:
    """One fast receiver and one that dies at once: the sender finishes within the
    time its live receiver needs plus one wait."""
    rng = random.Random(seed)
    model = Model(rng, chunks, window, 0.0, [Receiver("live", "fast", 50),
                                             Receiver("dead", "dead", 50, 0.0)])
    model.run(600.0)
    alone = Model(random.Random(seed), chunks, window, 0.0, [Receiver("live", "fast", 50)])
    alone.run(600.0)
    assert model.index == chunks and alone.index == chunks
    assert model.now <= alone.now + WAIT + REPEAT + 0.1
    assert model.pace.stats.stream_laggards == 1
    assert model.pace.silent() == ["dead"]  # never acknowledged: remembered as silent


def test_a_slow_receiver_is_waited_for_and_refuses_nothing() -> None:
    """A receiver that takes one chunk per tick while the sender could send eight: the
    sender is paced (it blocks, many times) and the receiver refuses nothing."""
    model = Model(random.Random(3), 2000, 16, 0.0, [Receiver("slow", "slow", 1),
                                                    Receiver("fast", "fast", 50)])
    model.run(600.0)
    assert model.index == 2000
    assert model.receivers[0].next == 2000 and model.receivers[0].refused == 0
    assert model.pace.stats.stream_paced > 10
    assert model.pace.stats.stream_laggards == 0  # it acknowledged: never left out


def test_without_pacing_the_same_slow_receiver_refuses_chunks() -> None:
    """The reference: a window of the whole body (no pacing to speak of) and some loss
    make the slow receiver refuse what comes past its own window while it waits for a
    repair, which is what pacing prevents."""
    model = Model(random.Random(3), 2000, 16, 0.05, [Receiver("slow", "slow", 1)])
    model.pace = StreamPace(10**9, WAIT, ["slow"], 0.0)
    model.checking = False
    model.run(5.0)
    assert model.receivers[0].refused > 0


def test_a_member_that_left_is_forgotten_at_once() -> None:
    pace = StreamPace(4, WAIT, ["a", "b"], 0.0)
    pace.heard("a", 100, 0.1)
    assert not pace.may_send(4, 0.2)  # b is at 0
    pace.forget("b")
    assert pace.may_send(4, 0.2) and pace.may_send(103, 0.2) and not pace.may_send(104, 0.2)


def test_members_known_silent_are_not_waited_for_until_they_speak() -> None:
    silent = Silent()
    silent.add("g", ["old"], limit=10)
    pace = StreamPace(4, WAIT, ["old", "new"], 0.0, silent.of("g"))
    pace.heard("new", 50, 0.0)
    assert pace.may_send(53, 0.0)  # the old one is not waited for
    assert pace.heard("old", 10, 0.1) is False and not pace.may_send(53, 0.1)  # now it is
    silent.spoke("g", "old")
    assert silent.of("g") == frozenset()


def test_a_joiner_after_the_head_is_not_waited_for() -> None:
    pace = StreamPace(4, WAIT, ["a"], 0.0)
    assert pace.heard("late", 0, 0.0) is False
    pace.heard("a", 10, 0.0)
    assert pace.may_send(13, 0.0)


def test_the_window_fits_the_socket_and_the_receivers_window() -> None:
    assert pace_window(4096, 4 << 20, 16_000) == 262  # 4 MiB of 16,000-byte chunks
    assert pace_window(4096, 208 << 10 >> 1, 16_000) == 6
    assert pace_window(4096, 1000, 16_000) == 4  # at least 4
    assert pace_window(3, 4 << 20, 16_000) == 3  # never past what a receiver takes
    assert pace_window(4096, 0, 16_000) == 4096  # the node's window off: the receivers'
    assert ack_every(262) == 65 and ack_every(3) == 1


def test_deadline_is_when_the_holder_would_be_left_out() -> None:
    pace = StreamPace(4, WAIT, ["a"], 0.0)
    assert pace.deadline(4) is None
    assert not pace.may_send(4, 0.5)
    assert pace.deadline(4) == 1.5  # blocked at 0.5, a heard at 0.0: max + wait
    assert not pace.may_send(4, 1.49)
    assert pace.may_send(4, 1.5)
    assert pace.left_out() == frozenset({"a"})
    assert pace.heard("a", 0, 2.0) is False  # not moved: still left out
    assert pace.heard("a", 1, 2.1) is True and not pace.may_send(5, 2.1)  # back, waited for
