"""A synchronous facade of :mod:`m2mc.api` for scripts: the asyncio node runs in
a background thread; every call here waits for its result.

>>> with SyncNode(NodeConfig(channel="mem://demo")) as node:   # doctest: +SKIP
...     group = node.create_group("notes")
...     group.send("hello")
...     for message in group.messages(idle=1.0):
...         print(message.sender, message.text)
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from types import TracebackType
from typing import Any, TypeVar

from m2mc.api import Group, GroupMessage, KeyArg, Node, NodeConfig, ReplyTo
from m2mc.errors import UsageError
from m2mc.group.codec import GrpInfo
from m2mc.group.events import GroupEvent
from m2mc.kinds import Order
from m2mc.ordering import MessageId

__all__ = ["SyncGroup", "SyncNode"]

T = TypeVar("T")


class SyncNode:
    def __init__(self, config: NodeConfig | None = None, **overrides: object) -> None:
        self._node = Node(config, **overrides)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="m2mc-node",
                                        daemon=True)
        self._events: Any = None
        self._started = False

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if not self._started:
            coro.close()
            raise UsageError("node not running: use 'with SyncNode(...)' or call start()")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self) -> SyncNode:
        if not self._started:
            self._thread.start()
            self._started = True
            self._call(self._node.start())
        return self

    def close(self) -> None:
        if not self._started:
            return
        try:
            self._call(self._node.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            self._started = False

    def __enter__(self) -> SyncNode:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def pid(self) -> str:
        return self._node.pid

    def create_group(self, desc: str, *, order: str | Order = Order.SB, key: KeyArg = None,
                     key_file: str | os.PathLike[str] | None = None,
                     passphrase: str | None = None, suite: str | None = None) -> SyncGroup:
        """As :meth:`m2mc.api.Node.create_group` (a key makes the group authenticated)."""
        return SyncGroup(self, self._call(self._node.create_group(
            desc, order=order, key=key, key_file=key_file, passphrase=passphrase, suite=suite)))

    def join(self, gid: str, *, order: str | Order | None = None, timeout: float = 5.0,
             key: KeyArg = None, key_file: str | os.PathLike[str] | None = None,
             passphrase: str | None = None, suite: str | None = None) -> SyncGroup:
        """As :meth:`m2mc.api.Node.join`."""
        return SyncGroup(self, self._call(self._node.join(
            gid, order=order, timeout=timeout, key=key, key_file=key_file,
            passphrase=passphrase, suite=suite)))

    def group(self, gid: str) -> SyncGroup:
        return SyncGroup(self, self._node.group(gid))

    def discover(self, timeout: float = 1.0) -> list[GrpInfo]:
        return self._call(self._node.discover(timeout=timeout))

    def members(self, gid: str) -> list[str]:
        return self._node.members(gid)

    def member_names(self, gid: str) -> dict[str, str]:
        """pid -> display name (see :meth:`m2mc.api.Node.member_names`)."""
        async def read() -> dict[str, str]:
            return self._node.member_names(gid)
        return self._call(read())

    def next_event(self, timeout: float | None = None) -> GroupEvent | None:
        """The next group event, or None after ``timeout`` seconds without one."""
        async def one() -> GroupEvent | None:
            if self._events is None:
                self._events = self._node.events()
            try:
                return await asyncio.wait_for(anext(self._events), timeout)
            except (TimeoutError, StopAsyncIteration):
                return None
        return self._call(one())

    def stats(self) -> dict[str, int]:
        return self._node.stats()

    @property
    def metrics_address(self) -> str | None:
        """Where the Prometheus metrics are served (``NodeConfig.metrics``), or None."""
        return self._node.metrics_address


class SyncGroup:
    def __init__(self, node: SyncNode, group: Group) -> None:
        self._node = node
        self._group = group
        self.gid = group.gid

    def __repr__(self) -> str:
        return f"SyncGroup({self.gid!r})"

    @property
    def members(self) -> list[str]:
        return self._group.members

    @property
    def authenticated(self) -> bool:
        """True for a keyed group (see :attr:`m2mc.api.Group.authenticated`)."""
        return self._group.authenticated

    def member_names(self) -> dict[str, str]:
        """pid -> display name (see :meth:`m2mc.api.Group.member_names`)."""
        return self._node.member_names(self.gid)

    def last_heard(self) -> dict[str, float]:
        """pid -> wall-clock time last heard from (see :meth:`m2mc.api.Group.last_heard`)."""
        async def read() -> dict[str, float]:
            return self._group.last_heard()
        return self._node._call(read())

    def send(self, data: bytes | str, *, reply_to: ReplyTo = None) -> MessageId:
        return self._node._call(self._group.send(data, reply_to=reply_to))

    def receive(self, timeout: float | None = None) -> GroupMessage:
        """The next message; TimeoutError after ``timeout`` seconds."""
        return self._node._call(self._group.receive(timeout))

    def messages(self, idle: float = 1.0) -> Iterator[GroupMessage]:
        """Messages as they come, until ``idle`` seconds pass without one."""
        while True:
            try:
                yield self.receive(idle)
            except TimeoutError:
                return

    def leave(self) -> None:
        self._node._call(self._group.leave())
