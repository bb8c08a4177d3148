"""When one member of one group sends its statuses (docs/group.md section 6, "Status").

Two kinds go out: a status *soon* (``status_delay`` after we sent data, at once when we
read a quarter of a sender's window, ``status_delay`` after a rename), and a
*periodic* one, at the period the budget gives (group/status_budget.py), jittered
uniformly over its second half with the node's injected random generator. A status
soon is *bare* (our own high-water only) when nothing but our sending asked for it
and the group is larger than a status slice. A periodic status that a status
overheard meanwhile covered is skipped, unless it is due as a heartbeat: at least
every ``keepalive`` periods, and as often as the order asks (its ``heartbeat``). The
period itself is never longer than twice the order's heartbeat: total order chooses
its configuration and ballots among the members heard within ``sequencer_timeout``,
so its statuses cannot spread out with the group as the others' do.

Membership news (an entry that changed: a join, a leave) in a large group is told by
a status soon, after a suppression back-off (group/backoff.py, over
``status_interval``) that two statuses overheard carrying the same entries cancel: a
member that missed a JOIN hears of it within seconds, and a join costs a few
statuses whatever the group's size, not one per member (each status also carries its
sender's own entry: group/status_budget.py).

Sans-IO: the group instance feeds it what happened and asks :meth:`due` what to send.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from m2mc.group.backoff import suppression_backoff
from m2mc.group.config import GroupConfig
from m2mc.group.status_budget import StatusBudget, full_slice_bytes

__all__ = ["StatusClock", "StatusesDue"]


@dataclass(frozen=True, slots=True)
class StatusesDue:
    """What :meth:`StatusClock.due` says to do now."""

    soon: bool = False  # send a status soon (not periodic)
    bare: bool = False  # ... with our own high-water only
    periodic: bool = False  # send a periodic status
    suppressed: bool = False  # a periodic one was skipped: a status overheard covered it


class StatusClock:
    """The status timers of one member of one group (see the module docstring)."""

    def __init__(self, config: GroupConfig, pid: str, rng: random.Random,
                 keepalive: int) -> None:
        self.config = config
        self.rng = rng
        self.keepalive = keepalive
        self.budget = StatusBudget(config)
        self.size = full_slice_bytes(config.status_slice, pid)  # a periodic status, measured
        self.scale = config.status_interval  # the periodic interval, unjittered
        self._at: float | None = None
        self._soon: float | None = None
        self._news = False  # the status soon carries news beyond our high-water
        self._covered = False
        self._sent_at = float("-inf")
        self._news_at: float | None = None  # membership news to tell, after a back-off

    # ------------------------------------------------------------------ inputs
    def start(self, now: float, members: int, heartbeat: float) -> None:
        self._at = now + self._period(now, members, heartbeat)

    def sent_data(self, now: float) -> None:
        """We sent data: our new high-water, ``status_delay`` later."""
        if self._soon is None:
            self._soon = now + self.config.status_delay

    def news_now(self, now: float) -> None:
        """We read a quarter of a sender's window: say how far, now."""
        self._soon = now
        self._news = True

    def news_soon(self, now: float) -> None:
        """Something to say within ``status_delay`` (our name changed)."""
        at = now + self.config.status_delay
        if self._soon is None or self._soon > at:
            self._soon = at
        self._news = True

    def news(self, now: float, members: int) -> None:
        """Membership news to tell: a status soon, after a suppression back-off."""
        if self._news_at is None:
            self._news_at = now + suppression_backoff(
                self.rng, self.config.status_interval, members, self.config.status_slice)

    def news_told(self) -> None:
        """Somebody's status told all our membership news: ours need not."""
        self._news_at = None

    def covered(self) -> None:
        """A status overheard said everything our next periodic one would."""
        self._covered = True

    # ------------------------------------------------------------------ timer
    def due(self, now: float, members: int, heartbeat: float) -> StatusesDue:
        """What to send now, in a group of ``members``; ``heartbeat``: the longest the
        order lets us go without a status."""
        soon = self._soon is not None and now >= self._soon
        told = self._news_at is not None and now >= self._news_at
        bare = False
        if soon or told:
            self._soon = self._news_at = None
            bare = not (self._news or told) and members > self.config.status_slice
            self._news = False
            self._sent_at = now
            soon = True
        periodic = suppressed = False
        if self._at is not None and now >= self._at:
            self._at = now + self._period(now, members, heartbeat)
            since = now - self._sent_at
            covered, self._covered = self._covered, False
            if covered and since < self.keepalive * self.scale and since < heartbeat:
                suppressed = True
            else:
                periodic = True
                self._sent_at = now
        return StatusesDue(soon, bare, periodic, suppressed)

    def next_deadline(self) -> float | None:
        times = [t for t in (self._soon, self._at, self._news_at) if t is not None]
        return min(times) if times else None

    def _period(self, now: float, members: int, heartbeat: float) -> float:
        scale = self.budget.interval(now, members, self.size)
        self.scale = scale = max(self.config.status_interval, min(scale, 2 * heartbeat))
        return self.rng.uniform(scale / 2, scale)
