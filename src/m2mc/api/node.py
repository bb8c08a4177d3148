"""The application API's two faces, :class:`Node` and :class:`Group`: what every node
offers whichever way it runs, and the factory that picks the way.

A node runs in one of two modes (:class:`~m2mc.kinds.NodeMode`): ad hoc, serverless
(:class:`m2mc.api.adhoc.AdhocNode`, docs/group.md) or as an infrastructure member
(:class:`m2mc.api.infra.InfraNode`, docs/infra.md). ``Node(config)`` builds
the one ``config.mode`` names (the constructor is the factory, as docs/api.md has
always shown it); :meth:`Node.adhoc` and :meth:`Node.infra` build one mode
explicitly. The modes are a registry, not imports: :mod:`m2mc.api` registers a
factory for each mode (:func:`register_mode`), so this module knows no mode's
class (they import it). Every call of :class:`Node` and
:class:`Group` is implemented by both modes: where a mode cannot do what a call
asks, the call raises :class:`~m2mc.errors.UsageError` saying why (never an
``AttributeError`` or a call that belongs to the other mode).

:class:`Node` is an abstract base without :mod:`abc`: a type checker refuses
``Node(...)`` on a class with abstract methods, and that call is the documented way
to make a node. A subclass must override every call of the interface
(:data:`NODE_CALLS`, checked when the subclass is defined).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self

from m2mc.api.config import KeyArg, NodeConfig
from m2mc.api.message import GroupMessage, ReplyTo
from m2mc.errors import UsageError
from m2mc.group.codec import GrpInfo
from m2mc.group.events import GroupEvent
from m2mc.group.names import check_name
from m2mc.kinds import NodeMode, Order
from m2mc.metrics.address import parse_metrics_address
from m2mc.ordering import MessageId

if TYPE_CHECKING:
    from m2mc.api.streams import Source, StreamReader
    from m2mc.metrics.server import MetricsServer
    from m2mc.metrics.sink import Samples

__all__ = ["GROUP_CALLS", "NODE_CALLS", "Group", "Node", "node_class", "register_mode"]

NOT_RUNNING = "node not running: use 'async with Node(...)' or await start()"

NODE_CALLS = ("start", "close", "pid", "create_group", "join", "discover", "group", "reject",
              "members", "member_names", "set_name", "discovered", "last_heard", "joined",
              "locked", "history", "sync", "stats", "network_changed")
"""The calls every mode's node implements (docs/api.md, "Node")."""

GROUP_CALLS = ("info", "order", "authenticated", "members", "send", "receive",
               "receive_many", "pending", "leave")
"""The calls every mode's group handle implements (docs/api.md, "Group")."""


_PRUNE_WAITERS = 64  # Node._wait drops finished waiters past this many


def _time_up(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _parse_mode(mode: object) -> NodeMode:
    if mode not in tuple(NodeMode):
        raise UsageError(f"mode must be 'adhoc' or 'infra', got {mode!r}")
    return NodeMode(str(mode))


_MODES: dict[NodeMode, Callable[[], type[Node]]] = {}
"""Each mode's factory: what gives the class of a node in that mode (:func:`register_mode`)."""


def register_mode(mode: NodeMode, factory: Callable[[], type[Node]]) -> None:
    """``factory()`` gives the class ``Node(config)`` builds for ``mode``, once per mode
    (:mod:`m2mc.api` registers both modes when it is imported)."""
    if mode in _MODES:
        raise TypeError(f"mode {str(mode)!r} has its factory already")
    _MODES[mode] = factory


def node_class(mode: str) -> type[Node]:
    """The class of a node running in ``mode`` (``"adhoc"`` or ``"infra"``);
    UsageError for another mode."""
    parsed = _parse_mode(mode)
    factory = _MODES.get(parsed)
    if factory is None:  # only if m2mc.api, which registers both modes, never ran
        raise UsageError(f"no node class registered for mode {str(parsed)!r}")
    return factory()


def _must_override(cls: type, base: type, calls: tuple[str, ...]) -> None:
    """TypeError unless ``cls`` (or a class between it and ``base``) defines every call."""
    missing = [name for name in calls
               if next(c for c in cls.__mro__ if name in c.__dict__) is base]
    if missing:
        raise TypeError(f"{cls.__name__} must implement {', '.join(missing)} "
                        f"(every mode implements every call of {base.__name__})")


def _unimplemented(self: object, call: str) -> UsageError:
    # Unreachable for the two modes (their classes are checked when defined).
    return UsageError(f"{type(self).__name__} does not implement {call}")


class Node:
    """One M2MC process: its groups, over one channel or through the hosts of an
    infrastructure deployment. Use ``async with Node(...)``.

    ``Node(config, **overrides)`` builds the node ``config.mode`` names (ad hoc by
    default); ``Node.adhoc(...)``, ``Node.infra(...)`` build one mode explicitly."""

    def __new__(cls, config: NodeConfig | None = None, **overrides: object) -> Node:
        mode = overrides.get("mode", config.mode if config is not None else NodeMode.ADHOC)
        built = node_class(str(mode)) if cls is Node else cls
        return super().__new__(built)

    @staticmethod
    def adhoc(config: NodeConfig | None = None, **overrides: object) -> Node:
        """A node in ad hoc mode (serverless groups, docs/group.md): an
        :class:`~m2mc.api.AdhocNode` (typed as one when built as ``AdhocNode(config)``)."""
        return node_class(NodeMode.ADHOC)(config, **{**overrides, "mode": NodeMode.ADHOC})

    @staticmethod
    def infra(config: NodeConfig | None = None, **overrides: object) -> Node:
        """A member of an infrastructure deployment (docs/infra.md); ``hosts`` names
        the cells: an :class:`~m2mc.api.infra.InfraNode`."""
        return node_class(NodeMode.INFRA)(config, **{**overrides, "mode": NodeMode.INFRA})

    mode: ClassVar[NodeMode]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _must_override(cls, Node, NODE_CALLS)

    def __init__(self, config: NodeConfig | None = None, **overrides: object) -> None:
        config = config or NodeConfig()
        if overrides:
            config = replace(config, **overrides)  # type: ignore[arg-type]
        if _parse_mode(config.mode) is not self.mode:
            raise UsageError(f"{type(self).__name__} runs in mode {str(self.mode)!r}, "
                             f"not {config.mode!r}: build it with Node(config)")
        if config.max_queued_messages < 1 or config.max_queued_events < 1:
            raise UsageError("max_queued_messages and max_queued_events must be >= 1")
        if config.metrics is not None:
            parse_metrics_address(config.metrics, "NodeConfig.metrics")
        check_name(config.name)
        if config.max_queued_own_bytes < 1:
            raise UsageError("max_queued_own_bytes must be >= 1")
        if config.gc_threshold < 0:
            raise UsageError("gc_threshold must be >= 0 (0: leave the collector's own)")
        self.config = config
        self._metrics: MetricsServer | None = None
        self._trace_close: object = None
        self._events: deque[GroupEvent] = deque()
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False
        self.events_dropped = 0
        self.own_dropped = 0  # own messages dropped unread at max_queued_own_bytes

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        raise _unimplemented(self, "start")

    async def close(self) -> None:
        raise _unimplemented(self, "close")

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    @property
    def metrics_address(self) -> str | None:
        """Where the Prometheus metrics are served (``ADDR:PORT``, the port the OS chose
        for port 0), or None without ``NodeConfig.metrics``."""
        return self._metrics.address if self._metrics is not None else None

    # ---------------------------------------------------------------- groups
    @property
    def pid(self) -> str:
        raise _unimplemented(self, "pid")

    async def create_group(self, desc: str, *, order: str | Order = Order.SB, key: KeyArg = None,
                           key_file: str | os.PathLike[str] | None = None,
                           passphrase: str | None = None, suite: str | None = None) -> Group:
        """CreateGroup: a new group, announced to the network (docs/api.md)."""
        raise _unimplemented(self, "create_group")

    async def join(self, gid: str, *, order: str | Order | None = None, timeout: float = 5.0,
                   key: KeyArg = None, key_file: str | os.PathLike[str] | None = None,
                   passphrase: str | None = None, suite: str | None = None) -> Group:
        """joinThisGroup (docs/api.md)."""
        raise _unimplemented(self, "join")

    async def discover(self, gid: str | None = None, *, timeout: float = 2.0) -> list[GrpInfo]:
        """Advertise and wait up to ``timeout`` for answers (for ``gid`` if given)."""
        raise _unimplemented(self, "discover")

    def group(self, gid: str) -> Group:
        """The handle of a group this node is a member of."""
        raise _unimplemented(self, "group")

    def reject(self, gid: str) -> None:
        """rejectGrp: do not offer this group again until the next advertisement."""
        raise _unimplemented(self, "reject")

    def members(self, gid: str) -> list[str]:
        raise _unimplemented(self, "members")

    def member_names(self, gid: str) -> dict[str, str]:
        """pid -> display name of the members of ``gid`` that have one."""
        raise _unimplemented(self, "member_names")

    def set_name(self, name: str) -> None:
        """Change this node's display name (``""``: none)."""
        raise _unimplemented(self, "set_name")

    def discovered(self) -> list[GrpInfo]:
        raise _unimplemented(self, "discovered")

    def last_heard(self, gid: str) -> dict[str, float]:
        """pid -> wall-clock time this node last heard from each member of ``gid``."""
        raise _unimplemented(self, "last_heard")

    def joined(self) -> list[GrpInfo]:
        """The groups this node is a member of."""
        raise _unimplemented(self, "joined")

    def locked(self) -> list[GrpInfo]:
        """Keyed groups this node holds no key for (closed until ``join(gid, key=...)``)."""
        raise _unimplemented(self, "locked")

    def history(self, gid: str) -> list[GroupMessage]:
        """The messages of ``gid`` this node has delivered, oldest first."""
        raise _unimplemented(self, "history")

    async def sync(self) -> None:
        """Return once what this node has sent, delivered and acknowledged so far is in
        its durable log (``data_dir``): a process killed after it keeps all of it. At
        once without a ``data_dir``."""
        raise _unimplemented(self, "sync")

    def stats(self) -> dict[str, int]:
        raise _unimplemented(self, "stats")

    def network_changed(self) -> None:
        """Tell the node its network changed under it (docs/api.md)."""
        raise _unimplemented(self, "network_changed")

    # ---------------------------------------------------------------- events
    async def events(self) -> AsyncIterator[GroupEvent]:
        """Group news (discovered, created, members joining/leaving, catch-up), as it comes."""
        while True:
            while not self._events:
                if self._closed:
                    return
                await self._wait(None)
            yield self._events.popleft()

    # -------------------------------------------------------------- internals
    def _push_event(self, event: GroupEvent) -> None:
        """Queue ``event`` for :meth:`events`; past ``max_queued_events`` the oldest goes."""
        if len(self._events) >= self.config.max_queued_events:
            self._events.popleft()
            self.events_dropped += 1
        self._events.append(event)

    async def _serve_metrics(self, snapshot: Callable[[], Samples], node_id: str) -> None:
        """Serve ``NodeConfig.metrics``; a node that cannot is closed again (ConfigError)."""
        from m2mc.metrics import start_metrics

        assert self.config.metrics is not None
        try:
            self._metrics = start_metrics(self.config.metrics, snapshot, node_id)
        except BaseException:
            await self.close()
            raise

    async def _wait(self, timeout: float | None) -> None:
        """Until the next :meth:`_wake`, or ``timeout`` seconds (then it just returns:
        the caller checks its own deadline)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        waiters = self._waiters
        if len(waiters) >= _PRUNE_WAITERS:  # readers that timed out, with no wake since
            waiters[:] = [f for f in waiters if not f.done()]
        waiters.append(future)
        if timeout is None:
            await future
            return
        # The future is awaited itself, not through asyncio.wait_for, whose own waiter
        # in between cost a delivery one more turn of the event loop before the reader
        # ran (Python 3.11; docs/group.md §11).
        timer = loop.call_later(timeout, _time_up, future)
        try:
            await future
        finally:
            timer.cancel()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


class Group:
    """A group this node is in: send to it, read its messages (``async for``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _must_override(cls, Group, GROUP_CALLS)

    def __init__(self, node: Node, gid: str) -> None:
        self.node = node
        self.gid = gid

    def __repr__(self) -> str:
        return f"Group({self.gid!r})"

    @property
    def info(self) -> GrpInfo | None:
        raise _unimplemented(self, "info")

    @property
    def order(self) -> Order:
        raise _unimplemented(self, "order")

    @property
    def authenticated(self) -> bool:
        """True for a keyed group (every message authenticated with its key)."""
        raise _unimplemented(self, "authenticated")

    @property
    def members(self) -> list[str]:
        raise _unimplemented(self, "members")

    def member_names(self) -> dict[str, str]:
        """pid -> display name of the members that have one (:meth:`Node.member_names`)."""
        return self.node.member_names(self.gid)

    def last_heard(self) -> dict[str, float]:
        """pid -> wall-clock time this node last heard from that member (see
        :meth:`Node.last_heard`): presence without waiting for the member to write."""
        return self.node.last_heard(self.gid)

    async def send(self, data: bytes | str, *, reply_to: ReplyTo = None) -> MessageId:
        """Send ``data`` to the group, in reply to ``reply_to`` (its S_b parent)."""
        raise _unimplemented(self, "send")

    async def receive(self, timeout: float | None = None) -> GroupMessage:
        """The next message, in the group's order; TimeoutError after ``timeout``."""
        raise _unimplemented(self, "receive")

    async def receive_many(self, limit: int = 4096,
                           timeout: float | None = None) -> list[GroupMessage]:
        """At least one and at most ``limit`` messages: all that are waiting."""
        raise _unimplemented(self, "receive_many")

    def pending(self) -> int:
        """Messages delivered and not read yet."""
        raise _unimplemented(self, "pending")

    async def leave(self) -> None:
        """leaveThisGroup."""
        raise _unimplemented(self, "leave")

    async def send_stream(self, source: Source, *, reply_to: ReplyTo = None,
                          size: int | None = None) -> MessageId:
        """Send a message of any size in pieces (ad hoc mode: docs/api.md, "Messages of
        any size"). An infrastructure deployment's hosts order and relay messages whole,
        so there it raises :class:`UsageError`."""
        raise UsageError(f"{type(self).__name__}: send_stream is for ad hoc groups only "
                         "(infrastructure hosts relay messages whole)")

    def stream(self, message: GroupMessage) -> StreamReader:
        """The body of a streamed message, read as it arrives (ad hoc mode)."""
        raise UsageError(f"{type(self).__name__}: streamed messages are ad hoc only")

    def __aiter__(self) -> AsyncIterator[GroupMessage]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[GroupMessage]:
        while True:
            try:
                yield await self.receive()
            except UsageError:
                return
