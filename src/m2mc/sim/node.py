"""What a simulated node is: the context the simulator gives it and the stack it runs.

Two stack forms:

* :class:`SimNodeStack`, single-interface (ad hoc mode): a :class:`~m2mc.core.SansIOStack`
  plus start and application calls. Its datagrams are broadcast on the one
  domain its interface is attached to.
* :class:`AddressedSimStack`, multi-interface (infrastructure mode): datagrams
  are :class:`Outgoing` (interface, destination or ``None`` for broadcast on
  that interface's domain, data); arrivals say which interface and which node
  sent them; :meth:`AddressedSimStack.on_attach` tells the node when an
  interface is attached to a domain, moved to another, or loses coverage.

Stacks are registered by name (:func:`register_stack`); a scenario picks one
with ``[stack] kind = "..."``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from m2mc.errors import ConfigError
from m2mc.kinds import GROUP_ORDERS, Order, group_order
from m2mc.trace.schema import TraceSink

RECENT_DELIVERIES = 4096
"""The fewest mids a stack's ``delivered_mids`` keeps per group: the workload answers
one ``recent`` (3 to 30) deliveries back on average, exponentially distributed, so
one further back than this never comes up; keeping every one would grow a long run
by a string per delivery and node."""

@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    order: Order = Order.SB


@dataclass
class NodeContext:
    """Everything a stack factory gets. The same object is passed again on restart."""

    node_id: str
    rng: random.Random  # this node's own stream
    trace: TraceSink  # the sim rewrites t to virtual time, fills run/node left ""
    run_id: str
    durable_dir: Path  # survives crash/restart of this node; never under --out
    groups: tuple[GroupSpec, ...]  # groups this node should be in at start
    params: Mapping[str, Any]  # the scenario's [stack] table, passed through
    ifaces: Mapping[str, str | None] | None = None  # addressed stacks: iface -> domain at start
    # Groups made during the run that this node joins once it discovers them (their
    # creator makes them through the application call ``app_create``).
    discover: tuple[GroupSpec, ...] = ()


class SimNodeStack(Protocol):
    """A single-interface stack (ad hoc mode): SansIOStack plus boot and application calls."""

    def receive_datagram(self, datagram: bytes, now: float) -> None: ...

    def on_timer(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...

    def datagrams_to_send(self, now: float) -> list[bytes]: ...

    def start(self, now: float) -> None:
        """Boot, or reboot after a restart (re-reads ``durable_dir``)."""

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        """Send one application message; its mid ``"pid:seq"``, or None if not able."""

    def delivered_mids(self, group: str) -> Sequence[str]:
        """Mids delivered so far in ``group``, in delivery order; or the latest
        :data:`RECENT_DELIVERIES` of them at least (what the workload answers)."""

    def app_join(self, group: str, now: float) -> None: ...

    def app_leave(self, group: str, now: float) -> None: ...


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A datagram an addressed stack wants sent; ``dest=None`` broadcasts on the iface's domain."""

    iface: str
    dest: str | None
    data: bytes


class AddressedSimStack(Protocol):
    """A multi-interface stack (infrastructure mode)."""

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None: ...

    def on_timer(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...

    def datagrams_to_send(self, now: float) -> list[Outgoing]: ...

    def on_attach(self, iface: str, domain: str | None, now: float) -> None:
        """``iface`` is now on ``domain`` (None: out of coverage). Called after start too."""

    def start(self, now: float) -> None: ...

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None: ...

    def delivered_mids(self, group: str) -> Sequence[str]: ...

    def app_join(self, group: str, now: float) -> None: ...

    def app_leave(self, group: str, now: float) -> None: ...


NodeFactory = Callable[[NodeContext], SimNodeStack]


@dataclass(frozen=True, slots=True)
class StackEntry:
    name: str
    factory: Callable[[NodeContext], Any]
    addressed: bool
    orders: tuple[Order, ...]  # group orders the stack supports
    check_params: Callable[[Mapping[str, Any]], None] | None = None
    creates: bool = False  # makes groups during a run (app_create, NodeContext.discover)


_REGISTRY: dict[str, StackEntry] = {}
_BUILTIN_MODULES = {"flood": "m2mc.sim.flood_stack", "group": "m2mc.sim.group_stack",
                    "infra": "m2mc.sim.infra_stack"}


def register_stack(name: str, factory: Callable[[NodeContext], Any], *,
                   addressed: bool = False, orders: Sequence[str | Order] = GROUP_ORDERS,
                   check_params: Callable[[Mapping[str, Any]], None] | None = None,
                   creates: bool = False) -> None:
    """Make ``[stack] kind = name`` build nodes with ``factory``.

    ``addressed=True`` declares the :class:`AddressedSimStack` form. ``orders``
    lists the group orders the stack supports; a scenario asking for another is
    rejected at load time. ``check_params`` gets the ``[stack]`` table at load
    time and raises ConfigError for a bad key or value. ``creates=True``: the stack
    makes groups during a run (``app_create(group, order, now)``) and joins the ones
    in ``NodeContext.discover`` once it discovers them; only such a stack may run a
    scenario with ``create`` in a group.
    """
    _REGISTRY[name] = StackEntry(name, factory, addressed, tuple(map(group_order, orders)),
                                 check_params, creates)


def get_stack(name: str) -> StackEntry:
    """The registered stack ``name``.

    A name not registered yet is looked for by importing its module, which must
    call :func:`register_stack`: the built-in ones (``group``, ``infra``, ``flood``),
    then ``m2mc.<name>.sim_stack``.
    """
    if name not in _REGISTRY and name.isidentifier():
        import importlib

        module = _BUILTIN_MODULES.get(name, f"m2mc.{name}.sim_stack")
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not (exc.name and module.startswith(exc.name)):
                raise
    found = _REGISTRY.get(name)
    if found is None:
        known = ", ".join(sorted(set(_REGISTRY) | set(_BUILTIN_MODULES)))
        raise ConfigError(f"stack.kind: unknown stack {name!r} (known: {known})")
    return found
