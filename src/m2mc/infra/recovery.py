"""A host without state takes part in nothing until it holds the log (docs/infra.md,
"Hosts without a data directory").

A host that starts with nothing (no ``--data-dir``, or an empty one) cannot tell a
first start from a restart: before a crash it may have accepted records or promised
an epoch that a quorum counted on. Answering a takeover or accepting records now, on
an empty log, would break that quorum's promise. So it *recovers* first, as a
replica of Viewstamped Replication Revisited does (§4.3):

1. It asks every host (:class:`~m2mc.infra.messages.Recover`, with a fresh nonce)
   where the deployment stands, and answers no takeover, casts no vote, accepts no
   record and serves no cell meanwhile.
2. Once ``n - q + 1`` hosts that hold state (``n`` hosts, quorums of ``q``) have
   answered that nonce, every quorum that promised an epoch before the restart
   shares a host with them, so the newest epoch among the answers is at least any
   such epoch: the *floor*.
3. It takes the log from the master of an epoch at or above the floor (that
   master's ``Sync``), which holds every committed record, and is a replica again.

If every other host answers that it holds no state either, nobody holds a log: a
new deployment, or every host lost its state at once. The hosts then start a new
sequence (a GENESIS record with a fresh id, :mod:`m2mc.infra.state`), and say so;
members of an older sequence see the new id in the beacons, are told their
membership is gone, and join again (docs/decisions.md, "Hosts without a data
directory recover before they answer"). While some host that may hold the log does
not answer, the others wait: they never guess.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from m2mc.infra import messages as msg
from m2mc.infra.ids import Epoch

SYNC = "sync"  # the floor is known: waiting for a master at or above it to send the log
BOOTSTRAP = "bootstrap"  # nobody holds a log: start empty


@dataclass(slots=True)
class Recovery:
    """The recovery of one host (sans-IO): questions out, answers in, a verdict."""

    me: str
    rng: random.Random
    interval: float
    nonce: int = 0
    floor: Epoch | None = None  # only a master of this epoch or a newer one may sync us
    verdict: str = ""  # "", SYNC, BOOTSTRAP
    next_ask: float = 0.0
    asked: int = 0
    replies: dict[str, msg.RecoverReply] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.nonce = self.rng.getrandbits(62) + 1

    def ask(self, now: float) -> msg.Recover | None:
        """The question to broadcast now, if one is due (until the floor is known)."""
        if self.verdict or now < self.next_ask:
            return None
        self.next_ask = now + self.interval
        self.asked += 1
        return msg.Recover(self.me, self.nonce)

    def on_reply(self, r: msg.RecoverReply, known: set[str]) -> None:
        """Take an answer: only one to our nonce, from a host we know."""
        if not self.verdict and r.nonce == self.nonce and r.host != self.me and r.host in known:
            self.replies[r.host] = r

    def decide(self, quorum_of: Callable[[frozenset[str]], tuple[int, int]]) -> str:
        """The verdict, once the answers allow one (``""`` before). ``quorum_of(retired)``
        is ``(n, q)`` under the configuration that retires ``retired`` (the newest any
        answer knows)."""
        if self.verdict:
            return self.verdict
        newest = max(self.replies.values(), key=lambda x: x.config_lsn, default=None)
        retired = frozenset(newest.retired) if newest is not None else frozenset()
        n, q = quorum_of(retired)
        others = [x for h, x in self.replies.items() if h not in retired]
        holders = [x for x in others if not x.pristine]
        if holders and len(holders) >= n - q + 1:
            self.floor = max(x.epoch for x in holders)
            self.verdict = SYNC
        elif not holders and len(others) >= n - 1:
            self.verdict = BOOTSTRAP
        return self.verdict

    def allows(self, epoch: Epoch) -> bool:
        """Whether a Sync of ``epoch`` may bring us the log."""
        return self.floor is not None and epoch >= self.floor

    def waiting_for(self, known: set[str]) -> list[str]:
        """Hosts that have not answered yet (for the operator's log)."""
        return sorted(h for h in known if h != self.me and h not in self.replies)
