"""Which hosts keep the log under seeds/001 4.1 (docs/infra.md, "Keepers (4.1)").

With subscriptions on, a gateway whose cell has no members may free its tables unless
the master names it a replica in its Commit (seeds/001 figure 7 line 15). A record is
only safe once a quorum of hosts *that will keep it* holds it: a takeover reads a
quorum of logs and must find every committed record in one of them. So the master
counts only the acknowledgments of the hosts it has told to keep the log (its
*keepers*), and it tells a host it may stop keeping only once the others hold a
quorum's copy of everything committed so far.

The keepers of an epoch start as every host (a new master does not know which hosts
its predecessor counted), then move towards the wanted replicas (the lowest-named
live hosts, :meth:`Keepers.wanted`): a wanted host is added at once; the set shrinks
to exactly the wanted ones when the master and those hosts, a quorum of them, have
acknowledged everything committed, and the commit point has passed the log the
takeover started from (the records it adopted are committed in an earlier epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class Keepers:
    """The hosts that must keep this epoch's log; ``None`` while that is every host."""

    __slots__ = ("hosts", "master", "start_high")

    def __init__(self, master: str, start_high: int) -> None:
        self.master = master
        self.start_high = start_high  # the log the takeover adopted ends here
        self.hosts: frozenset[str] | None = None

    @staticmethod
    def wanted(master: str, live: Iterable[str], quorum: int) -> list[str]:
        """The replicas seeds/001 4.1 asks for: the lowest-named live hosts besides the
        master, a quorum's worth with it."""
        return sorted(h for h in live if h != master)[:max(0, quorum - 1)]

    def counts(self, host: str) -> bool:
        """Whether ``host``'s acknowledgment counts towards the commit point."""
        return self.hosts is None or host in self.hosts

    def update(self, wanted: Iterable[str], holds: Callable[[str], int], master_high: int,
               commit: int, quorum: int) -> None:
        """Move towards ``wanted``; ``holds(host)`` is what a host acknowledged in this
        epoch (0 if nothing counts yet)."""
        want = frozenset(wanted)
        if self.hosts == want:
            return
        covered = commit >= self.start_high and \
            (master_high >= commit) + sum(1 for h in want if holds(h) >= commit) >= quorum
        if covered:
            self.hosts = want
        elif self.hosts is not None:
            self.hosts = self.hosts | want

    def announce(self, everyone: Iterable[str]) -> tuple[str, ...]:
        """The replica list for the Commit: every host but the master until the set
        first shrinks."""
        hosts = self.hosts if self.hosts is not None else frozenset(everyone)
        return tuple(sorted(h for h in hosts if h != self.master))


__all__ = ["Keepers"]
