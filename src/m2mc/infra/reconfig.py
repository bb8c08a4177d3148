"""Retiring a host for good, and admitting it again (docs/infra.md, "Retiring a host").

The hosts' configuration is the set of hosts retired for good, kept in the
coordinator's replicated tables (:class:`~m2mc.infra.state.CoordState` ``retired``)
and changed only by log records: RETIRED and ADMITTED. So every host that applies
the committed records agrees on it, it survives a failover (it is in the log), and
a snapshot carries it.

The rules that keep two quorums overlapping across a change (the argument is in
docs/infra.md):

* one change at a time: the master appends a change only when its log holds no
  uncommitted one (:func:`check_change`, code ``busy``);
* a host counts quorums (commits, elections) under its *committed* configuration;
* a takeover is complete only with the answers of a majority of the configuration of
  the log it adopts, its uncommitted changes included (:func:`retired_after`), so a
  winner that missed a change cannot adopt a log without hearing the new majority;
* a retired host's statuses, votes, acceptances and takeover answers are ignored,
  and the master tells it it was retired (:class:`~m2mc.infra.messages.RetiredNotice`).

This module is sans-IO: the host core calls it; :class:`AdminDesk` holds the
operators' requests a host is answering (a bounded table).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from m2mc.errors import UsageError
from m2mc.infra import messages as msg

__all__ = ["CODES", "AdminDesk", "Pending", "ReconfigError", "check_change", "retired_after"]

# Answer codes of AdminResult, and what the command line makes of them.
OK = "ok"
UNKNOWN = "unknown_host"  # never heard of (bad input)
ALREADY = "already_retired"  # bad input
NOT_RETIRED = "not_retired"  # readmit of a host that is not retired (bad input)
LAST = "last_host"  # would leave no host (bad input)
BUSY = "busy"  # another change is not committed yet / too many requests (try again)
NO_MASTER = "no_master"  # no active master right now (try again)
BAD_OP = "bad_request"  # an operation this host does not know
CODES = {OK: "done", UNKNOWN: "bad input", ALREADY: "bad input", NOT_RETIRED: "bad input",
         LAST: "bad input", BAD_OP: "bad input", BUSY: "try again", NO_MASTER: "try again"}
BAD_INPUT = frozenset(c for c, kind in CODES.items() if kind == "bad input")


class ReconfigError(UsageError):
    """A retire or readmit that must not happen; ``code`` is one of :data:`CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_change(op: int, target: str, *, known: Iterable[str], committed: frozenset[str],
                 working: frozenset[str], universe: int) -> int:
    """The record kind that makes the change, or :class:`ReconfigError`.

    ``known``: every host ever heard of; ``committed``/``working``: the retired hosts of
    the committed tables and of the master's working tables (with what it appended
    and has not committed yet); ``universe``: how many hosts the committed
    configuration has."""
    if op not in (msg.OP_RETIRE, msg.OP_READMIT):
        raise ReconfigError(BAD_OP, f"unknown operation {op}")
    if working != committed:
        pending = sorted(working ^ committed)
        raise ReconfigError(BUSY, f"another change ({', '.join(pending)}) is not committed "
                                  "yet; one change at a time")
    hosts = set(known) | committed
    if target not in hosts:
        listed = ", ".join(sorted(h for h in hosts if h not in committed)) or "none"
        raise ReconfigError(UNKNOWN, f"{target!r} is not a host of this deployment "
                                     f"(hosts: {listed})")
    if op == msg.OP_RETIRE:
        if target in committed:
            raise ReconfigError(ALREADY, f"{target} is already retired")
        if universe <= 1:
            raise ReconfigError(LAST, f"{target} is the last host; a deployment needs one")
        return msg.RETIRED
    if target not in committed:
        raise ReconfigError(NOT_RETIRED, f"{target} is not retired")
    return msg.ADMITTED


def retired_after(base: frozenset[str], snapshot: msg.Snapshot | None,
                  records: Iterable[msg.Record]) -> frozenset[str]:
    """The retired hosts once ``records`` (after a ``snapshot``, if any) are applied to
    a configuration ``base``: what a takeover's adopted log says."""
    retired = frozenset(snapshot.retired) if snapshot is not None else base
    for r in records:
        if r.kind == msg.RETIRED:
            retired = retired | {r.mid.node}
        elif r.kind == msg.ADMITTED:
            retired = retired - {r.mid.node}
    return retired


@dataclass(slots=True)
class Pending:
    """A command line's retire/readmit held by the host it asked."""

    op: int
    target: str
    deadline: float
    sent_to: str = ""  # the master it was passed to
    resent: bool = False  # passed again to a new master (the first may have done it)


class AdminDesk:
    """The operators' requests one host is answering: those it took from a command
    line (``clients``) and, on the master, the changes waiting for their commit
    (``awaiting``). At most ``limit`` of each; requests unanswered after ``timeout``
    seconds are forgotten (the command line gives up first)."""

    def __init__(self, limit: int, timeout: float) -> None:
        self.limit = limit
        self.timeout = timeout
        self.clients: dict[tuple[str, int], Pending] = {}
        self.awaiting: dict[int, list[tuple[str, str, int]]] = {}  # lsn -> (origin, client, req)
        self.refused = 0  # requests refused because the table was full

    def take(self, client: str, request: int, op: int, target: str, now: float) -> bool:
        """Hold a command line's request; False (counted) if the table is full."""
        self.expire(now)
        key = (client, request)
        if key not in self.clients and len(self.clients) >= self.limit:
            self.refused += 1
            return False
        self.clients[key] = Pending(op, target, now + self.timeout)
        return True

    def answer(self, client: str, request: int) -> Pending | None:
        """The request, if held here (and now answered: forgotten)."""
        return self.clients.pop((client, request), None)

    def wait_commit(self, lsn: int, origin: str, client: str, request: int) -> bool:
        if sum(len(v) for v in self.awaiting.values()) >= self.limit:
            self.refused += 1
            return False
        self.awaiting.setdefault(lsn, []).append((origin, client, request))
        return True

    def committed(self, commit: int) -> list[tuple[int, str, str, int]]:
        """Changes now committed: (lsn, origin, client, request)."""
        done = [(lsn, *who) for lsn in sorted(self.awaiting) if lsn <= commit
                for who in self.awaiting[lsn]]
        for lsn in [lsn for lsn in self.awaiting if lsn <= commit]:
            del self.awaiting[lsn]
        return done

    def expire(self, now: float) -> None:
        for key in [k for k, p in self.clients.items() if p.deadline <= now]:
            del self.clients[key]

    def next_deadline(self) -> float | None:
        return min((p.deadline for p in self.clients.values()), default=None)
