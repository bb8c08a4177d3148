"""Coming back into range (seeds/000 III.B.2, III.B.5, V): when a node notices that it is
back on the network, and what it does then. A sans-IO part of the Group Manager.

The seed has a process that "rejoined the network after leaving it temporarily"
advertise itself (GJLP, so it learns of the groups created meanwhile) and run MSP for
every group it is in, but says nothing of how it knows. Two signals are used
(docs/group.md section 4, "Coming back into range"):

* **interface**: the driver says the network changed (:meth:`GroupNode.network_changed`):
  the channel's interface came up or got its address again (the asyncio driver watches
  it with netlink; the simulator calls it when a node regains coverage);
* **silence**: the node hears another process again after hearing nobody for longer
  than ``silence``, while it is in a group with other members, whose status keepalives
  it would have heard had it been in range (:meth:`Reconnect.heard` in the receive
  path; the core reads no clock, the ``now`` of every input is enough).

Either starts one *reaction*, at most once per ``reconnect_holdoff`` (an interface
flapping, or both signals for one return, cost one): after a random back-off in
``[0, adv_reply_backoff]`` the node advertises, unless it heard another node's
advertisement meanwhile (the replies to that one are broadcast and reach it too: a
crowd coming back together costs one ADV, not one each); it re-announces the groups it
created (queued as a GJLP reply, so dropped if someone else's reply describes them at
least as well); and it sends a SyncReq in every group it is in (MSP responses are
backed off and suppressed, so each returning node costs about one answer per group,
not one per member). Discovery has no repair of its own, so the node advertises in
:data:`ADV_ROUNDS` rounds ``sync_timeout`` apart, and once more if it heard no GJLP
reply at all (:data:`ADV_ATTEMPTS`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from m2mc.group.config import GroupConfig
from m2mc.group.gjlp import MEMBER
from m2mc.kinds import ReconnectReason

if TYPE_CHECKING:
    from collections.abc import Mapping

    from m2mc.group.gjlp import Gjlp
    from m2mc.group.instance import GroupInstance
    from m2mc.store import GroupStore

INTERFACE = ReconnectReason.INTERFACE
SILENCE = ReconnectReason.SILENCE
SILENCE_FACTOR = 3.5
"""Default ``reconnect_silence``: this many times the members' status keepalive. Every member
sends a status at least once per keepalive (10 to 11 ``status_interval``s), but with status
suppression a quiet pair may hear one member only that often: three of its keepalives in a
row must be lost before the other takes the gap for a return of its own (a false one costs
an ADV, a SyncReq per group and their answers, and a ``Reconnected`` event)."""
MADE_META = "made/"  # store meta key prefix: "made/<gid>" = "1" for a group this node created


class Step(Enum):
    """The steps of a reaction (module docstring)."""

    ACT = "act"  # advertise and ask to sync
    CHECK = "check"  # see whether anyone answered
    READV = "readv"  # our ADV or its replies were lost: advertise again


@dataclass(slots=True)
class ReconnectStats:
    reconnects: int = 0  # reactions started
    reconnects_by_interface: int = 0  # ... on the driver's word (network_changed)
    reconnects_by_silence: int = 0  # ... on hearing others again after a silence
    reconnects_held: int = 0  # signals within reconnect_holdoff of the last reaction
    reconnect_advs_suppressed: int = 0  # our ADV left out: another node's was heard first
    reconnect_advs_repeated: int = 0  # ADVs made again: no GJLP reply heard after the last
    groups_reannounced: int = 0  # created groups queued for re-announcement


ADV_ROUNDS = 2
"""Advertisement rounds of one reaction, ``sync_timeout`` apart: discovery has no repair
of its own, and with reply suppression one reply may be all that describes a group, so
a second round covers the loss of that reply (each round is backed off and suppressed
like the first: a crowd still costs one ADV per round)."""
ADV_ATTEMPTS = 3
"""At most this many rounds: one more while no GJLP reply at all was heard (our ADV, or
every reply, was lost)."""


class ReconnectPort(Protocol):
    """The node as a reaction's steps see it (:meth:`Reconnect.run_due`)."""

    @property
    def gjlp(self) -> Gjlp: ...
    @property
    def store(self) -> GroupStore: ...
    @property
    def groups(self) -> Mapping[str, GroupInstance]: ...

    def advertise(self, now: float) -> None:
        """Announce ourselves (GJLP)."""


class Reconnect:
    """When the node is back, and the reaction's schedule: ``act`` (the first step: ADV,
    re-announcement, MSP), then ``check`` (``sync_timeout`` later), then ``readv``
    (another ADV, backed off and suppressible) and ``check`` again: :data:`ADV_ROUNDS`
    rounds, up to :data:`ADV_ATTEMPTS` while no GJLP reply was heard."""

    def __init__(self, config: GroupConfig, rng: random.Random, keepalive: float) -> None:
        self.silence = config.reconnect_silence or SILENCE_FACTOR * keepalive
        self.holdoff = config.reconnect_holdoff
        self.backoff = config.adv_reply_backoff
        self.retry = config.sync_timeout
        self.rng = rng
        self.heard_at = float("inf")  # last message of another process (inf: not started)
        self.last = float("-inf")  # when the last reaction began
        self.due: float | None = None  # when the next step of the reaction runs
        self.step: Step | None = None  # the reaction's next step (None: none under way)
        self.reason: ReconnectReason | None = None  # of the last reaction
        self.adv_heard_at = float("-inf")  # another node's last ADV
        self.fresh_after = float("inf")  # an ADV heard after this makes our next one moot
        self.replied = False  # a GJLP reply (GRPS_INFO) was heard since the reaction began
        self.attempts = 0  # advertisement steps of this reaction so far
        self.stats = ReconnectStats()

    def started(self, now: float) -> None:
        """The node (re)started (it advertises and catches up anyway): silences count
        from now. An interface signal right after the start still counts: the start's
        advertisement may have gone out on a network that was not there yet."""
        self.heard_at = now

    def heard(self, now: float) -> float | None:
        """Another process's message arrived at ``now``; the silence it ends, if that was
        longer than ``silence`` (the caller checks ``now - heard_at > silence`` first)."""
        gap = now - self.heard_at
        self.heard_at = now
        return gap if gap > self.silence else None

    def back(self, now: float, reason: ReconnectReason) -> bool:
        """A signal that the node is back; True if a reaction is scheduled."""
        if now - self.last < self.holdoff:
            self.stats.reconnects_held += 1
            return False
        self.last = now
        stats = self.stats
        stats.reconnects += 1
        if reason == INTERFACE:
            stats.reconnects_by_interface += 1
        else:
            stats.reconnects_by_silence += 1
        self.reason = reason
        self.replied = False
        self.attempts = 0
        self.fresh_after = now
        self._advertise_soon(Step.ACT, now)
        return True

    def _advertise_soon(self, step: Step, now: float) -> None:
        self.step = step
        self.due = now + self.rng.uniform(0.0, self.backoff)

    def overheard_adv(self, now: float) -> None:
        """Another node advertised: the replies to it reach us as well, so our own next
        ADV is left out if that one came after the replies to our last round."""
        self.adv_heard_at = now

    def overheard_reply(self) -> None:
        self.replied = True

    def run_due(self, node: ReconnectPort, now: float) -> None:
        """The reaction's step whose time came."""
        if self.due is None or now < self.due:
            return
        self.due = None
        step, self.step = self.step, None
        if step is Step.CHECK:
            if self.attempts < ADV_ROUNDS or (not self.replied
                                              and self.attempts < ADV_ATTEMPTS):
                self._advertise_soon(Step.READV, now)  # our ADV or its replies were lost
            return
        self.attempts += 1
        if self.adv_heard_at >= self.fresh_after:
            self.stats.reconnect_advs_suppressed += 1
        else:
            if step is Step.READV:
                self.stats.reconnect_advs_repeated += 1
            node.advertise(now)
        if step is Step.ACT:
            created = [gid for gid, row in node.gjlp.giit.items()
                       if row.state == MEMBER and gid in node.groups
                       and node.store.get_meta(MADE_META + gid)]
            self.stats.groups_reannounced += len(created)
            node.gjlp.announce(created, now)
            for inst in node.groups.values():  # (one joined since the signal has asked)
                if not inst.lingering and inst.msp.requested_at < self.last:
                    inst.start_sync(now, why=self.reason)
        self.fresh_after = now + self.backoff  # replies to this round come until then
        self.step, self.due = Step.CHECK, now + self.retry
