"""What a group node does with the application's messages: :class:`NodeSend`, the
send side of :class:`~m2mc.group.manager.GroupNode`, an object of its own.

``send`` gives a message its identity and its place in the open batch at once, and
the rest -- the ordering core's accept, the row in the log, the delivery to the
node itself -- a little later, for all the messages sent since, as a receiver does
with a batch it reads (``Mop.accept_run``: one sender's next messages in a row).
That later is the node's next step of any other kind: every other entry point of
the node (input, timers, output, the save, events, queries of its state, other API
calls) first *settles* the sends waiting (:func:`settles`), so what any of them
sees is what it would have seen had each send been taken in whole at once. Only
an S_b group's messages wait, and only while the node is not tracing (the trace
interleaves each ``send`` with its ``recv`` and ``deliver``); the other orders'
(vector clocks, the total order's positions) are taken in whole. Decision:
docs/decisions.md ("A sender's own messages are taken in by the batch").

The node's ``send`` counts the send room down and calls :meth:`NodeSend.send_data`,
bound once: the send side holds its own references to what it needs per message
(the node's groups, configuration, counters, M2MP layer and the output side's
bound methods), so a send makes no more calls than one class would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

from m2mc.errors import DecodeError, UsageError
from m2mc.group.wire_bounds import MAX_PID
from m2mc.kinds import Order
from m2mc.ordering import ROOT, Message, MessageId

if TYPE_CHECKING:
    from m2mc.group.config import GroupConfig
    from m2mc.group.instance import GroupInstance
    from m2mc.group.node_output import NodeOutput
    from m2mc.group.node_stats import NodeStats
    from m2mc.wire.m2mp import M2MPLayer

__all__ = ["NodeSend", "settles"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
# Read once per message: a module global is faster than Order.SB, an enum's
# attribute lookup.
_SB = Order.SB


class Settling(Protocol):
    """A node whose entry points settle its sends (:func:`settles`)."""

    # Sends of at most send_room_size payload bytes sure to pass the back-pressure check
    # (m2mc.group.backlog.send_room), set by the API; each send counts it down, every
    # other step of the node sets it to 0.
    send_room: int

    @property
    def sender(self) -> NodeSend: ...


_N = TypeVar("_N", bound=Settling)


def settles(method: Callable[Concatenate[_N, _P], _R]) -> Callable[Concatenate[_N, _P], _R]:
    """Make ``method`` take in the node's waiting sends first (module docstring)."""

    @functools.wraps(method)
    def settled(self: _N, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self.send_room = 0  # (m2mc.group.backlog.send_room: counted from the last check)
        sender = self.sender
        if sender.unsent:
            sender.settle_sends()
        return method(self, *args, **kwargs)

    return settled


class NodeSend:
    """The node's send side (module docstring)."""

    def __init__(self, *, pid: str, groups: dict[str, GroupInstance], config: GroupConfig,
                 m2mp: M2MPLayer, stats: NodeStats, output: NodeOutput) -> None:
        self.pid = pid
        self._groups = groups  # the node's (shared: it adds and drops groups)
        self._config = config
        self._m2mp = m2mp
        self._stats = stats
        self._tracing = output.tracing
        self._trace = output.trace
        self._deliver = output.deliver
        self._deliver_many = output.deliver_many
        # Our messages sent and not yet taken in (module docstring), in the order sent.
        self.unsent: list[tuple[GroupInstance, Message]] = []

    def send_data(self, gid: str, payload: bytes, now: float,
                  reply_to: MessageId | str | None, later: bool = False) -> MessageId:
        """Send one data record; ``later``: an S_b group's is taken in with the next
        ones (module docstring), else at once."""
        inst = self._groups.get(gid)
        if inst is None or inst.lingering_until is not None:
            raise UsageError(f"not a member of group {gid!r}")
        config = self._config
        if len(payload) > config.max_payload:
            raise UsageError(f"payload of {len(payload)} bytes exceeds {config.max_payload}")
        if type(payload) is not bytes:
            payload = bytes(payload)
        inst.ordering.check_send(gid)  # (total order: no room while no majority is reachable)
        parent = ROOT if reply_to is None or reply_to is ROOT else self._parent_of(reply_to)
        message = inst.mop.next_message(payload, parent)
        inst.window.sent(message.mid.seq, len(payload), now)
        if inst.mop.order != _SB:
            inst.ordering.sent(message.mid.seq, now)  # (total order paces its sender)
        self._stats.sent += 1
        # Bulk batches while backlogged, or while held (batch_hold): full packets.
        inst.bulk = (now < inst.hold_until
                     or self._m2mp.queued_packets + inst.pending_records >= config.bulk_backlog)
        tracing = self._tracing
        if later and not tracing and inst.mop.order == _SB:
            self.unsent.append((inst, message))
            inst.queue_data(message, now)
            return message.mid
        if self.unsent:
            self.settle_sends()
        if tracing:
            self._trace("send", gid, message)
        _, out = inst.mop.accept(message)
        if tracing:
            self._trace("recv", gid, message, peer=self.pid)
        if out:
            inst.delivered_count += len(out)
            if tracing:
                for m in out:
                    self._deliver(gid, m)
            else:
                self._deliver_many(gid, out)
        inst.queue_data(message, now)
        return message.mid

    def _parent_of(self, reply_to: MessageId | str) -> MessageId:
        """``reply_to`` as a parent every member's decoder accepts (group/codec.py): a
        record naming any other parent would be refused by every receiver, and with it
        the whole batch it travels in, its repairs too (docs/decisions.md)."""
        try:
            parent = MessageId.parse(reply_to) if isinstance(reply_to, str) else reply_to
        except DecodeError as exc:
            raise UsageError(f"bad reply_to: {exc}") from None
        if type(parent) is not MessageId:
            raise UsageError(f"reply_to must be a MessageId or 'pid:seq', not {parent!r}")
        pid, seq = parent.pid, parent.seq
        if pid == "" and seq == 0:
            return ROOT
        if (type(pid) is not str or type(seq) is not int or not 0 < len(pid) <= MAX_PID
                or not 1 <= seq < self._config.max_seq):
            raise UsageError(f"bad reply_to {parent!r}: a pid of 1 to {MAX_PID} characters "
                             f"and a seqno from 1 to {self._config.max_seq - 1}")
        return parent

    def settle_sends(self) -> None:
        """Take in the messages sent since the last time, in the order sent: each
        group's run at once where its ordering core delivers it whole (its usual
        case), else one by one; then hand what was delivered to the node's owner."""
        unsent, self.unsent = self.unsent, []
        start, end = 0, len(unsent)
        while start < end:
            inst = unsent[start][0]
            stop = start + 1
            while stop < end and unsent[stop][0] is inst:
                stop += 1
            messages = [m for _, m in unsent[start:stop]]
            mop = inst.mop
            taken = mop.accept_run(messages)
            out = messages if taken == len(messages) else messages[:taken]
            for message in messages[taken:]:
                out.extend(mop.accept(message)[1])
            if out:
                inst.delivered_count += len(out)
                self._deliver_many(inst.gid, out)
            start = stop

