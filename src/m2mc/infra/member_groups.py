"""A member's groups (docs/infra.md, "Groups"; seeds/001 2.2 (i) lifted): which of the
deployment's records it delivers, its view of each group, and its own joins and
leaves: :class:`Groups`, one object of a :class:`~m2mc.infra.member.MemberCore`, which
it sees only through the narrow port :class:`~m2mc.infra.member_ports.GroupsSeat`.
Sans-IO.

The deployment has one order, and every member takes every record of it in that
order (its ``mystable`` counts them all); it hands to the application the messages
of the groups it is in at that position, which change only at its own records:
JOINED (the groups it joins the deployment with), GJOINED, GLEFT, and LEFT or
EXPELLED (all of them). Every member of a group therefore delivers exactly the
group's messages between its joining and its leaving, in one order. A message's
``gpos`` (its place in its group) shows a member any message of its groups it will
never get: only a return after the hosts' retention dropped what it missed
(:mod:`m2mc.infra.member_history`).
"""

from __future__ import annotations

from m2mc.errors import BufferFullError, UsageError
from m2mc.infra import messages as msg
from m2mc.infra.ids import MemberId
from m2mc.infra.member_events import (
    Control,
    Delivered,
    GroupJoined,
    GroupLeft,
    GroupRefused,
    MessagesLost,
    Phase,
    ViewChange,
)
from m2mc.infra.member_ports import GroupsSeat
from m2mc.infra.state import StateError, unpack_groups
from m2mc.kinds import ViewKind
from m2mc.trace.schema import detail_json

_VIEW_KIND = {msg.JOINED: ViewKind.JOINED, msg.GJOINED: ViewKind.JOINED, msg.LEFT: ViewKind.LEFT,
              msg.GLEFT: ViewKind.LEFT, msg.EXPELLED: ViewKind.EXPELLED}


def check_name(group: str) -> None:
    if not 0 < len(group.encode()) <= msg.MAX_GROUP_NAME:
        raise UsageError(f"a group name has 1 to {msg.MAX_GROUP_NAME} bytes of UTF-8")


def intended(seat: GroupsSeat) -> dict[str, bool]:
    """Each group we are in or asked to join, and whether we asked to leave it since:
    the groups joined (or our JOIN names), then our group items not yet in the order."""
    out = dict.fromkeys(seat.groups, False)
    if seat.phase == Phase.JOINING:  # (what our JOIN names)
        out.update(dict.fromkeys(seat.join_groups, False))
    for kind, group in seat.group_ops.values():
        if kind == msg.GJOINED:
            out[group] = False
        else:
            out[group] = True
    return out


def wanted(seat: GroupsSeat) -> list[str]:
    """The groups we will be in once our items are taken."""
    return [g for g, leaving in intended(seat).items() if not leaving]


class Groups:
    """A member's groups, on the tables its core holds (``groups``, ``views``,
    ``group_ops``, ``join_groups``, ``known_groups``: the drivers read them, and the
    durable side saves them); it keeps only where each group's last message was."""

    __slots__ = ("last_gseq", "seat")

    def __init__(self, seat: GroupsSeat) -> None:
        self.seat = seat
        self.last_gseq: dict[str, int] = {}  # group -> gseq of its last message delivered

    def join(self, now: float, groups: tuple[str, ...] | list[str] | None = None) -> MemberId:
        """Ask to join the deployment, and ``groups`` with it (default: the core's
        ``group``), with a fresh join-id (seeds/001 2.3, 3.3 steps i-iv). Our NEWs not
        sequenced in the last membership go again under the new one (after a return,
        once the catch-up saw which were: :mod:`.member_history`)."""
        core = self.seat
        if core.phase not in (Phase.IDLE, Phase.LEFT):
            raise UsageError(f"join: already {core.phase.value}")
        wanted = tuple(dict.fromkeys(groups if groups is not None else (core.group,)))
        for g in wanted:
            check_name(g)
        if len(wanted) > core.cfg.max_member_groups:
            raise UsageError(f"join: at most {core.cfg.max_member_groups} groups")
        pending = sorted([*(item for item, _ in core.unconfirmed.values()),
                          *core.in_flight(), *core.news], key=lambda i: i.nseq)
        pending = [i for i in pending if i.nseq > core.confirmed]
        core.sender.abandon()  # a frame of the old membership is worthless now
        core.reset_membership()
        core.join_groups = wanted
        if core.resume_from is None:
            core.groups = {g: gpos for g, gpos in core.groups.items() if g in wanted}
        join_id = core.rng.getrandbits(32)
        while join_id == core.old_join_id:  # never the saved one again (2.3)
            join_id = core.rng.getrandbits(32)
        core.mid = MemberId(core.node, join_id)
        core.mystable = core.last_high
        core.phase = Phase.JOINING
        core.control.append(Control.JOIN)
        if core.durable is not None:
            kept = {i.app_seq for i in pending}
            core.durable.release(lambda i: i.app_seq not in kept)
        for item in pending:  # messages never sequenced in the last membership
            core.mynew += 1
            core.queue_new(msg.NewItem(core.mynew, item.app_seq, item.body, item.group,
                                       item.kind))
        core.pump(now)
        return core.mid

    def join_group(self, group: str, now: float) -> None:
        """Join ``group`` too (a GJOINED item, in order with our messages); outside the
        deployment, join it with this group."""
        core = self.seat
        check_name(group)
        if core.phase in (Phase.IDLE, Phase.LEFT):
            core.join(now, (group,))
            return
        if core.phase not in (Phase.JOINING, Phase.MEMBER) or core.leave_requested:
            raise UsageError(f"join_group: leaving the deployment ({core.phase.value})")
        plan = intended(core)
        if plan.get(group) is False:
            return  # in it, or joining it already
        if sum(1 for leaving in plan.values() if not leaving) >= core.cfg.max_member_groups:
            raise UsageError(f"join_group: at most {core.cfg.max_member_groups} groups")
        self.group_item(msg.GJOINED, group, now)

    def leave_group(self, group: str, now: float) -> None:
        """Leave ``group`` (a GLEFT item); the last of our groups: leave the deployment."""
        core = self.seat
        plan = intended(core)
        if plan.get(group) is not False or core.leave_requested:
            raise UsageError(f"leave_group: not in group {group!r}")
        if sum(1 for leaving in plan.values() if not leaving) == 1:
            core.leave(now)
            return
        self.group_item(msg.GLEFT, group, now)

    def group_item(self, kind: int, group: str, now: float) -> None:
        core = self.seat
        if core.pending_sends >= core.cfg.max_pending_sends:
            raise BufferFullError(f"{core.cfg.max_pending_sends} items already pending")
        core.mynew += 1
        core.app_seq += 1
        core.queue_new(msg.NewItem(core.mynew, core.app_seq, b"", group, kind))
        core.pump(now)

    def own_item(self, r: msg.Record) -> None:
        """Our own item came in the order: it is no longer pending (seeds/001 3.3)."""
        core = self.seat
        core.unconfirmed.pop(r.nseq, None)
        core.confirmed = max(core.confirmed, r.nseq)
        core.power_on = False  # the hosts hold our membership
        if core.durable is not None:
            core.durable.sequenced(r.nseq)
        op = core.group_ops.pop(r.app_seq, None)
        if r.kind == msg.NOOP:
            if op is None:
                core.stats.sends_refused += 1
                core.event_queue.append(GroupRefused(r.group, r.gseq, r.app_seq))
            elif op[0] == msg.GJOINED:
                core.stats.groups_refused += 1
                core.event_queue.append(GroupRefused(r.group, r.gseq))

    def seen(self, group: str) -> None:
        """A group of the deployment (for ``discovered``): the latest ``max_groups``."""
        known = self.seat.known_groups
        known.pop(group, None)
        known[group] = None
        if len(known) > self.seat.cfg.max_groups:
            del known[next(iter(known))]

    def on_item(self, r: msg.Record, now: float) -> None:
        """An APP, GJOINED, GLEFT or NOOP record, delivered at its place."""
        if r.kind == msg.GJOINED:
            self.seen(r.group)
        own = r.mid == self.seat.mid
        if own:
            self.own_item(r)
        kind = r.kind
        if kind == msg.APP:
            self.deliver(r, now)
        elif kind == msg.GJOINED and own:
            self.enter(r.group, r.gseq, r.gpos, now)
        elif kind == msg.GLEFT and own:
            self.leave(r.group, r.gseq, now)
        elif kind in msg.GROUP_KINDS and r.group in self.seat.groups:
            self.view_change(r, r.group)

    def deliver(self, r: msg.Record, now: float) -> None:
        """A message: to the application if it is of one of our groups."""
        core = self.seat
        last = core.groups.get(r.group)
        if last is None:
            core.stats.other_groups += 1
            self.seen(r.group)
            return
        if last >= 0 and r.gpos > last + 1:  # messages of the group we will never get
            lost = r.gpos - last - 1
            core.stats.lost += lost
            core.event_queue.append(MessagesLost(r.group, self.last_gseq.get(r.group, 0),
                                                 r.gseq, lost))
        core.groups[r.group] = max(last, r.gpos)
        self.last_gseq[r.group] = r.gseq
        core.stats.delivered += 1
        core.event_queue.append(Delivered(r.gseq, r.mid.node, r.app_seq, r.body, r.group,
                                          r.gpos))
        if core.trace.enabled:
            core.emit("deliver", now, mid=f"{r.mid.node}:{r.app_seq}", gseq=r.gseq,
                      bytes=len(r.body), group=r.group)

    def enter(self, group: str, gseq: int, gpos: int, now: float) -> None:
        """We are in ``group`` from here on."""
        core = self.seat
        if group in core.groups:
            return  # (a return after an expulsion: we never left it)
        core.groups[group] = gpos
        core.views[group] = {core.node}
        core.event_queue.append(GroupJoined(group, gseq))
        if core.trace.enabled:
            core.emit("join", now, gseq=gseq, group=group,
                      detail=detail_json(member=str(core.mid)))

    def leave(self, group: str, gseq: int, now: float, expelled: bool = False,
              **extra: object) -> None:
        core = self.seat
        if core.groups.pop(group, None) is None:
            return
        core.views.pop(group, None)
        self.last_gseq.pop(group, None)
        core.event_queue.append(GroupLeft(group, gseq, expelled))
        if core.trace.enabled:
            core.emit("leave", now, gseq=gseq, group=group,
                      detail=detail_json(member=str(core.mid), expelled=expelled, **extra))

    def own_joined(self, r: msg.Record, now: float) -> None:
        """Our JOINED record: the groups it lists are ours; those we asked for and it
        does not list were refused."""
        core = self.seat
        try:
            accepted = dict(unpack_groups(r.body))
        except StateError:
            accepted = {}
        for group, count in accepted.items():
            self.enter(group, r.gseq, count, now)
        for group in core.join_groups:
            if group not in accepted:
                core.stats.groups_refused += 1
                core.event_queue.append(GroupRefused(group, r.gseq))
                self.leave(group, r.gseq, now, expelled=True)

    def view_change(self, r: msg.Record, group: str) -> None:
        """Another member joined or left one of our groups."""
        core = self.seat
        if core.cfg.skip_membership:
            return  # 4.3 (ii): membership changes are not delivered
        view = core.views.setdefault(group, {core.node})
        joined = r.kind in (msg.JOINED, msg.GJOINED)
        if joined == (r.mid.node in view):
            return
        if joined:
            view.add(r.mid.node)
        else:
            view.discard(r.mid.node)
        core.event_queue.append(ViewChange(r.gseq, _VIEW_KIND[r.kind], r.mid, group))

    def others_membership(self, r: msg.Record) -> None:
        """Another member's JOINED (with its groups), LEFT or EXPELLED (all of its
        groups)."""
        core = self.seat
        if r.kind == msg.JOINED:
            try:
                groups = unpack_groups(r.body)
            except StateError:
                return
            for group, _ in groups:
                self.seen(group)
                if group in core.groups:
                    self.view_change(r, group)
            return
        for group in list(core.groups):
            if r.mid.node in core.views.get(group, ()):
                self.view_change(r, group)


__all__ = ["Groups", "check_name", "intended", "wanted"]
