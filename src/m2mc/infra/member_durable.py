"""The durable side of a :class:`~m2mc.infra.member.MemberCore` (switch-off and
power-on, seeds/001 4.2; what is saved and why: :mod:`m2mc.infra.persist`), which it
sees only through the narrow port :class:`~m2mc.infra.member_ports.DurableSeat`.

:class:`Durable` tracks what changed since the last save (the membership's scalars,
the message numbering, own messages added or seen in the total order) and holds the
core's trace events until the save that makes them true, as the group layer does
(runtime/tracing.py). The core never commits: :meth:`Durable.take` turns what
changed into a :class:`~m2mc.core.Save` of a :class:`~m2mc.infra.persist.MemberCommit`
for the driver to carry out (commit, then the trace: with a trace journal the
batch's lines are stored in the same commit and appended to the file after it), so
a ``kill -9`` loses neither a line nor a save the trace already tells of.
:func:`restore` takes the saved state up at power-on. No file is opened here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from m2mc.core import Save
from m2mc.errors import SavedStateError, UsageError
from m2mc.infra import messages as msg
from m2mc.infra.ids import MemberId
from m2mc.infra.member_events import Control, Phase
from m2mc.infra.member_history import Reads
from m2mc.infra.member_ports import DurableSeat
from m2mc.infra.persist import MemberCommit, SavedMember, encode_membership
from m2mc.trace.schema import TraceEvent, TraceJournal, TraceSink


class Durable:
    __slots__ = ("drop", "journal", "owned", "put", "saved", "trace_out")

    def __init__(self, trace: TraceSink, journal: TraceJournal | None = None) -> None:
        self.journal = journal if trace.enabled else None
        # Trace events wait here for the commit (None: tracing is off).
        self.trace_out: list[TraceEvent] | None = [] if trace.enabled else None
        self.owned: dict[int, msg.NewItem] = {}  # own messages not yet in the total order
        self.put: dict[int, msg.NewItem] = {}  # ... added or renumbered since the last commit
        self.drop: set[int] = set()  # ... seen in the total order since the last commit
        self.saved: tuple[object, ...] | None = None  # the scalars of the last commit

    def own(self, item: msg.NewItem) -> None:
        self.owned[item.app_seq] = item
        self.put[item.app_seq] = item

    def sequenced(self, nseq: int) -> None:
        """Own NEWs up to ``nseq`` are in the total order (the coordinator numbers them
        in ``nseq`` order, and ``owned`` is in that order: from the front)."""
        owned = self.owned
        while owned:
            app_seq, item = next(iter(owned.items()))
            if item.nseq > nseq:
                return
            del owned[app_seq]
            self.put.pop(app_seq, None)
            self.drop.add(app_seq)

    def release(self, done: Callable[[msg.NewItem], bool]) -> None:
        """Forget the own messages for which ``done`` holds."""
        for app_seq in [a for a, i in self.owned.items() if done(i)]:
            del self.owned[app_seq]
            self.put.pop(app_seq, None)
            self.drop.add(app_seq)

    @staticmethod
    def scalars(core: DurableSeat) -> tuple[object, ...]:
        return (core.group, core.phase.value, None if core.mid is None else core.mid.join_id,
                core.mystable, core.mynew, core.confirmed, core.leave_requested,
                core.app_seq, core.sequence, tuple(core.groups.items()), core.catchup,
                len(core.resume_sequenced), core.resume_upto, core.resume_from)

    def take(self, core: DurableSeat) -> Save[MemberCommit] | None:
        """What changed since the last save, as a save for the driver to carry out
        (and the trace events it makes true); None if nothing had."""
        state, out = self.scalars(core), self.trace_out
        if state == self.saved and not self.put and not self.drop and not out:
            return None
        journal = self.journal
        batch = journal.render(out) if journal is not None and out else None
        join_id = None if core.mid is None else core.mid.join_id
        membership = encode_membership(
            group=core.group, phase=core.phase.value, join_id=join_id, mystable=core.mystable,
            mynew=core.mynew, confirmed=core.confirmed, leave_requested=core.leave_requested,
            sequence=core.sequence, groups=core.groups, catchup=core.catchup,
            resume_sequenced=tuple(sorted(core.resume_sequenced)), resume_upto=core.resume_upto,
            resume_from=core.resume_from)
        record = MemberCommit(core.node, core.app_seq, membership, tuple(self.put.values()),
                              tuple(self.drop), batch)
        core.stats.commits += 1
        self.saved = state
        self.put.clear()
        self.drop.clear()
        if not out:
            return Save(record)
        self.trace_out = []
        if batch is not None:
            return Save(record, trace_text=batch)
        return Save(record, trace_events=out)


def restore(core: DurableSeat, saved: SavedMember, reads: Reads,
            durable: Durable | None) -> None:
    """Power-on: take up ``saved`` in a core that has done nothing yet (its history
    reads ``reads``, its durable side ``durable``: None without a store).

    A saved membership (member, leaving, closing) resumes with its join-id,
    ``mystable`` and ``mynew``: the first beacon's ``high`` starts a NACK for what
    was missed while off, and a gateway that no longer holds the membership answers
    NotMember, which ends it as an expulsion (``stats.resumes_refused``) and joins
    afresh. Own messages not yet in the total order are sent again (the coordinator
    drops copies by ``recv``). A joining computer starts afresh at its next
    ``join`` (its JOIN may never have arrived). Its groups come back with it, and a
    catch-up after a return (:mod:`.member_history`) goes on where it was. A corrupt membership
    (``saved.problem``) is counted in ``stats.restore_discarded`` and left behind;
    its own messages go with the next join.
    """
    if core.phase != Phase.IDLE or core.mid is not None or core.app_seq or core.news:
        raise UsageError("restore: only a core that has done nothing yet")
    if saved.node != core.node:
        raise SavedStateError(f"saved state of {saved.node!r}, not of {core.node!r}")
    core.app_seq = saved.app_seq
    core.group = saved.group
    core.mynew, core.confirmed = saved.mynew, saved.confirmed
    core.news = deque(saved.pending)
    core.group_ops = {i.app_seq: (i.kind, i.group) for i in saved.pending if i.kind != msg.APP}
    if durable is not None:
        durable.owned = {i.app_seq: i for i in saved.pending}
    core.restore_problem = saved.problem
    core.old_join_id = saved.join_id
    core.sequence = saved.sequence
    if saved.problem:
        core.stats.restore_discarded += 1
    elif saved.resumable:
        assert saved.join_id is not None
        core.mid = MemberId(core.node, saved.join_id)
        core.phase = Phase(saved.phase)
        core.mystable = core.seen_high = core.last_high = saved.mystable
        core.leave_requested = saved.leave_requested
        if core.phase != Phase.MEMBER:
            core.control.append(Control.LEAVE if core.phase == Phase.LEAVING
                                else Control.LEAVE_OK)
        core.power_on = True
        core.stats.resumed += 1
        core.groups = dict(saved.groups)
        core.views = {g: {core.node} for g in core.groups}
        if saved.catchup is not None:  # switched off in the middle of a catch-up: go on
            core.resume_sequenced = set(saved.resume_sequenced)
            core.resume_upto = saved.resume_upto
            core.catchup = saved.catchup
            reads.resume_catchup(0.0)
    elif saved.phase == Phase.JOINING.value and saved.resume_from is not None:
        # Switched off while joining again after an expulsion: join again (a fresh
        # join-id), with its groups, and catch up from where it had delivered.
        core.groups = dict(saved.groups)
        core.resume_from = saved.resume_from
        core.join(0.0, tuple(core.groups))
    elif saved.phase == Phase.LEFT.value:
        core.phase = Phase.LEFT
    if durable is not None and not saved.problem and saved.phase != Phase.JOINING.value:
        durable.saved = durable.scalars(core)  # nothing to save again until it changes
