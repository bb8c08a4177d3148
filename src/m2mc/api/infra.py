"""The application API (:class:`m2mc.api.Node`, :class:`m2mc.api.Group`) over an
infrastructure-mode member: ``Node(NodeConfig(mode="infra", hosts=[cell URLs]))``.

The same calls as ad hoc mode: ``create_group``/``join`` make this process a member
of a group of the deployment (any number of them: seeds/001 2.2 (i) lifted,
docs/infra.md "Groups"; a group's id is its name), ``Group.send`` multicasts,
``Group.receive`` and ``async for`` deliver in the total order, ``leave`` leaves
(seeds/001 3.3; leaving the last group leaves the deployment). Every message carries
its ``gseq``, its place in the deployment's one order. Any requested order is
honoured because the coordinator's total order also keeps S_b, FIFO and causal
order: a member sends only after delivering what it answers, and the coordinator
numbers its NEWs in sending order. ``history(gid)`` answers from the hosts' log
(:mod:`.infra_groups`).

``hosts`` lists the cells' multicast URLs; the member starts in the first one
(``infra_cell`` picks another) and moves when the master balances load or its host
goes silent.

``data_dir`` makes the member survive a switch-off (seeds/001 4.2; docs/infra.md
"Switch-off and power-on"): its membership, message numbering and own messages not
yet in the total order are saved in ``<data_dir>/infra-member.sqlite3`` before
anything leaves the process, and the next start with the same ``data_dir`` resumes
the membership and its groups (fetching by NACK what was sequenced meanwhile) or,
when the hosts expelled it meanwhile, joins again with its groups and catches up from
the hosts' log. ``close`` is then a switch-off, not a leave.
Without ``data_dir`` nothing is saved, as before.

``infra_key`` (a :class:`~m2mc.security.keys.GroupKey`, key text or bytes) seals every
frame under the deployment key; the hosts must hold the same key (``m2mc host
--key-file``). A key given at ``create_group``/``join`` instead (as in ad hoc mode)
becomes the deployment key from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections import deque
from pathlib import Path
from typing import ClassVar

from m2mc.api.config import KeyArg, NodeConfig
from m2mc.api.infra_groups import GroupState, ask_history, on_events, pack_body
from m2mc.api.message import GroupMessage, ReplyTo, _parent
from m2mc.api.node import NOT_RUNNING, Group, Node
from m2mc.errors import BufferFullError, UsageError
from m2mc.group.codec import GrpInfo, MemberEntry
from m2mc.group.events import GroupCreated
from m2mc.group.names import check_name
from m2mc.infra.config import InfraConfig
from m2mc.infra.member import MemberEvent, Phase
from m2mc.infra.member_groups import check_name as check_group
from m2mc.infra.persist import SavedMember, decode_saved
from m2mc.infra.wire import InfraWire
from m2mc.infra_runtime.keying import deployment_auth
from m2mc.infra_runtime.member_driver import MemberDriver
from m2mc.infra_runtime.member_store import (
    CLEAN_CLOSE,
    FILE_NAME,
    PID,
    TRACE_BATCH,
    SqliteMemberStore,
)
from m2mc.kinds import NodeMode, Order, group_order
from m2mc.log import node_logger
from m2mc.metrics.views import MemberView
from m2mc.ordering import MessageId
from m2mc.runtime.gc_freeze import tune_collector
from m2mc.runtime.tracing import WallClockSink, incarnation_events, open_trace
from m2mc.security.auth import GroupAuth
from m2mc.security.keys import GroupKey


class InfraNode(Node):
    """A :class:`~m2mc.api.node.Node` in infrastructure mode (built by ``Node(config)``
    when ``config.mode`` is ``"infra"``, or by ``Node.infra(...)``)."""

    mode: ClassVar[NodeMode] = NodeMode.INFRA

    def __init__(self, config: NodeConfig | None = None, **overrides: object) -> None:
        super().__init__(config, **overrides)
        cfg = self.config
        if not cfg.hosts:
            raise UsageError("mode='infra' needs hosts=[the cells' udp-multicast:// URLs]")
        self.infra_config: InfraConfig = cfg.infra or InfraConfig()
        self.driver: MemberDriver | None = None
        self.groups: dict[str, GroupState] = {}  # ours (infra_groups.py)
        self._pid = ""
        self.log = node_logger("m2mc.infra.member", cfg.pid or "-")
        self.malformed_bodies = 0  # delivered bodies unpack_body refused (dropped)
        self.lost = 0  # messages of our groups we will never get (MessagesSkipped)
        self._member_store: SqliteMemberStore | None = None
        self._refused_seen = 0  # resumes refused already logged
        self._lost_seen = 0  # sequence losses already logged

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.driver is not None:
            return
        cfg = self.config
        loop = asyncio.get_running_loop()
        saved, earlier, clean = self._open_store()
        infra = self.infra_config
        wire = InfraWire(None if cfg.infra_key is None else await self._auth(cfg.infra_key))
        sink, self._trace_close = open_trace(cfg.trace_dir, self._pid, cfg.run_id, loop.time,
                                             flush_every=cfg.trace_flush_every)
        store = self._member_store
        # With saved state the trace is journaled with it (runtime/tracing.py).
        journal = sink if store is not None and isinstance(sink, WallClockSink) else None
        if journal is not None and store is not None:
            journal.recover(store.text_meta(TRACE_BATCH))
            if earlier:
                batch = journal.render(incarnation_events(
                    journal, store.text_meta(TRACE_BATCH), self._pid, cfg.run_id, loop.time(),
                    clean))
                store.set_meta(TRACE_BATCH, batch)
                journal.append(batch)
        self.driver = MemberDriver(self._pid, list(cfg.hosts), infra, trace=sink,
                                   run_id=cfg.run_id, on_events=self._on_events, wire=wire,
                                   store=store, trace_journal=journal)
        if saved is not None:
            self._restore(self.driver, saved)
        self._make_room()
        cells = list(cfg.hosts)
        await self.driver.start(cfg.infra_cell or cells[0])
        for group, st in self.groups.items():  # (a resumed membership's)
            if st.since is not None:
                ask_history(self, group, st.since)
        if cfg.metrics is not None:
            from m2mc.metrics.infra import member_snapshot

            await self._serve_metrics(lambda: member_snapshot(self.metrics_view()), self._pid)
        tune_collector(cfg.freeze_gc, cfg.gc_threshold, node_logger("m2mc.infra.member", self._pid))

    def _open_store(self) -> tuple[SavedMember | None, bool, bool]:
        """Set the pid; the saved state if any, whether an earlier incarnation used this
        ``data_dir`` and whether it closed cleanly."""
        cfg = self.config
        log = node_logger("m2mc.infra.member", cfg.pid or "-")
        if cfg.data_dir is None:
            self._pid = cfg.pid or f"n{secrets.token_hex(4)}"
            if cfg.pid is not None:
                log.warning("fixed pid without data_dir: if this process restarts under the "
                            "same pid, its message ids are used again")
            return None, False, False
        store = SqliteMemberStore(Path(cfg.data_dir) / FILE_NAME,  # SavedStateError
                                  checkpoint_thread=True)
        try:
            earlier = store.text_meta(PID)
            self._pid = cfg.pid or earlier or f"n{secrets.token_hex(4)}"
            if earlier not in (None, self._pid):
                raise UsageError(f"data_dir belongs to process {earlier!r}, not {self._pid!r}")
            stored = store.load()
            saved = None if stored is None else decode_saved(stored)  # SavedStateError
            clean = store.text_meta(CLEAN_CLOSE) == "1"
            store.set_meta(PID, self._pid)
            store.set_meta(CLEAN_CLOSE, "0")
        except BaseException:
            store.close()
            raise
        self._member_store = store
        return saved, earlier is not None, clean

    def _restore(self, driver: MemberDriver, saved: SavedMember) -> None:
        core = driver.core
        core.restore(saved)
        self.log = node_logger("m2mc.infra.member", self._pid)
        if saved.problem:
            self.log.warning("saved membership left behind (%s): joining afresh", saved.problem)
        elif core.phase not in (Phase.IDLE, Phase.LEFT):
            self.log.info("power-on: resuming %s at mystable %d, groups %s", core.mid,
                          core.mystable, ", ".join(sorted(core.groups)) or "none")
            for group in core.groups:  # in them still: their history up to here, once up
                self.groups[group] = GroupState(since=core.mystable)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._metrics is not None:
            await self._metrics.aclose()
        if self.driver is not None:
            await self.driver.close()  # with a data_dir: the last state saved
        if self._member_store is not None:
            self._member_store.set_meta(CLEAN_CLOSE, "1")
            self._member_store.close()
        close = self._trace_close
        if callable(close):
            close()
        self._wake()

    # ---------------------------------------------------------------- groups
    @property
    def pid(self) -> str:
        self._drv_infra()
        return self._pid

    async def create_group(self, desc: str, *, order: str | Order = Order.TOTAL,
                           key: KeyArg = None,
                           key_file: str | os.PathLike[str] | None = None,
                           passphrase: str | None = None,
                           suite: str | None = None) -> InfraGroup:
        """Join the group named ``desc`` (its gid: the hosts know groups by name; a new
        name makes a new group)."""
        await self._use_key(GroupKey.of(key, key_file=key_file, passphrase=passphrase,
                                        suite=suite))
        group = await self._join(desc, group_order(order), 5.0)
        self._push_event(GroupCreated(desc, desc, Order.TOTAL))
        return group

    async def join(self, gid: str, *, order: str | Order | None = None, timeout: float = 5.0,
                   key: KeyArg = None, key_file: str | os.PathLike[str] | None = None,
                   passphrase: str | None = None, suite: str | None = None) -> InfraGroup:
        await self._use_key(GroupKey.of(key, key_file=key_file, passphrase=passphrase,
                                        suite=suite))
        return await self._join(gid, group_order(order or Order.TOTAL), timeout)

    async def _auth(self, source: object) -> GroupAuth:
        """The sealing object for ``source``; a key file or scrypt runs off the loop."""
        infra = self.infra_config
        return await asyncio.to_thread(deployment_auth, source, self._pid,
                                       replay_window=infra.replay_window,
                                       max_senders=infra.max_auth_senders)

    async def _use_key(self, source: GroupKey | None) -> None:
        """A key given at join: the deployment key from now on."""
        if source is None:
            return
        d = self._drv_infra()
        if d.core.phase not in (Phase.IDLE, Phase.LEFT):
            raise UsageError("already a member: the deployment key cannot change now")
        d.core.wire = InfraWire(await self._auth(source))

    async def _join(self, gid: str, order: Order, timeout: float) -> InfraGroup:
        """Join ``gid`` (the deployment too, if need be); return once we are in it and
        hold its history, or at ``timeout`` (then the member goes on trying)."""
        d = self._drv_infra()
        check_group(gid)
        core = d.core
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while core.phase in (Phase.LEAVING, Phase.CLOSING) and loop.time() < end:
            await self._wait(end - loop.time())  # a LEAVE of the deployment under way
        if not self.groups:
            core.group = gid  # (the trace's group for what concerns no group)
        st = self.groups.setdefault(gid, GroupState())
        st.refused = False
        if gid not in core.groups:
            core.join_group(gid, d.now())
            d.service()
        while not (gid in core.groups and st.loaded) and not st.refused \
                and loop.time() < end and not self._closed:
            await self._wait(end - loop.time())
        if st.refused:
            self.groups.pop(gid, None)
            raise UsageError(f"the hosts refused to let this member into group {gid!r} "
                             "(max_groups or max_member_groups reached)")
        return InfraGroup(self, gid)

    async def discover(self, gid: str | None = None, *, timeout: float = 2.0) -> list[GrpInfo]:
        return self.discovered()

    def group(self, gid: str) -> InfraGroup:
        d = self._drv_infra()
        if gid not in d.core.groups:
            raise UsageError(f"not a member of group {gid!r}")
        return InfraGroup(self, gid)

    def reject(self, gid: str) -> None:
        return None

    def network_changed(self) -> None:
        """Nothing to do: a member follows its hosts' beacons, which say when a cell is
        back (seeds/004 4.5), and resends what was not acknowledged; an interface named
        by name is watched by the driver, which follows its address by itself."""
        self._drv_infra()

    def members(self, gid: str) -> list[str]:
        """The members of ``gid`` this member knows: those the hosts named when it
        joined (with its history) and those who joined since."""
        core = self.driver.core if self.driver is not None else None
        return sorted(core.views.get(gid, ())) if core is not None else []

    def member_names(self, gid: str) -> dict[str, str]:
        """Only this member's own name: infrastructure mode carries no display names
        (docs/decisions.md, "Display names"); the others are known by their ids."""
        own = self._pid in self.members(gid) and self.config.name
        return {self._pid: self.config.name} if own else {}

    def set_name(self, name: str) -> None:
        """Kept, not sent: infrastructure mode carries no display names."""
        check_name(name)
        self.config.name = name

    def _info(self, gid: str) -> GrpInfo:
        return GrpInfo(gid, gid, Order.TOTAL,
                       tuple(MemberEntry(pid, 0, True) for pid in self.members(gid)))

    def discovered(self) -> list[GrpInfo]:
        """The groups this member is in, and those it saw in the deployment's order
        (at most ``max_groups``)."""
        core = self.driver.core if self.driver is not None else None
        names = dict.fromkeys(self.groups) if core is None else \
            dict.fromkeys([*core.groups, *core.known_groups])
        return [self._info(gid) for gid in names]

    def joined(self) -> list[GrpInfo]:
        core = self.driver.core if self.driver is not None else None
        return [] if core is None else [self._info(gid) for gid in core.groups]

    def locked(self) -> list[GrpInfo]:
        """None: the deployment key is given at start or at join, and a member without
        it is not in the group at all (no keyed group waits for its key here)."""
        self._drv_infra()
        return []

    def last_heard(self, gid: str) -> dict[str, float]:
        """Not in infrastructure mode: a member hears its hosts, not the other members
        (their messages come through the hosts' total order)."""
        raise UsageError("last_heard is ad hoc mode only: an infrastructure member hears its "
                         "hosts, not the other members")

    def history(self, gid: str) -> list[GroupMessage]:
        """The messages of ``gid``, oldest first: what the hosts' log held of it up to
        where this member came in (their retention, at most ``history_bytes``), then
        what it delivered since (docs/infra.md, "History")."""
        self._drv_infra()
        st = self.groups.get(gid)
        return [] if st is None else st.history()

    def history_ready(self, gid: str) -> bool:
        """Whether ``history(gid)`` holds the hosts' part yet (``join`` waits for it)."""
        st = self.groups.get(gid)
        return st is not None and st.loaded

    async def sync(self) -> None:
        # The member core commits its state before any frame or event leaves
        # (docs/infra.md, "Switch-off and power-on"): one service step writes it all.
        self._drv_infra().service()

    def stats(self) -> dict[str, int]:
        d = self._drv_infra()
        s = d.core.stats
        return {"delivered": s.delivered, "duplicates": s.duplicates, "nacks": s.nacks,
                "buffer_evictions": s.buffer_evictions, "resent": s.resent_news,
                "moves": d.moves, "address_changes": d.address_changes,
                "decode_errors": d.decode_errors,
                "pending_sends": d.core.pending_sends, "bad_addresses": d.bad_addresses,
                "dummies_refused": s.dummies_refused, "uplink_mismatch": s.uplink_mismatch,
                "malformed_bodies": self.malformed_bodies,
                "resumed": s.resumed, "resumes_refused": s.resumes_refused,
                "restore_discarded": s.restore_discarded, "delivery_pauses": s.delivery_pauses,
                "other_groups": s.other_groups, "groups_refused": s.groups_refused,
                "sends_refused": s.sends_refused, "catchups": s.catchups,
                "caught_up": s.caught_up, "lost": s.lost, "sequence_lost": s.sequence_lost,
                "history_requests": s.history_requests, "history_records": s.history_records,
                **d.core.wire.counters(), **d.pieces.counters()}

    def metrics_view(self) -> MemberView:
        """This member as its metrics see it (:mod:`m2mc.metrics.infra`)."""
        cfg, d = self.config, self.driver
        return MemberView(
            pid=self._pid, core=d.core if d is not None and not self._closed else None,
            malformed_bodies=self.malformed_bodies, events_dropped=self.events_dropped,
            moves=d.moves if d is not None else 0,
            bad_addresses=d.bad_addresses if d is not None else 0,
            unread={gid: len(st.queue) for gid, st in self.groups.items()},
            max_queued_messages=cfg.max_queued_messages, app_events=len(self._events),
            max_queued_events=cfg.max_queued_events,
            pieces=d.pieces if d is not None else None)

    @property
    def authenticated(self) -> bool:
        """Whether this deployment's frames are sealed with a key."""
        return self.driver is not None and self.driver.core.wire.keyed

    # -------------------------------------------------------------- internals
    def _drv_infra(self) -> MemberDriver:
        if self.driver is None or self._closed:
            raise UsageError(NOT_RUNNING)
        return self.driver

    def _on_events(self, events: list[MemberEvent]) -> None:
        on_events(self, events)
        self._make_room()
        self._wake()

    def _make_room(self) -> None:
        """Back-pressure at ``max_queued_messages`` per group, as in ad hoc mode: the
        member delivers no more than the fullest group's queue has room for, then
        pauses (records wait in its buffer, and what it misses is NACKed); it goes on
        once the application has read that queue down to half the bound (docs/api.md)."""
        d = self.driver
        if d is None:
            return
        core = d.core
        limit = self.config.max_queued_messages
        held = max((len(st.queue) for st in self.groups.values()), default=0)
        if core.paused and held > limit // 2:
            return
        paused = core.paused
        # The loop's clock is the driver's (and readable before the driver starts).
        core.make_room(core.stats.delivered + limit - held, asyncio.get_running_loop().time())
        if paused:
            d.poke()  # what it delivered and the NACK it made go out


class InfraGroup(Group):
    """One group of the deployment, as an infrastructure member's handle."""

    node: InfraNode

    @property
    def info(self) -> GrpInfo | None:
        return self.node._info(self.gid)

    @property
    def order(self) -> Order:
        return Order.TOTAL

    @property
    def authenticated(self) -> bool:
        """Whether the deployment's frames are sealed with a key (``infra_key``)."""
        return self.node.authenticated

    @property
    def members(self) -> list[str]:
        return self.node.members(self.gid)

    def _queue(self) -> deque[GroupMessage]:
        st = self.node.groups.get(self.gid)
        return st.queue if st is not None else deque()

    async def send(self, data: bytes | str, *, reply_to: ReplyTo = None) -> MessageId:
        node = self.node
        d = node._drv_infra()
        payload = data.encode() if isinstance(data, str) else bytes(data)
        body = pack_body(payload, _parent(reply_to))
        while True:
            try:
                mid = d.core.send(body, d.now(), self.gid)
                break
            except BufferFullError:
                await node._wait(0.05)  # back-pressure: wait for our messages to come back
                if node._closed:
                    raise UsageError("node closed") from None
        d.poke()
        return MessageId.parse(mid)

    async def receive(self, timeout: float | None = None) -> GroupMessage:
        node = self.node
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while True:
            q = self._queue()
            if q:
                m = q.popleft()
                node._make_room()
                return m
            if node._closed:
                raise UsageError("node closed")
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                raise TimeoutError(f"no message in group {self.gid!r} within {timeout} s")
            await node._wait(left)

    async def receive_many(self, limit: int = 4096,
                           timeout: float | None = None) -> list[GroupMessage]:
        first = await self.receive(timeout)
        out = [first]
        q = self._queue()
        while q and len(out) < limit:
            out.append(q.popleft())
        self.node._make_room()
        return out

    def pending(self) -> int:
        return len(self._queue())

    async def leave(self) -> None:
        """Leave this group (the last one: the deployment too)."""
        d = self.node._drv_infra()
        with contextlib.suppress(UsageError):
            d.core.leave_group(self.gid, d.now())
        d.service()


__all__ = ["InfraGroup", "InfraNode"]
