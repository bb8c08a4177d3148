"""Ordering cores: S_b, causal, FIFO and total order as pure state machines.

>>> from m2mc.ordering import Message, MessageId, SbOrder
>>> o = SbOrder()
>>> o.receive(Message(MessageId("B", 2), parent=MessageId("B", 1)))
[]
>>> [str(m.mid) for m in o.receive(Message(MessageId("B", 1)))]
['B:1', 'B:2']

See docs/ordering.md for each core's rule, its bound behaviour and its cost.
"""

from __future__ import annotations

from typing import Any

from m2mc.errors import ConfigError
from m2mc.kinds import Order
from m2mc.ordering.base import DEFAULT_MAX_HELD, OrderingCore
from m2mc.ordering.causal import CausalOrder
from m2mc.ordering.errors import MissingGseqError
from m2mc.ordering.fifo import FifoOrder
from m2mc.ordering.ids import ROOT, Message, MessageId
from m2mc.ordering.intervals import IntervalList
from m2mc.ordering.sb import SbOrder
from m2mc.ordering.total import TotalOrder

__all__ = [
    "ORDERS",
    "ROOT",
    "CausalOrder",
    "FifoOrder",
    "IntervalList",
    "Message",
    "MessageId",
    "MissingGseqError",
    "OrderingCore",
    "SbOrder",
    "TotalOrder",
    "make_core",
]

ORDERS: dict[str, type[SbOrder] | type[CausalOrder] | type[FifoOrder] | type[TotalOrder]] = {
    Order.SB: SbOrder,
    Order.CAUSAL: CausalOrder,
    Order.FIFO: FifoOrder,
    Order.TOTAL: TotalOrder,
}


def make_core(order: str | Order, *, max_held: int = DEFAULT_MAX_HELD,
              **kw: Any) -> OrderingCore:
    """A new core for ``order`` (S_b, causal, FIFO or total; the member or its string,
    as docs/ordering.md shows it).

    ``kw``: ``max_missing`` for every core; ``start`` (first gseq) for "total".
    Raises :class:`~m2mc.errors.ConfigError` for an unknown order or option.
    """
    cls = ORDERS.get(order)
    if cls is None:
        raise ConfigError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}")
    try:
        return cls(max_held=max_held, **kw)
    except TypeError as exc:
        raise ConfigError(f"bad option for order {order!r}: {exc}") from None
