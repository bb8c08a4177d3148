"""The order strategy of a group instance: what total order adds to a group, as
one object chosen once, when the instance is built (docs/architecture.md).

:class:`OrderStrategy` is what :class:`~m2mc.group.instance.GroupInstance` asks of
it: the sequencing log's messages (ORDER, ACK, PREPARE, PROMISE, START, DECIDED,
HANDOVER), what a STATUS and a NACK say of the log, the role policy's tick, the
join, the leave (a total-order leaver drains what is ordered before its removal),
the log's output, timers and statistics. Two implementations:

- :class:`NoSequencer` (S_b, causal, FIFO): a plain :class:`~m2mc.group.mop.Mop`
  and no log; the log's messages are of the wrong kind here (counted, dropped),
  everything else does nothing. No SeqLog is ever built.
- :class:`~m2mc.group.total.strategy.TotalOrderStrategy`: the
  :class:`~m2mc.group.total.mop.TotalMop` and its sequencing log.

The data path (DATA records, deliveries) goes to the instance's ``mop`` directly,
never through the strategy: a group of another order pays nothing per message
for total order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from m2mc.group.messages import Body, LogState, Nack, Status
from m2mc.group.mop import Mop
from m2mc.group.seqsets import Intervals

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from m2mc.group.port import InstancePort


class OrderStrategy(Protocol):
    """What a group instance asks of its order (module docstring)."""

    @property
    def mop(self) -> Mop:
        """The group's MOP (a plain one, or total order's)."""

    # A leaver still delivering what is ordered before its departure (total order).
    draining: bool
    # A status goes out at least this often (seconds since the last one), whether or
    # not one overheard said everything ours would (inf: only the keepalive's rule).
    heartbeat: float
    # Our sends wait (group/backlog.py): too many of ours are not ordered yet.
    blocked: bool

    def sent(self, seq: int, now: float) -> None:
        """We sent our data message ``seq``."""

    def on_log(self, body: Body, now: float) -> None:
        """A sequencing-log message from a member."""

    def on_log_lingering(self, body: Body, now: float) -> None:
        """A sequencing-log message while we linger after a leave."""

    def on_nack(self, nack: Nack) -> None:
        """A NACK (the positions it asks for)."""

    def on_status(self, st: Status, now: float) -> None:
        """A member's STATUS (what it says of the log)."""

    def status_log(self) -> tuple[LogState | None, int]:
        """What our STATUS says of the log: its state and the known commit point."""

    def tick(self, now: float) -> None:
        """The role policy, about once a status interval."""

    def joined(self, now: float, creating: bool, alone: bool) -> None:
        """We joined (``creating``: the group is ours; ``alone``: nobody else known)."""

    def check_send(self, gid: str) -> None:
        """Before a send: raise BufferFullError if the message could not be ordered."""

    def send_room(self) -> int:
        """How many more of our sends this order lets pass without ``blocked`` becoming
        true, if nothing but those sends happens (group/backlog.py's ``send_room``)."""

    def hand_over_for_leave(self, now: float) -> None:
        """Leaving: give up any role others depend on."""

    def start_leave(self, now: float, lingering_until: float) -> None:
        """The node left (it lingers until ``lingering_until``)."""

    def still_draining(self, now: float) -> bool:
        """True while a leaver must go on delivering (the linger cannot end yet)."""

    def flush(self, now: float) -> None:
        """Send (and first persist) what the log has to say."""

    def on_timer(self, now: float) -> None:
        """The log's timers (as a member)."""

    def on_timer_lingering(self, now: float) -> None:
        """The log's timers while lingering (acknowledging, delivering nothing)."""

    def next_deadline(self) -> float | None:
        """The log's next timer (None: none)."""

    def records_in(self, gseqs: Intervals) -> Intervals:
        """``gseqs`` less the positions known to hold membership records (no message)."""

    def stats_tables(self) -> tuple[DataclassInstance, ...]:
        """The order's statistics dataclasses (besides the instance's own)."""


class NoSequencer:
    """S_b, causal and FIFO order: a plain MOP, no sequencing log."""

    __slots__ = ("inst", "mop")
    draining = False
    heartbeat = float("inf")
    blocked = False

    def __init__(self, inst: InstancePort) -> None:
        self.inst = inst
        self.mop = Mop(inst.pid, inst.gid, inst.order, inst.config, inst.node.store)

    def on_log(self, body: Body, now: float) -> None:
        self.inst.node.stats.wrong_kind += 1  # a total-order message in another group

    def on_log_lingering(self, body: Body, now: float) -> None:
        pass

    def on_nack(self, nack: Nack) -> None:
        pass

    def on_status(self, st: Status, now: float) -> None:
        pass

    def status_log(self) -> tuple[LogState | None, int]:
        return None, 0

    def tick(self, now: float) -> None:
        pass

    def joined(self, now: float, creating: bool, alone: bool) -> None:
        pass

    def check_send(self, gid: str) -> None:
        pass

    def send_room(self) -> int:
        return 1 << 30  # (never blocked)

    def sent(self, seq: int, now: float) -> None:
        pass

    def hand_over_for_leave(self, now: float) -> None:
        pass

    def start_leave(self, now: float, lingering_until: float) -> None:
        pass

    def still_draining(self, now: float) -> bool:
        return False

    def flush(self, now: float) -> None:
        pass

    def on_timer(self, now: float) -> None:
        pass

    def on_timer_lingering(self, now: float) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def records_in(self, gseqs: Intervals) -> Intervals:
        return gseqs

    def stats_tables(self) -> tuple[DataclassInstance, ...]:
        return ()
