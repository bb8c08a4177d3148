"""Discovery's repair: traffic of a group nobody described to us (seeds/000 V; docs/group.md
section 4, "Groups heard of but never described"). A sans-IO part of the Group Manager.

GJLP learns of groups only from descriptions: the replies to an advertisement, and a new
group's announcement at its creation (repeated at :data:`m2mc.group.gjlp.REANNOUNCE`). A
node that advertised before a group existed, and lost its three announcements (or was not
listening yet: a process that starts a few seconds after the group's maker), would never
hear of it, although the group's messages and statuses reach it all the time.

Those messages are the evidence. A message whose group tag belongs to no group in the GIIT
and none discovered makes the node *suspect* an unknown group. After a random back-off in
``[0, adv_reply_backoff]`` it looks again (a reply heard meanwhile may have described the
group) and, if the group is still unknown, advertises: the replies describe every group,
and the application is offered the new one. Costs are bounded:

* an advertisement heard from another node meanwhile replaces ours (its replies reach us
  too), so a crowd of newcomers costs about one ADV per round;
* after any ADV, ours or another node's, the node suspects nothing for ``holdoff``, and
  each suspicion that outlives its back-off (an ADV of ours, or one replaced by another
  node's) doubles the holdoff, from :data:`HOLDOFF_FIRST` up to :data:`HOLDOFF_MAX`: so
  unknown tags that no reply ever describes (an outsider making them up) cost the whole
  network about one ADV per 64 s, however many nodes hear them; after ``2 *
  HOLDOFF_MAX`` with no ADV at all the holdoff starts from the first again;
* the per-message cost is two comparisons while a suspicion is pending or held off; else
  one set lookup in the known tags, which are recomputed from the GIIT and the discovered
  groups at most once per :data:`TAGS_TTL`, and always before an ADV is decided.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from m2mc.group.codec import group_tag

if TYPE_CHECKING:
    from collections.abc import Callable

    from m2mc.group.gjlp import Gjlp

HOLDOFF_FIRST = 2.0
"""Seconds after any ADV before the next suspicion, at first (doubled by each suspicion that
outlives its back-off)."""
HOLDOFF_MAX = 64.0
"""... up to this."""
TAGS_TTL = 1.0
"""The known tags are recomputed at most this often on the receive path."""


class UnknownGroups:
    """When traffic of an undescribed group makes the node advertise (module docstring).
    ``gjlp`` is read (its GIIT and discovered groups) and its stats are counted in."""

    def __init__(self, gjlp: Gjlp, backoff: float, rng: random.Random) -> None:
        self.gjlp = gjlp
        self.backoff = backoff
        self.rng = rng
        self.due: float | None = None  # when the pending suspicion is looked at again
        self.quiet_until = float("-inf")  # no suspicion before this
        self.holdoff = HOLDOFF_FIRST
        self.last_adv = float("-inf")  # the last ADV, ours or another node's
        self._suspect: bytes = b""  # the tag that raised the pending suspicion
        self._suspected_at = float("-inf")
        self._tags: frozenset[bytes] = frozenset()
        self._tags_at = float("-inf")

    def heard(self, tag: bytes, now: float) -> None:
        """A message of a group we are not in (its tag is ``tag``) arrived at ``now``."""
        if self.due is not None or now < self.quiet_until:
            return
        if now - self._tags_at >= TAGS_TTL:
            self._refresh(now)
        if tag in self._tags:
            return
        self._suspect, self._suspected_at = tag, now
        self.due = now + self.rng.uniform(0.0, self.backoff)

    def advertisement(self, now: float) -> None:
        """An ADV went out, another node's or ours (for any reason): its replies describe
        every group to us as well, so a pending suspicion gives way to it and the next
        waits for ``holdoff``."""
        if now - self.last_adv > 2 * HOLDOFF_MAX:
            self.holdoff = HOLDOFF_FIRST  # a quiet network: start afresh
        self.last_adv = now
        self.quiet_until = max(self.quiet_until, now + self.holdoff)

    def run_due(self, advertise: Callable[[float], None], now: float) -> None:
        """The pending suspicion's time came: advertise if the group is still unknown."""
        if self.due is None or now < self.due:
            return
        self.due = None
        self._refresh(now)
        if self._suspect in self._tags:
            return  # described meanwhile
        stats = self.gjlp.stats
        if self.last_adv >= self._suspected_at:
            stats.unknown_group_advs_suppressed += 1  # (advertisement() set the quiet time)
        else:
            stats.unknown_group_advs += 1
            advertise(now)  # (which calls advertisement())
        self.holdoff = min(2 * self.holdoff, HOLDOFF_MAX)

    def _refresh(self, now: float) -> None:
        gjlp = self.gjlp
        self._tags = frozenset(group_tag(gid) for gid in (*gjlp.giit, *gjlp.discovered))
        self._tags_at = now
