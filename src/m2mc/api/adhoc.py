"""The ad hoc mode of the application API: :class:`AdhocNode` runs M2MC's serverless
groups (docs/group.md) over one channel, through :class:`m2mc.runtime.StackDriver`
and the sans-IO :class:`m2mc.group.GroupNode`; :class:`AdhocGroup` is its group
handle. Applications build it with ``Node(config)`` (``mode="adhoc"``, the default)
or ``Node.adhoc(...)``; docs/api.md documents it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, NoReturn

from m2mc.api.config import KeyArg, NodeConfig
from m2mc.api.inbox import Inbox
from m2mc.api.message import GroupMessage, ReplyTo, _parent
from m2mc.api.node import NOT_RUNNING, Group, Node
from m2mc.api.streams import (
    Source,
    StreamPort,
    StreamReader,
    open_body_store,
    send_stream,
    wait_for_update,
)
from m2mc.errors import UsageError
from m2mc.group.backlog import must_wait, room_made, send_room
from m2mc.group.codec import GrpInfo
from m2mc.group.events import Delivered, DeliveredBatch, StreamUpdate
from m2mc.group.manager import TRACE_JOURNAL_META, GroupNode
from m2mc.group.names import check_name
from m2mc.kinds import NodeMode, Order, group_order
from m2mc.log import node_logger
from m2mc.metrics.views import AdhocView
from m2mc.ordering import MessageId
from m2mc.ordering.replay import replay_order
from m2mc.runtime.endpoint import DEFAULT_FLOW_WINDOW, flow_window_for, window_at
from m2mc.runtime.gc_freeze import tune_collector
from m2mc.runtime.stack import StackDriver
from m2mc.runtime.tracing import WallClockSink, incarnation_events, open_trace
from m2mc.security.auth import counter_start_at
from m2mc.security.keys import GroupKey, GroupSecret
from m2mc.store import GroupStore, MemoryStore
from m2mc.trace.schema import TraceEvent, TraceSink, detail_json
from m2mc.transport.url import open_channel
from m2mc.wire.m2mp_types import packet_size_for

__all__ = ["AdhocGroup", "AdhocNode"]


class AdhocNode(Node):
    """A :class:`~m2mc.api.node.Node` in ad hoc mode: serverless groups over one channel."""

    mode: ClassVar[NodeMode] = NodeMode.ADHOC

    def __init__(self, config: NodeConfig | None = None, **overrides: object) -> None:
        super().__init__(config, **overrides)
        self._stack: GroupNode | None = None
        self._driver: StackDriver | None = None
        self._store: GroupStore | None = None
        # Per group, its messages delivered and not read yet, as the group layer gave them:
        # each becomes a GroupMessage when the application takes it. (Objects waiting
        # in a backlog are what the garbage collector traverses again and again; this
        # keeps one per message fewer of them.) Own messages are accounted apart (inbox.py).
        self._queues: dict[str, Inbox] = {}
        self._send_waiters: list[asyncio.Future[None]] = []
        # Readers of streamed messages waiting for news of a body, by (gid, pid, seq).
        self._stream_waiters: dict[tuple[str, str, int], list[asyncio.Future[None]]] = {}
        self._bodies_close: Callable[[], None] | None = None
        # The driver's clock (driver.now() without its three calls) and its poke_soon,
        # bound once the driver exists: the send path calls them for every message.
        self._clock: Callable[[], float] = _not_started
        self._poke_soon: Callable[[], None] = _not_started
        self._stream_port = StreamPort(
            stack=self._node, now=lambda: self._clock(), backlog=lambda: self._drv().backlog,
            room_for=self._room_for, poke=lambda: self._drv().poke(),
            poke_soon=lambda: self._poke_soon(), wait_news=self._stream_wait,
            closed=lambda: self._closed)

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._stack is not None:
            return
        cfg = self.config
        store: GroupStore
        if cfg.data_dir is not None:
            from m2mc.store.sqlite import SqliteStore

            # The wall clock stamps the log's writes: message ages survive a restart.
            store = SqliteStore(Path(cfg.data_dir) / "m2mc.sqlite3", clock=time.time,
                                checkpoint_thread=True)
        else:
            store = MemoryStore()
        pid = cfg.pid or store.get_meta("pid") or f"n{secrets.token_hex(4)}"
        earlier = store.get_meta("pid")
        if earlier not in (None, pid):
            raise UsageError(f"data_dir belongs to process {earlier!r}, not {pid!r}")
        clean_close = store.get_meta(_CLEAN_CLOSE_META) == "1"
        if cfg.pid is not None and cfg.data_dir is None:
            node_logger("m2mc.api", pid).warning(
                "fixed pid without data_dir: if this process restarts under the same pid, "
                "its messages are numbered from 1 again and peers drop them as duplicates")
        store.set_meta("pid", pid)
        store.set_meta(_CLEAN_CLOSE_META, "0")
        store.commit()
        self._store = store
        channel = open_channel(cfg.channel)
        # As M2MPEndpoint: flow control only where copies loop back, with a window of
        # packets in flight unless the configuration fixes one (docs/decisions.md).
        # Packets of the size the channel URL or the configuration names (508 if neither).
        packet = packet_size_for(cfg.m2mp.packet_size, channel.packet_size)
        m2mp = replace(cfg.m2mp, flow_control=cfg.m2mp.flow_control and channel.loops_back,
                       flow_window=(window_at(DEFAULT_FLOW_WINDOW, packet)
                                    if cfg.m2mp.flow_window is None else cfg.m2mp.flow_window),
                       packet_size=packet)
        loop = asyncio.get_running_loop()
        sink, self._trace_close = open_trace(cfg.trace_dir, pid, cfg.run_id, loop.time,
                                             flush_every=cfg.trace_flush_every)
        # With a durable log the trace is journaled with it (runtime/tracing.py).
        journal = sink if cfg.data_dir is not None and isinstance(sink, WallClockSink) else None
        if journal is not None:
            journal.recover(store.get_meta(TRACE_JOURNAL_META))
            if earlier is not None:
                journal.append(journal.render(incarnation_events(
                    journal, store.get_meta(TRACE_JOURNAL_META), pid, cfg.run_id, loop.time(),
                    clean_close)))
        keys = {gid: await _resolve(spec, gid) for gid, spec in cfg.keys.items()}
        # Streamed messages' bodies beside the log, or in a private temporary directory.
        bodies, self._bodies_close = open_body_store(cfg.data_dir, cfg.group.stream_store_bytes)
        self._stack = GroupNode(pid, rng=random.Random(os.urandom(16)), config=cfg.group,
                                m2mp_config=m2mp, store=store, trace=sink, run_id=cfg.run_id,
                                keys=keys, counter_start=counter_start_at(time.time()),
                                trace_journal=journal, name=cfg.name, bodies=bodies)
        self._stack.batch_deliveries = True  # _dispatch takes messages by the batch
        packet_trace = None
        if cfg.trace_packets and sink.enabled:
            packet_trace = _packet_tracer(sink, pid, cfg.run_id, cfg.channel)
        # The driver carries out the node's saves: the log's commit, then the trace.
        self._driver = StackDriver(self._stack, channel, on_input=self._dispatch,
                                   paused=self._app_full, packet_trace=packet_trace,
                                   commit=store.commit, trace=sink, journal=journal,
                                   on_failure=lambda exc: node_logger("m2mc.api", pid).error(
                                       "node stopped: its log could not be written: %s", exc))
        await self._driver.start()
        if channel.receive_buffer:  # the send window fits what a receiver's socket holds
            self._stack.fit_window(channel.receive_buffer)
        if cfg.m2mp.flow_window is None:  # and so does M2MP's, unless configured
            self._stack.m2mp.flow_window = flow_window_for(channel.receive_buffer,
                                                               m2mp.packet_size)
        self._clock = self._driver.loop.time
        self._poke_soon = self._driver.driver.poke_soon
        self._stack.start(self._driver.now())
        self._driver.poke()
        if cfg.metrics is not None:
            from m2mc.metrics.adhoc import adhoc_snapshot
            from m2mc.metrics.labels import GroupLabels

            labels = GroupLabels()
            await self._serve_metrics(lambda: adhoc_snapshot(self.metrics_view(), labels), pid)
        tune_collector(cfg.freeze_gc, cfg.gc_threshold, node_logger("m2mc.api", pid))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._metrics is not None:
            await self._metrics.aclose()
        if self._driver is not None:
            if self._stack is not None:
                self._stack.release_batches()  # what batch_hold holds goes now
            self._driver.poke()
            await self._driver.close()
        if self._store is not None:  # (after a failed commit: no clean close, and its
            # last commit goes if the disk takes it now; an error is the one reported)
            failed = self._driver is not None and self._driver.driver.failure is not None
            if not failed:
                self._store.set_meta(_CLEAN_CLOSE_META, "1")
            with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
                self._store.close()
        if self._bodies_close is not None:
            self._bodies_close()
        for waiters in self._stream_waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)
        self._stream_waiters.clear()
        close = self._trace_close
        if callable(close):
            close()
        self._wake()
        for future in self._send_waiters:
            if not future.done():
                future.set_result(None)

    # ---------------------------------------------------------------- groups
    @property
    def pid(self) -> str:
        return self._node().pid

    async def create_group(self, desc: str, *, order: str | Order = Order.SB, key: KeyArg = None,
                           key_file: str | os.PathLike[str] | None = None,
                           passphrase: str | None = None,
                           suite: str | None = None) -> AdhocGroup:
        """CreateGroup: a new group (id ``<pid>/<n>``), announced to the network.
        With ``key``, ``key_file`` or ``passphrase`` (and ``suite``) it is keyed:
        only holders of the key can join it, read it (AEAD suites) or speak in it."""
        stack, driver = self._node(), self._drv()
        spec = GroupKey.of(key, key_file=key_file, passphrase=passphrase, suite=suite)
        gid = None
        secret = None
        if spec is not None:
            gid = stack.new_group_id()
            secret = await _resolve(spec, gid)
        gid = stack.create_group(desc, driver.now(), order=group_order(order), gid=gid,
                                 key=secret,
                                 counter_start=counter_start_at(time.time()))
        self._inbox(gid)
        driver.poke()
        return AdhocGroup(self, gid)

    async def join(self, gid: str, *, order: str | Order | None = None, timeout: float = 5.0,
                   key: KeyArg = None, key_file: str | os.PathLike[str] | None = None,
                   passphrase: str | None = None, suite: str | None = None) -> AdhocGroup:
        """joinThisGroup. A group not discovered yet is looked for (advertising
        once) for up to ``timeout`` seconds, unless ``order`` is given: then it is
        joined by name at once (every process naming it joins the same group).
        A keyed group takes its key (``key``, ``key_file`` or ``passphrase``, and
        ``suite``; or ``NodeConfig.keys``): without it, KeyRequiredError."""
        stack, driver = self._node(), self._drv()
        spec = GroupKey.of(key, key_file=key_file, passphrase=passphrase, suite=suite)
        secret = await _resolve(spec, gid) if spec is not None else None
        if order is None and stack.group_info(gid) is None:
            await self.discover(gid, timeout=timeout)
        stack.join_group(gid, driver.now(), order=None if order is None else group_order(order),
                         key=secret,
                         counter_start=counter_start_at(time.time()))
        self._inbox(gid)
        driver.poke()
        return AdhocGroup(self, gid)

    async def discover(self, gid: str | None = None, *, timeout: float = 2.0) -> list[GrpInfo]:
        """Advertise and wait up to ``timeout`` for answers (for ``gid`` if given)."""
        stack, driver = self._node(), self._drv()
        stack.advertise(driver.now())
        driver.poke()
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while gid is not None and stack.group_info(gid) is None:
            left = end - loop.time()
            if left <= 0:
                raise UsageError(f"group {gid!r} not found within {timeout} s")
            await self._wait(left)
        if gid is None:
            await asyncio.sleep(timeout)
        return stack.discovered()

    def network_changed(self) -> None:
        """Tell the node the network changed under it (an application that knows better
        than the interface watcher: a phone's connectivity callback, a VPN coming up):
        it is taken to be back in range, advertises, re-announces the groups it created
        and catches up every group it is in (a ``Reconnected`` event, docs/group.md
        section 4). The driver calls this by itself when the channel's interface comes
        back up (Linux, ``udp-multicast://``)."""
        self._node()
        self._drv().network_changed()

    def group(self, gid: str) -> AdhocGroup:
        """The handle of a group this node is a member of."""
        if not self._node().is_member(gid):
            raise UsageError(f"not a member of group {gid!r}")
        return AdhocGroup(self, gid)

    def reject(self, gid: str) -> None:
        """rejectGrp: do not offer this group again until the next advertisement."""
        self._node().reject_group(gid)

    def members(self, gid: str) -> list[str]:
        return self._node().members(gid)

    def member_names(self, gid: str) -> dict[str, str]:
        """pid -> display name of the members of ``gid`` that have one (this node's own
        included), known from their JOIN or status, or (a group not joined, or a member
        not heard yet) from discovery replies."""
        return self._node().member_names(gid)

    def set_name(self, name: str) -> None:
        """Change this node's display name (``""``: none); the members of its groups
        hear it in a status within ``status_delay``. Before :meth:`start` it only
        sets ``NodeConfig.name``."""
        check_name(name)
        self.config.name = name
        if self._stack is not None and not self._closed:
            self._stack.set_name(name, self._drv().now())
            self._drv().poke()

    def discovered(self) -> list[GrpInfo]:
        return self._node().discovered()

    def last_heard(self, gid: str) -> dict[str, float]:
        """When this node last heard from each member of ``gid``: pid -> wall-clock time
        (``time.time()``) of the last packet of the group from it (data, status heartbeat,
        join, repair, sync). Members send a status about every ``status_interval`` even when
        they write nothing, so a live member is heard from within seconds; one that went
        away stops being heard from. Only members heard from since this node started or
        joined are listed (ad hoc mode)."""
        stack = self._node()
        inst = stack.groups.get(gid)
        if inst is None or inst.lingering:
            raise UsageError(f"not a member of group {gid!r}")
        now = self._drv().now()
        wall = time.time()
        return {pid: wall - (now - t) for pid, t in inst.last_heard.items()}

    def joined(self) -> list[GrpInfo]:
        """The groups this node is a member of (after a restart: those in the durable log)."""
        stack = self._node()
        infos = (stack.group_info(gid) for gid in sorted(stack.groups) if stack.is_member(gid))
        return [info for info in infos if info is not None]

    def locked(self) -> list[GrpInfo]:
        """Keyed groups this node was a member of (durable log) but holds no key for: they
        stay closed until ``join(gid, key=...)`` (or a key in ``NodeConfig.keys`` at start)."""
        stack = self._node()
        infos = (stack.group_info(gid) for gid in sorted(stack.locked))
        return [info for info in infos if info is not None]

    def history(self, gid: str) -> list[GroupMessage]:
        """The messages of ``gid`` this node has delivered, from the durable log (those its
        retention has not evicted, docs/group.md section 8), in an order the group's
        guarantee allows: by ``gseq`` under total order, causes first otherwise
        (:func:`m2mc.ordering.replay.replay_order`)."""
        stack = self._node()
        stack.settle_sends()  # (the messages just sent too)
        assert self._store is not None
        inst = stack.groups.get(gid)  # its gseq as delivered: a number, not a log position
        number = inst.mop.number if inst is not None else _same
        delivered = [s.message for s in self._store.load_messages(gid) if s.delivered]
        return [GroupMessage(gid, m.mid, m.parent, m.payload, number(m.gseq))
                for m in replay_order(delivered)]

    async def sync(self) -> None:
        # The output step commits the store before anything leaves (commit, then
        # send), so one step now writes every message handed to send so far.
        self._node()  # (not running: UsageError)
        self._drv().poke()
        self._drv().raise_failure()  # (the log could not be written: LogWriteError)

    def stats(self) -> dict[str, int]:
        return self._node().node_stats()

    def metrics_view(self) -> AdhocView:
        """This node as its metrics see it (:mod:`m2mc.metrics.adhoc`)."""
        cfg, driver = self.config, self._driver
        running = self._stack if not self._closed else None
        return AdhocView(
            pid=self._stack.pid if self._stack is not None else (cfg.pid or ""),
            stack=running, events_dropped=self.events_dropped, app_events=len(self._events),
            max_queued_events=cfg.max_queued_events,
            unread={gid: len(inbox) for gid, inbox in self._queues.items()},
            max_queued_messages=cfg.max_queued_messages,
            channel=driver.channel.stats if driver is not None else None,
            dropped_paused=driver.dropped_paused if driver is not None else 0)

    # -------------------------------------------------------------- internals
    def _node(self) -> GroupNode:
        if self._stack is None or self._closed:
            raise UsageError(NOT_RUNNING)
        return self._stack

    def _drv(self) -> StackDriver:
        assert self._driver is not None
        return self._driver

    def _dispatch(self) -> None:
        stack = self._stack
        if stack is None:
            return
        if self._send_waiters and room_made(stack):
            waiters, self._send_waiters = self._send_waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)
        events = stack.events()
        if not events:
            return
        queues = self._queues
        for event in events:
            if type(event) is DeliveredBatch:
                inbox = queues.get(event.gid)
                if inbox is None:
                    inbox = self._inbox(event.gid)
                if inbox.add(event.messages):
                    self._own_overflow(inbox, event.gid)
            elif type(event) is StreamUpdate:
                waiters = self._stream_waiters.pop((event.gid, event.mid.pid, event.mid.seq),
                                                   [])
                for future in waiters:
                    if not future.done():
                        future.set_result(None)
                continue
            elif isinstance(event, Delivered):
                inbox = queues.get(event.gid)
                if inbox is None:
                    inbox = self._inbox(event.gid)
                if inbox.add([event.message]):
                    self._own_overflow(inbox, event.gid)
            else:
                self._push_event(event)
        self._wake()

    async def _room_for(self, size: int) -> None:
        """Wait until the send backlog takes a message of ``size`` bytes
        (:mod:`m2mc.group.backlog`) and the channel has taken what the driver holds for
        it beyond ``send_backlog`` datagrams (a unicast socket that refused some)."""
        stack, driver = self._node(), self._drv()
        while True:
            if driver.backlog >= stack.config.send_backlog:
                await driver.wait_sent()
            else:
                driver.poke()
                if not must_wait(stack, size):
                    return
                future = asyncio.get_running_loop().create_future()
                self._send_waiters.append(future)
                await future
            if self._closed:
                raise UsageError("node closed")

    async def _stream_wait(self, key: tuple[str, str, int]) -> None:
        """Wait for news of the body of ``key`` (a StreamUpdate)."""
        if self._closed:
            raise UsageError("node closed")
        await wait_for_update(self._stream_waiters, key)
        if self._closed:
            raise UsageError("node closed")

    def _inbox(self, gid: str) -> Inbox:
        inbox = self._queues.get(gid)
        if inbox is None:
            cfg, stack = self.config, self._stack
            assert stack is not None
            inbox = self._queues[gid] = Inbox(stack.pid, deliver_own=cfg.deliver_own,
                                              own_limit=cfg.max_queued_own_bytes)
        return inbox

    def _own_overflow(self, inbox: Inbox, gid: str) -> None:
        first = self.own_dropped == 0
        self.own_dropped = sum(q.own_dropped for q in self._queues.values())
        if first:
            node_logger("m2mc.api", inbox.pid).warning(
                "group %s: own messages not read; the oldest are dropped past "
                "max_queued_own_bytes (a sender that never reads: deliver_own=False)", gid)

    def _app_full(self) -> bool:
        """Other members' unread messages reached the bound: stop reading the network.
        (The node's own messages never count: a sender that does not read goes on.)"""
        limit = self.config.max_queued_messages
        return any(q.others() >= limit for q in self._queues.values())



class AdhocGroup(Group):
    """A group an ad hoc node is in: send to it, read its messages (``async for``)."""

    node: AdhocNode

    @property
    def info(self) -> GrpInfo | None:
        return self.node._node().group_info(self.gid)

    @property
    def order(self) -> Order:
        info = self.info
        return info.order if info is not None else Order.SB

    @property
    def authenticated(self) -> bool:
        """True for a keyed group: every message is authenticated with the group's key
        (and encrypted under an AEAD suite); False for an open group."""
        return self.node._node().is_keyed(self.gid)

    @property
    def members(self) -> list[str]:
        return self.node.members(self.gid)

    async def send(self, data: bytes | str, *, reply_to: ReplyTo = None) -> MessageId:
        """Send ``data`` to the group, in reply to ``reply_to`` (its S_b parent).
        Waits while too much is queued for the network (back-pressure). Returns before
        the message is in the durable log: ``await node.sync()`` waits for that."""
        node = self.node
        stack = node._node()
        if type(data) is not bytes:
            data = data.encode() if isinstance(data, str) else bytes(data)
        parent = reply_to if type(reply_to) is MessageId else _parent(reply_to)
        size = len(data)
        if stack.send_room > 0 and size <= stack.send_room_size:
            pass  # sure to fit: counted down by stack.send (m2mc.group.backlog.send_room)
        elif must_wait(stack, size) or node._drv().backlog:
            await node._room_for(size)
        else:
            stack.send_room, stack.send_room_size = send_room(stack, size), size
        # The driver's clock and poke_soon, bound at start (AdhocNode.__init__ says why).
        mid = stack.send(self.gid, data, node._clock(), parent)
        node._poke_soon()
        return mid

    async def send_stream(self, source: Source, *, reply_to: ReplyTo = None,
                          size: int | None = None) -> MessageId:
        """Send a message of any size, read from ``source`` (bytes, a binary file, an
        iterable or async iterable of bytes) in pieces and never held whole; ordered
        like any message (``reply_to``: its S_b parent). Returns once all of it is
        queued (back-pressure as ``send``). ``size``: its length, if known, for readers.
        An exception from the source gives the message up (its readers get
        ``StreamError('aborted')``) and is raised again. docs/api.md."""
        return await send_stream(self.node._stream_port, self.gid, source, reply_to, size)

    def stream(self, message: GroupMessage) -> StreamReader:
        """The body of a streamed message (``message.is_stream``), read as it arrives
        (``async for piece in group.stream(message)``); fetched from the members that
        hold it if this node does not."""
        return StreamReader(self.node._stream_port, self.gid, message)

    async def receive(self, timeout: float | None = None) -> GroupMessage:
        """The next message, in the group's order; TimeoutError after ``timeout``."""
        node = self.node
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while True:
            inbox = node._queues.get(self.gid)
            if inbox:
                message = inbox.pop(self.gid)
                if inbox.others() <= node.config.max_queued_messages // 2:
                    node._drv().resume()
                return message
            if node._closed:
                raise UsageError("node closed")
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                raise TimeoutError(f"no message in group {self.gid!r} within {timeout} s")
            await node._wait(left)

    async def receive_many(self, limit: int = 4096,
                           timeout: float | None = None) -> list[GroupMessage]:
        """At least one and at most ``limit`` messages: all that are waiting."""
        first = await self.receive(timeout)
        inbox = self.node._queues.get(self.gid)
        out = [first]
        if inbox:
            inbox.take(self.gid, min(len(inbox), limit - 1), out)
        if inbox is not None and inbox.others() <= self.node.config.max_queued_messages // 2:
            self.node._drv().resume()
        return out

    def pending(self) -> int:
        """Messages delivered and not read yet."""
        inbox = self.node._queues.get(self.gid)
        return len(inbox) if inbox is not None else 0

    async def leave(self) -> None:
        """leaveThisGroup."""
        node = self.node
        node._node().leave_group(self.gid, node._drv().now())
        node._drv().poke()


_CLEAN_CLOSE_META = "clean-close"  # "1" once Node.close has committed everything


def _packet_tracer(sink: TraceSink, pid: str, run: str,
                   channel: str) -> Callable[[str, float, bytes], None]:
    """``packet_in``/``packet_out`` rows of a real node (docs/interfaces.md §4): every
    datagram the channel took or gave, its size, and the channel's kind."""
    detail = detail_json(channel=channel.partition("://")[0])
    emit = sink.emit

    def trace(event: str, now: float, datagram: bytes) -> None:
        emit(TraceEvent(run, pid, now, event, bytes=len(datagram), detail=detail))

    return trace


async def _resolve(spec: GroupKey, gid: str) -> GroupSecret:
    """Read the key file or run scrypt off the event loop (a passphrase costs ~0.1 s)."""
    return await asyncio.to_thread(spec.resolve, gid)


def _not_started() -> NoReturn:
    raise UsageError(NOT_RUNNING)



def _same(gseq: int | None) -> int | None:
    return gseq
