"""Dynamic host discovery and host crash detection (seeds/004 4.2, 4.5, 5.2).

Every host sends a status update every ``status_interval`` seconds. A status from a
host not yet known adds it to the list; the time of the last status is kept, and a
host whose last status is older than ``host_timeout`` is dead ("removed from their
list"). A status with a new incarnation number is a host that restarted.

The quorum used by elections and commits is a majority of every host ever known
(at least the hosts the configuration lists), not of the live ones: two quorums
always share a host, which is what makes failover safe (docs/infra.md). Hosts
retired for good (a committed RETIRED record, docs/infra.md "Retiring a host") are
left out: they are neither live nor counted, so the quorum shrinks.
"""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.infra import messages as msg


@dataclass(slots=True)
class HostEntry:
    status: msg.Status
    heard: float


class Directory:
    def __init__(self, me: str, host_timeout: float, expected_hosts: int = 1) -> None:
        self.me = me
        self.host_timeout = host_timeout
        self.expected_hosts = max(1, expected_hosts)
        self.hosts: dict[str, HostEntry] = {}
        self.known: set[str] = {me}
        self._dead: set[str] = set()
        self.retired: frozenset[str] = frozenset()  # the committed configuration's

    def on_status(self, st: msg.Status, now: float) -> tuple[bool, bool]:
        """Record a status; returns (newly discovered or back to life, restarted)."""
        entry = self.hosts.get(st.host)
        fresh = entry is None or st.host in self._dead
        restarted = entry is not None and entry.status.incarnation != st.incarnation
        self.known.add(st.host)
        self._dead.discard(st.host)
        if entry is None:
            self.hosts[st.host] = HostEntry(st, now)
        else:
            entry.status = st
            entry.heard = now
        return fresh, restarted

    def expire(self, now: float) -> list[str]:
        """Hosts whose status is now too old (seeds/004 4.5 "Host crash")."""
        gone = [h for h, e in self.hosts.items()
                if h not in self._dead and now - e.heard > self.host_timeout]
        self._dead.update(gone)
        return gone

    def is_live(self, host: str) -> bool:
        if host in self.retired:
            return False
        return host == self.me or (host in self.hosts and host not in self._dead)

    def live(self) -> list[str]:
        """Live hosts that are not retired, this one included, sorted."""
        return sorted(({self.me} | {h for h in self.hosts if h not in self._dead})
                      - self.retired)

    def dead(self) -> list[str]:
        """Known hosts, not retired, whose status is too old."""
        return sorted(self._dead - self.retired)

    def status(self, host: str) -> msg.Status | None:
        e = self.hosts.get(host)
        return None if e is None else e.status

    def universe(self, retired: frozenset[str] | None = None) -> int:
        """How many hosts the configuration has: every host configured or ever known,
        less the retired ones (``retired``: another configuration's, for a takeover
        that adopts a log holding a change this host has not applied)."""
        gone = self.retired if retired is None else retired
        return max(1, max(self.expected_hosts, len(self.known | gone)) - len(gone))

    def quorum(self, retired: frozenset[str] | None = None) -> int:
        return self.universe(retired) // 2 + 1
