"""A member reads the hosts' log (docs/infra.md, "History" and "Members that sleep"),
sans-IO. Split from :mod:`m2mc.infra.member`, on the core's own state.

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
from typing import TYPE_CHECKING

from m2mc.infra import messages as msg
from m2mc.infra.codec import record_size
from m2mc.infra.member_events import Delivered, GroupRefused, HistoryLoaded, Uplink
from m2mc.infra.member_groups import deliver, others_membership, view_change

if TYPE_CHECKING:
    from m2mc.infra.member import MemberCore

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


def request_history(core: MemberCore, group: str, upto: int, now: float) -> None:
    """Start reading ``group``'s history up to position ``upto`` (newest first)."""
    running = core.fetches.running
    if group not in running and sum(1 for k in running if k != CATCHUP) \
            >= core.cfg.max_member_groups:
        oldest = next(k for k in running if k != CATCHUP)
        del running[oldest]
    running[group] = Fetch(group, (group,), 1, upto, True, upto=upto,
                           budget=core.cfg.history_bytes)
    send_due(core, now)
    if upto < 1:
        finish_history(core, running.pop(group))


def start_catchup(core: MemberCore, lo: int, hi: int, now: float) -> None:
    """Read positions ``lo..hi`` of our groups before delivering anything after them."""
    core.catchup = (lo, hi)
    core.stats.catchups += 1
    resume_catchup(core, now)


def resume_catchup(core: MemberCore, now: float) -> None:
    """(Again, after a power-on in the middle of one.)"""
    if core.catchup is None:
        return
    lo, hi = core.catchup
    if lo > hi or not core.groups:
        end_catchup(core, now)
        return
    core.fetches.running[CATCHUP] = Fetch(CATCHUP, tuple(sorted(core.groups)), lo, hi, False)
    send_due(core, now)


def send_due(core: MemberCore, now: float) -> None:
    """Send every request not answered for ``history_retry`` (or never sent)."""
    if not core._can_send() or core.mid is None or core.gateway is None:
        return
    retry = core.cfg.history_retry
    for f in core.fetches.running.values():
        if now < f.sent_at + retry or (f.key == CATCHUP and _no_room(core)):
            continue
        f.req = core.fetches.next_req()
        f.sent_at = now
        groups = tuple(sorted(core.groups)) if f.key == CATCHUP else f.groups
        core.stats.history_requests += 1
        core._out.append(Uplink(core.gateway, core.gateway_addr, msg.HistoryReq(
            core.node, core.gateway, core.mid, f.req, groups, f.lo, f.hi, f.newest)))


def _no_room(core: MemberCore) -> bool:
    """Back-pressure (``max_queued_messages``): a catch-up asks for its next part only
    while the application has room, so it passes the bound by at most one answer
    (``fetch_limit`` records); ``make_room`` sends the request when room comes."""
    if core.deliver_until is None or core.stats.delivered < core.deliver_until:
        return False
    if not core.paused:
        core.paused = True
        core.stats.delivery_pauses += 1
    return True


def on_reply(core: MemberCore, m: msg.HistoryReply, now: float) -> None:
    f = next((f for f in core.fetches.running.values() if f.req == m.req), None)
    if f is None or m.hi < m.lo:
        return  # stale, or nothing committed there yet at that host: asked again later
    core.stats.history_records += len(m.records)
    f.sent_at = -1e9  # answered: the next part goes at once
    if m.members and f.key != CATCHUP:
        f.members = m.members
    if f.key == CATCHUP:
        _catchup_part(core, f, m, now)
    else:
        _history_part(core, f, m)
    if f.key in core.fetches.running:
        send_due(core, now)


def _history_part(core: MemberCore, f: Fetch, m: msg.HistoryReply) -> None:
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
        finish_history(core, core.fetches.running.pop(f.key))
    elif f.hi < max(f.lo, m.floor):  # all the hosts hold is read
        if m.floor > 1 and f.oldest is not None:  # its gpos: how many messages came before
            f.gone = f.oldest.gpos - (f.oldest.kind == msg.APP)
        finish_history(core, core.fetches.running.pop(f.key))


def finish_history(core: MemberCore, f: Fetch) -> None:
    """The fetch is over: its messages to the application; the members the answer named
    complete our view of the group (those who joined before us)."""
    messages = tuple(Delivered(r.gseq, r.mid.node, r.app_seq, r.body, r.group, r.gpos)
                     for r in reversed(f.got))
    view = core.views.get(f.key)
    if view is not None and not core.cfg.skip_membership:
        view.update(f.members)
    core._events.append(HistoryLoaded(f.key, f.upto, messages, f.gone, f.members))


def _catchup_part(core: MemberCore, f: Fetch, m: msg.HistoryReply, now: float) -> None:
    if m.lo != f.lo:
        return  # not the part we asked for (we asked from f.lo)
    if m.floor > f.lo:  # retention dropped what lies below the floor
        core.catchup_gap = (f.lo, min(m.floor - 1, f.hi))
    for r in m.records:
        if f.lo <= r.gseq <= f.hi:
            _catchup_record(core, r, now)
    f.lo = max(f.lo, m.hi + 1)
    core.catchup = (f.lo, f.hi)
    if f.lo > f.hi:
        core.fetches.running.pop(CATCHUP, None)
        end_catchup(core, now)


def _catchup_record(core: MemberCore, r: msg.Record, now: float) -> None:
    """A record missed while away, in order: delivered as if we had never been away.
    Our own of the old membership tell which of our messages were sequenced."""
    mine = r.mid.node == core.node and r.mid != core.mid
    kind = r.kind
    if mine and kind == msg.APP:
        core.resume_sequenced.add(r.app_seq)
    elif mine and kind == msg.NOOP and r.app_seq not in core.group_ops:
        core.resume_sequenced.add(r.app_seq)  # a message refused: not sent again
        core.stats.sends_refused += 1
        core._events.append(GroupRefused(r.group, r.gseq, r.app_seq))
    if mine and kind == msg.EXPELLED:
        core.resume_upto = max(core.resume_upto, r.app_seq)
    if kind == msg.APP:
        before = core.stats.delivered
        deliver(core, r, now)
        core.stats.caught_up += core.stats.delivered - before
    elif kind in msg.GROUP_KINDS and mine:
        # Our join or leave of a group under the old join-id: our new JOINED listed the
        # groups we were in before it, so it is sent again, and takes effect when the
        # new membership's item is sequenced (a refused one is decided again too).
        pass
    elif kind in msg.GROUP_KINDS and r.group in core.groups:
        view_change(core, r, r.group)
    elif kind in msg.MEMBERSHIP_KINDS and r.mid.node != core.node:
        others_membership(core, r)


def cancel_catchup(core: MemberCore) -> None:
    """No catch-up after all (the log it reads went with a lost sequence)."""
    core.catchup = None
    core.resume_from = None
    core.resume_sequenced = set()
    core.resume_upto = 0
    core.fetches.running.pop(CATCHUP, None)


def end_catchup(core: MemberCore, now: float) -> None:
    """The catch-up is over: our messages not sequenced under the old join-id go out
    under the new one, after the ones sequenced (dropped), renumbered; delivery goes
    on after our new JOINED."""
    core.catchup = None
    done = core.resume_sequenced
    upto = core.resume_upto
    # (a join or leave of a group always goes again: see _catchup_record)
    keep = [i for i in core._news
            if i.kind != msg.APP or (i.app_seq not in done and i.app_seq > upto)]
    gone = [i for i in core._news
            if i.kind == msg.APP and (i.app_seq in done or i.app_seq <= upto)]
    core.resume_sequenced = set()
    core.resume_upto = 0
    if gone:
        renumber(core, keep, gone)
    core._deliver_ready(now)
    core._maybe_nack(now)
    core._pump(now)


def renumber(core: MemberCore, keep: list[msg.NewItem], gone: list[msg.NewItem]) -> None:
    """Our NEWs not sent yet, less ``gone`` (sequenced after all), numbered on from
    what was confirmed (the coordinator takes a member's NEWs without gaps)."""
    dropped = {i.app_seq for i in gone}
    for a in dropped:
        core.group_ops.pop(a, None)
    if core.durable is not None:
        core.durable.release(lambda i: i.app_seq in dropped)
    core._news = deque()
    core.mynew = core._confirmed
    for item in sorted(keep, key=lambda i: i.nseq):
        core.mynew += 1
        core._queue_new(msg.NewItem(core.mynew, item.app_seq, item.body, item.group,
                                    item.kind))


__all__ = ["CATCHUP", "Fetch", "Fetches", "cancel_catchup", "end_catchup", "on_reply",
           "request_history", "resume_catchup", "send_due", "start_catchup"]
