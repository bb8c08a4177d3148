"""A member reads the hosts' log (docs/infra.md, "History" and "Members that sleep"),
sans-IO: :class:`Reads`, one object of a :class:`~m2mc.infra.member.MemberCore`, which
it sees only through the narrow port :class:`~m2mc.infra.member_ports.ReadsSeat`,
delivering what it reads through the member's :class:`~m2mc.infra.member_groups.Groups`.

* **History** (:meth:`~m2mc.infra.member.MemberCore.request_history`): a group's
  messages up to a position, the newest first, until ``history_bytes`` of them or the
  hosts' floor; given to the application as one
  :class:`~m2mc.infra.member_events.HistoryLoaded`.
* **Catch-up** after a return: a member the hosts expelled while it was away (asleep,
  switched off, out of coverage longer than ``member_timeout``) joins again with the
  same groups and a fresh join-id, and before it delivers anything after its new
  JOINED it reads, oldest first, every record of its groups between what it had
  delivered and that JOINED, and delivers them in order: it loses only what the
  hosts' retention dropped, and is told so (``MessagesLost``, ``stats.lost``). Its
  own messages that were sequenced under the old join-id come by in that range (or
  its EXPELLED record says up to which one): they are not sent again; the others are,
  under the new join-id, once the catch-up is over.

Requests go to the current gateway as :class:`~m2mc.infra.messages.HistoryReq`, not
through the reliable uplink: one is sent again after ``history_retry`` until an
answer covers part of it. At most ``max_member_groups`` history fetches run at once
(a new one for a group replaces the old), and one catch-up.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size
from m2mc.infra.member_events import Delivered, GroupRefused, HistoryLoaded, Uplink
from m2mc.infra.member_groups import Groups
from m2mc.infra.member_ports import ReadsSeat

CATCHUP = ""  # the key of the catch-up among the fetches (a group's name is never empty)


@dataclass(slots=True)
class Fetch:
    key: str  # the group (history), or CATCHUP
    groups: tuple[str, ...]
    lo: int
    hi: int  # what is still to read: lo..hi
    newest: bool
    upto: int = 0  # history: the position asked up to
    req: int = 0
    sent_at: float = -1e9
    budget: int = 0  # history: bytes still wanted
    got: list[msg.Record] = field(default_factory=list)  # history: newest first
    oldest: msg.Record | None = None  # history: the oldest record of the group read
    gone: int = 0
    members: tuple[str, ...] = ()


class Fetches:
    __slots__ = ("_next_req", "running")

    def __init__(self) -> None:
        self.running: dict[str, Fetch] = {}
        self._next_req = 0

    def next_req(self) -> int:
        self._next_req += 1
        return self._next_req

    def deadline(self, retry: float, paused: bool) -> float | None:
        """When a request is due again (a paused member's catch-up waits for room)."""
        return min((f.sent_at + retry for f in self.running.values()
                    if not (paused and f.key == CATCHUP)), default=None)


class Reads:
    """A member's history reads and its catch-up: the fetches running, on the catch-up
    state its core holds (``catchup``, ``resume_*``: the durable side saves them)."""

    __slots__ = ("fetches", "groups", "seat")

    def __init__(self, seat: ReadsSeat, groups: Groups) -> None:
        self.seat = seat
        self.groups = groups  # delivers what a catch-up reads
        self.fetches = Fetches()

    def deadline(self, paused: bool) -> float | None:
        """When a request is due again (None: none runs, or only a paused catch-up)."""
        return self.fetches.deadline(self.seat.cfg.history_retry, paused)

    def tick(self, now: float) -> None:
        if self.fetches.running:
            self.send_due(now)

    def request_history(self, group: str, upto: int, now: float) -> None:
        """Start reading ``group``'s history up to position ``upto`` (newest first)."""
        core = self.seat
        running = self.fetches.running
        if group not in running and sum(1 for k in running if k != CATCHUP) \
                >= core.cfg.max_member_groups:
            oldest = next(k for k in running if k != CATCHUP)
            del running[oldest]
        running[group] = Fetch(group, (group,), 1, upto, True, upto=upto,
                               budget=core.cfg.history_bytes)
        self.send_due(now)
        if upto < 1:
            self.finish_history(running.pop(group))

    def start_catchup(self, lo: int, hi: int, now: float) -> None:
        """Read positions ``lo..hi`` of our groups before delivering anything after them."""
        core = self.seat
        core.catchup = (lo, hi)
        core.stats.catchups += 1
        self.resume_catchup(now)

    def resume_catchup(self, now: float) -> None:
        """(Again, after a power-on in the middle of one.)"""
        core = self.seat
        if core.catchup is None:
            return
        lo, hi = core.catchup
        if lo > hi or not core.groups:
            self.end_catchup(now)
            return
        self.fetches.running[CATCHUP] = Fetch(CATCHUP, tuple(sorted(core.groups)), lo, hi,
                                              False)
        self.send_due(now)

    def send_due(self, now: float) -> None:
        """Send every request not answered for ``history_retry`` (or never sent)."""
        core = self.seat
        if not core.can_send() or core.mid is None or core.gateway is None:
            return
        retry = core.cfg.history_retry
        for f in self.fetches.running.values():
            if now < f.sent_at + retry or (f.key == CATCHUP and self._no_room()):
                continue
            f.req = self.fetches.next_req()
            f.sent_at = now
            groups = tuple(sorted(core.groups)) if f.key == CATCHUP else f.groups
            core.stats.history_requests += 1
            core.uplinks.append(Uplink(core.gateway, core.gateway_addr, msg.HistoryReq(
                core.node, core.gateway, core.mid, f.req, groups, f.lo, f.hi, f.newest)))

    def _no_room(self) -> bool:
        """Back-pressure (``max_queued_messages``): a catch-up asks for its next part only
        while the application has room, so it passes the bound by at most one answer
        (``fetch_limit`` records); ``make_room`` sends the request when room comes."""
        core = self.seat
        if core.deliver_until is None or core.stats.delivered < core.deliver_until:
            return False
        if not core.paused:
            core.paused = True
            core.stats.delivery_pauses += 1
        return True

    def on_reply(self, m: msg.HistoryReply, now: float) -> None:
        f = next((f for f in self.fetches.running.values() if f.req == m.req), None)
        if f is None or m.hi < m.lo:
            return  # stale, or nothing committed there yet at that host: asked again later
        self.seat.stats.history_records += len(m.records)
        f.sent_at = -1e9  # answered: the next part goes at once
        if m.members and f.key != CATCHUP:
            f.members = m.members
        if f.key == CATCHUP:
            self._catchup_part(f, m, now)
        else:
            self._history_part(f, m)
        if f.key in self.fetches.running:
            self.send_due(now)

    def _history_part(self, f: Fetch, m: msg.HistoryReply) -> None:
        if m.hi < f.hi:
            return  # that host's commit point is behind ours: asked again later
        for r in reversed(m.records):
            if r.group != f.key:
                continue
            if f.budget <= 0:
                break  # history_bytes read: the rest stays at the hosts
            f.oldest = r
            if r.kind == msg.APP:
                f.got.append(r)
                f.budget -= record_size(r)
        f.hi = m.lo - 1
        if f.budget <= 0:
            self.finish_history(self.fetches.running.pop(f.key))
        elif f.hi < max(f.lo, m.floor):  # all the hosts hold is read
            if m.floor > 1 and f.oldest is not None:  # its gpos: how many messages came before
                f.gone = f.oldest.gpos - (f.oldest.kind == msg.APP)
            self.finish_history(self.fetches.running.pop(f.key))

    def finish_history(self, f: Fetch) -> None:
        """The fetch is over: its messages to the application; the members the answer
        named complete our view of the group (those who joined before us)."""
        core = self.seat
        messages = tuple(Delivered(r.gseq, r.mid.node, r.app_seq, r.body, r.group, r.gpos)
                         for r in reversed(f.got))
        view = core.views.get(f.key)
        if view is not None and not core.cfg.skip_membership:
            view.update(f.members)
        core.event_queue.append(HistoryLoaded(f.key, f.upto, messages, f.gone, f.members))

    def _catchup_part(self, f: Fetch, m: msg.HistoryReply, now: float) -> None:
        core = self.seat
        if m.lo != f.lo:
            return  # not the part we asked for (we asked from f.lo)
        if m.floor > f.lo:  # retention dropped what lies below the floor
            core.catchup_gap = (f.lo, min(m.floor - 1, f.hi))
        for r in m.records:
            if f.lo <= r.gseq <= f.hi:
                self._catchup_record(r, now)
        f.lo = max(f.lo, m.hi + 1)
        core.catchup = (f.lo, f.hi)
        if f.lo > f.hi:
            self.fetches.running.pop(CATCHUP, None)
            self.end_catchup(now)

    def _catchup_record(self, r: msg.Record, now: float) -> None:
        """A record missed while away, in order: delivered as if we had never been away.
        Our own of the old membership tell which of our messages were sequenced."""
        core = self.seat
        mine = r.mid.node == core.node and r.mid != core.mid
        kind = r.kind
        if mine and kind == msg.APP:
            core.resume_sequenced.add(r.app_seq)
        elif mine and kind == msg.NOOP and r.app_seq not in core.group_ops:
            core.resume_sequenced.add(r.app_seq)  # a message refused: not sent again
            core.stats.sends_refused += 1
            core.event_queue.append(GroupRefused(r.group, r.gseq, r.app_seq))
        if mine and kind == msg.EXPELLED:
            core.resume_upto = max(core.resume_upto, r.app_seq)
        if kind == msg.APP:
            before = core.stats.delivered
            self.groups.deliver(r, now)
            core.stats.caught_up += core.stats.delivered - before
        elif kind in msg.GROUP_KINDS and mine:
            # Our join or leave of a group under the old join-id: our new JOINED listed
            # the groups we were in before it, so it is sent again, and takes effect when
            # the new membership's item is sequenced (a refused one is decided again too).
            pass
        elif kind in msg.GROUP_KINDS and r.group in core.groups:
            self.groups.view_change(r, r.group)
        elif kind in msg.MEMBERSHIP_KINDS and r.mid.node != core.node:
            self.groups.others_membership(r)

    def cancel_catchup(self) -> None:
        """No catch-up after all (the log it reads went with a lost sequence)."""
        core = self.seat
        core.catchup = None
        core.resume_from = None
        core.resume_sequenced = set()
        core.resume_upto = 0
        self.fetches.running.pop(CATCHUP, None)

    def end_catchup(self, now: float) -> None:
        """The catch-up is over: our messages not sequenced under the old join-id go out
        under the new one, after the ones sequenced (dropped), renumbered; delivery goes
        on after our new JOINED."""
        core = self.seat
        core.catchup = None
        done = core.resume_sequenced
        upto = core.resume_upto
        # (a join or leave of a group always goes again: see _catchup_record)
        keep = [i for i in core.news
                if i.kind != msg.APP or (i.app_seq not in done and i.app_seq > upto)]
        gone = [i for i in core.news
                if i.kind == msg.APP and (i.app_seq in done or i.app_seq <= upto)]
        core.resume_sequenced = set()
        core.resume_upto = 0
        if gone:
            self.renumber(keep, gone)
        core.deliver_ready(now)
        core.maybe_nack(now)
        core.pump(now)

    def renumber(self, keep: list[msg.NewItem], gone: list[msg.NewItem]) -> None:
        """Our NEWs not sent yet, less ``gone`` (sequenced after all), numbered on from
        what was confirmed (the coordinator takes a member's NEWs without gaps)."""
        core = self.seat
        dropped = {i.app_seq for i in gone}
        for a in dropped:
            core.group_ops.pop(a, None)
        if core.durable is not None:
            core.durable.release(lambda i: i.app_seq in dropped)
        core.news = deque()
        core.mynew = core.confirmed
        for item in sorted(keep, key=lambda i: i.nseq):
            core.mynew += 1
            core.queue_new(msg.NewItem(core.mynew, item.app_seq, item.body, item.group,
                                       item.kind))


__all__ = ["CATCHUP", "Fetch", "Fetches", "Reads"]
