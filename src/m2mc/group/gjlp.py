"""GJLP, the Group Join/Leave Protocol (seeds/000 V, IX.C): the GIIT, the
advertisement and its ``grpsInfoList`` replies, group creation.

The seed has every process answer every advertisement; in a broadcast domain
of n processes that is n replies per newcomer. Here each process waits a random
back-off over ``[0, adv_reply_backoff]`` before replying, and drops from its
reply every group that a reply it overhears already describes at least as well
(same group, every membership entry at the same or a newer version). It sends
nothing if nothing is left. In a quiet network one reply per advertisement
goes out, plus those whose timers fire while the first is in flight. The back-off
is the feedback timer of :mod:`m2mc.group.backoff` for the crowd that may answer
with us (the largest membership among our groups): uniform in a small group, a
truncated exponential in a larger one, so that the copies stay near one at any
size. A process that drew for a smaller crowd than it knows of when its timer ends
(it had just joined, and heard of the others since) draws again for the crowd it
knows, from the same start (docs/decisions.md, "Advertisement replies in a crowd").

GIIT rows: ``member`` (the seed's grpInfo row), ``rejected`` and ``left`` (the
seed's N/A). Groups heard of but not yet accepted or rejected are kept apart
in ``discovered`` and offered to the application once. Bound: ``max_groups``
rows plus discovered groups; news of more groups is dropped and counted.

Keyed groups: discovery messages cannot carry a group's tag (a newcomer has no
key yet), so for a group this node holds keyed (``GiitRow.keyed``) the
membership entries of a ``grpsInfoList`` are ignored (counted
``keyed_members_ignored``): its membership comes only from authenticated
JOIN, LEAVE and STATUS messages. Joining a discovered keyed group starts from
an empty membership for the same reason.

Display names (:mod:`m2mc.group.names`): a reply carries the names of each group's
current members (not of a keyed group's), and a heard reply's names fill in those
of our groups' members whose own word we have not heard (not in a keyed group).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from m2mc.group.backoff import suppression_backoff
from m2mc.group.codec import MAX_GID, Adv, GrpInfo, GrpsInfo, MemberEntry
from m2mc.group.config import GroupConfig
from m2mc.group.membership import Membership
from m2mc.group.names import MemberNames
from m2mc.kinds import GjlpState, Order

REANNOUNCE = (1.0, 3.0)
"""A new group is announced at once and again this many seconds later (each time as a
suppressible reply): the announcement is one datagram on a lossy medium, and a process
that lost it would not learn of the group until someone advertised."""

MEMBER = GjlpState.MEMBER
REJECTED = GjlpState.REJECTED
LEFT = GjlpState.LEFT


@dataclass(slots=True)
class GiitRow:
    gid: str
    desc: str
    order: Order
    state: GjlpState
    membership: Membership
    my_version: int = 0
    keyed: bool = False  # this node holds the group's key: its traffic is sealed
    # Display names beside the membership (the makers bound them by max_members).
    names: MemberNames = field(default_factory=lambda: MemberNames(1024))

    def info(self) -> GrpInfo:
        """The row as this node knows it (current members' names included)."""
        return GrpInfo(self.gid, self.desc, self.order, self.membership.entries(), self.keyed,
                       self.names.of(self.membership.current()))

    def announcement(self) -> GrpInfo:
        """The row as a GJLP reply describes it: a keyed group's names stay out (they
        travel sealed only, and discovery is in the clear)."""
        info = self.info()
        return replace(info, names=()) if self.keyed else info


@dataclass(slots=True)
class GjlpStats:
    advertisements_sent: int = 0
    advertisements_heard: int = 0
    replies_sent: int = 0
    replies_suppressed: int = 0
    replies_heard: int = 0
    groups_dropped: int = 0
    order_conflicts: int = 0
    keyed_members_ignored: int = 0  # grpsInfo entries about keyed groups (unauthenticated)
    names_relayed: int = 0  # members' names taken from grpsInfo (their own word unknown)
    unknown_group_advs: int = 0  # ADVs for traffic of a group not described (unknown_groups)
    unknown_group_advs_suppressed: int = 0  # ... left out: another node's ADV came first
    extra: dict[str, int] = field(default_factory=dict)


class Gjlp:
    def __init__(self, pid: str, config: GroupConfig, rng: random.Random) -> None:
        self.pid = pid
        self.config = config
        self.rng = rng
        self.giit: dict[str, GiitRow] = {}
        self.discovered: dict[str, GrpInfo] = {}
        self._reply_at: float | None = None
        self._reply_gids: list[str] = []
        # when the pending reply's back-off was drawn, and for how large a crowd
        self._drawn_at = 0.0
        self._drawn_for = 1
        self._later: list[tuple[float, str]] = []  # (when, gid): announce a new group again
        self.stats = GjlpStats()

    # ------------------------------------------------------------ advertise
    def advertise(self) -> Adv:
        """SendAdv: delete N/A rows (so those groups are offered again), then advertise."""
        for gid in [g for g, row in self.giit.items() if row.state != MEMBER]:
            del self.giit[gid]
        self.discovered.clear()
        self.stats.advertisements_sent += 1
        return Adv(self.pid)

    def on_adv(self, adv: Adv, now: float) -> None:
        """SendGrpInfoList, after a back-off (suppressible)."""
        self.stats.advertisements_heard += 1
        if adv.sender == self.pid:
            return
        gids = [gid for gid, row in self.giit.items() if row.state == MEMBER]
        if not gids:
            return
        for gid in gids:
            if gid not in self._reply_gids:
                self._reply_gids.append(gid)
        if self._reply_at is None:
            self._draw(now)

    def announce(self, gids: list[str], now: float) -> None:
        """Describe these groups of ours soon (a node back in range re-announces the
        groups it created, seeds/000 III.B.1): queued like a reply to an advertisement,
        so a reply overheard meanwhile that describes a group at least as well drops it."""
        for gid in gids:
            if gid not in self._reply_gids:
                self._reply_gids.append(gid)
        if gids and self._reply_at is None:
            self._draw(now)

    def announce_later(self, gid: str, now: float) -> None:
        """A group was just created (and announced): announce it again at REANNOUNCE."""
        self._later.extend((now + after, gid) for after in REANNOUNCE)

    def reply_due(self, now: float) -> GrpsInfo | None:
        if self._later and min(at for at, _ in self._later) <= now:
            self.announce([gid for at, gid in self._later if at <= now], now)
            self._later = [(at, gid) for at, gid in self._later if at > now]
        if self._reply_at is None or now < self._reply_at or self._grown(now):
            return None
        self._reply_at = None
        gids, self._reply_gids = self._reply_gids, []
        infos = tuple(self.giit[g].announcement() for g in gids
                      if g in self.giit and self.giit[g].state == MEMBER)
        if not infos:
            self.stats.replies_suppressed += 1
            return None
        self.stats.replies_sent += 1
        return GrpsInfo(self.pid, infos)

    def _crowd(self) -> int:
        """How many processes may answer an advertisement with us: the largest current
        membership among our groups."""
        return max((row.membership.current_count() for row in self.giit.values()
                    if row.state == MEMBER), default=1)

    def _backoff(self, crowd: int) -> float:
        return suppression_backoff(self.rng, self.config.adv_reply_backoff, crowd,
                                   self.config.repair_everyone)

    def _draw(self, now: float) -> None:
        self._drawn_at, self._drawn_for = now, self._crowd()
        self._reply_at = now + self._backoff(self._drawn_for)

    def _grown(self, now: float) -> bool:
        """At the reply's time: if the crowd is now larger than the one we drew for
        (and large enough for the exponential), draw again for it from the same start,
        and wait if that lands later. Else a process that drew just after joining, with
        the others not yet heard of, would answer from the uniform's early part, where
        the exponential puts few, and add a copy to every join."""
        crowd = self._crowd()
        if crowd <= max(self._drawn_for, self.config.repair_everyone):
            return False
        self._drawn_for = crowd
        again = self._drawn_at + self._backoff(crowd)
        if again <= now:
            return False
        self._reply_at = again
        return True

    def next_deadline(self) -> float | None:
        later = min(at for at, _ in self._later) if self._later else None
        if later is None or (self._reply_at is not None and self._reply_at < later):
            return self._reply_at
        return later

    # ----------------------------------------------------- receive grpsInfo
    def on_grps_info(self, msg: GrpsInfo) -> tuple[list[GrpInfo],
                                                   list[tuple[str, list[MemberEntry]]],
                                                   list[tuple[str, str]]]:
        """RecvGrpsInfoList. Returns (groups new to us, (gid, membership changes) of ours,
        (gid, pid) of our groups' members whose name it changed)."""
        self.stats.replies_heard += 1
        new: list[GrpInfo] = []
        changed: list[tuple[str, list[MemberEntry]]] = []
        renamed: list[tuple[str, str]] = []
        for info in msg.groups:
            row = self.giit.get(info.gid)
            if row is None:
                if info.gid in self.discovered:
                    self.discovered[info.gid] = _merged(self.discovered[info.gid], info,
                                                        self.config.max_members)
                    continue
                if len(self.giit) + len(self.discovered) >= self.config.max_groups:
                    self.stats.groups_dropped += 1
                    continue
                if info.names:  # names of the listed current members only
                    current = {e.pid for e in info.members if e.joined}
                    info = replace(info, names=tuple(p for p in info.names if p[0] in current))
                self.discovered[info.gid] = info
                new.append(info)
                continue
            if row.state != MEMBER:
                continue  # N/A: discard
            if row.keyed:
                # Unauthenticated news of a keyed group: it may neither change the
                # membership nor suppress our own reply (which newcomers need).
                self.stats.keyed_members_ignored += 1
                continue
            if info.order != row.order:
                self.stats.order_conflicts += 1
            delta = row.membership.merge(info.members)
            if delta:
                changed.append((info.gid, delta))
            for pid, name in info.names:
                if (pid != self.pid and row.membership.is_member(pid)
                        and row.names.relayed(pid, name)):
                    self.stats.names_relayed += 1
                    renamed.append((info.gid, pid))
            self._suppress(row, info)
        return new, changed, renamed

    def _suppress(self, row: GiitRow, heard: GrpInfo) -> None:
        """Drop ``row`` from our pending reply if ``heard`` says all we would (its
        membership, and the names of its members)."""
        if row.gid not in self._reply_gids:
            return
        theirs = Membership(self.config.max_members, heard.members)
        if (theirs.covers(row.membership.entries())
                and set(row.announcement().names) <= set(heard.names)):
            self._reply_gids.remove(row.gid)

    # ------------------------------------------------------ rows and groups
    def row(self, gid: str, desc: str = "", order: Order = Order.SB,
            keyed: bool = False) -> GiitRow:
        """The GIIT row of ``gid``, made from discovery (or from scratch) if absent.
        A ``keyed`` row takes no membership from (unauthenticated) discovery."""
        row = self.giit.get(gid)
        if row is not None:
            return row
        if len(gid) > MAX_GID or not gid:
            from m2mc.errors import UsageError

            raise UsageError(f"group id must be 1 to {MAX_GID} characters")
        info = self.discovered.pop(gid, None)
        membership = Membership(self.config.max_members,
                                info.members if info and not keyed else ())
        row = GiitRow(gid, info.desc if info else desc, info.order if info else order, LEFT,
                      membership, keyed=keyed, names=MemberNames(self.config.max_members))
        if info is not None and not keyed:
            for pid, name in info.names:
                if membership.is_member(pid):
                    row.names.relayed(pid, name)
        self.giit[gid] = row
        return row

    def reject(self, gid: str) -> None:
        """rejectGrp: an N/A row, so the group is not offered again until we advertise."""
        info = self.discovered.pop(gid, None)
        if gid not in self.giit:
            self.giit[gid] = GiitRow(gid, info.desc if info else "",
                                     info.order if info else Order.SB, REJECTED,
                                     Membership(self.config.max_members),
                                     names=MemberNames(self.config.max_members))



def _merged(old: GrpInfo, new: GrpInfo, max_members: int) -> GrpInfo:
    """Two replies about a group not joined: membership merged; the newer reply's
    names win, for the merged group's current members."""
    m = Membership(max_members, old.members)
    m.merge(new.members)
    names = dict(old.names)
    names.update(new.names)
    return GrpInfo(old.gid, old.desc, old.order, m.entries(), old.keyed or new.keyed,
                   tuple(sorted((p, n) for p, n in names.items() if m.is_member(p))))
