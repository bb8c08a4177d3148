"""The ``group`` stack: the whole M2MC group layer (:class:`~m2mc.group.manager.GroupNode`:
M2MP, GJLP, MOP, MSP, NACK repair) on a simulated node, with its durable log in
``durable_dir`` (SQLite), so a crash and restart keeps history and identities.

[stack] keys: ``redundancy`` (1), ``flow_control`` (true), ``message_timeout``
(5.0), ``flow_timeout`` (0.1), and any :class:`~m2mc.group.config.GroupConfig`
field (``nack_backoff``, ``status_interval``, ``max_held``, ...). Keyed groups
(docs/security.md): ``key`` (hex/base64 text) or ``passphrase``, and ``suite``
(``hmac-sha256``), key every group of the scenario with the same key.

Groups are the scenario's named groups: their name is the group id, so every
node that joins ``chat`` joins the same group without discovering it first. A
group with ``create`` is made by its creator during the run (``create_group`` with
the name as id, announced by GJLP); its other members join it when they discover
it (``GroupDiscovered``), which a node coming back into range does by advertising.
A node that regains coverage is told so (``network_changed``), as a real node's
interface watcher does (docs/group.md section 4).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from m2mc.core import carry_out
from m2mc.errors import BufferFullError, ConfigError, UsageError
from m2mc.group.config import GroupConfig
from m2mc.group.events import Delivered, GroupDiscovered
from m2mc.group.manager import GroupNode
from m2mc.kinds import Order
from m2mc.security.auth import counter_start_at
from m2mc.security.keys import GroupKey, GroupSecret
from m2mc.sim import decode_memo
from m2mc.sim.node import RECENT_DELIVERIES, NodeContext, register_stack
from m2mc.sim.schema import Table
from m2mc.store.sqlite import SqliteStore
from m2mc.wire.m2mp import M2MPConfig

_GROUP_KEYS = tuple(f.name for f in fields(GroupConfig))
# Pages of log a simulated node's store keeps before a commit checkpoints it. A real
# node lets its log grow to 32 MiB (m2mc.store.checkpointer.AUTOCHECKPOINT_BYTES): a
# thousand simulated nodes would hold 32 GB of it in /dev/shm. A checkpoint there is a
# copy in memory, so 1 MiB a node costs next to nothing and bounds what a run takes.
SIM_WAL_PAGES = 256


def check_params(params: Mapping[str, Any]) -> None:
    t = Table(params, "stack")
    t.string("kind")
    t.integer("redundancy", 1, low=1)
    t.boolean("flow_control", True)
    t.number("message_timeout", 5.0, above=0.0)
    t.number("flow_timeout", 0.1, above=0.0)
    t.opt_string("key")
    t.opt_string("passphrase")
    t.opt_string("suite")
    t.expect(*_GROUP_KEYS)
    t.finish()
    group_config(params)
    group_key(params)


def group_key(params: Mapping[str, Any]) -> GroupKey | None:
    try:
        return GroupKey.of(params.get("key"), passphrase=params.get("passphrase"),
                           suite=params.get("suite"))
    except ConfigError as exc:
        raise ConfigError(f"stack: {exc}") from None


def group_config(params: Mapping[str, Any]) -> GroupConfig:
    values = {k: v for k, v in params.items() if k in _GROUP_KEYS}
    try:
        return GroupConfig.from_mapping(values)
    except ConfigError as exc:
        raise ConfigError(f"stack: {exc}") from None


class GroupSimStack:
    """A :class:`~m2mc.sim.node.SimNodeStack` around one GroupNode."""

    def __init__(self, ctx: NodeContext) -> None:
        p = ctx.params
        self.ctx = ctx
        self.orders = {g.name: g.order for g in ctx.groups}
        self.store = SqliteStore(ctx.durable_dir / "group.sqlite3",
                                 wal_autocheckpoint=SIM_WAL_PAGES)
        self.key = group_key(p)
        self._secrets: dict[str, GroupSecret] = {}
        self.node = GroupNode(
            ctx.node_id, rng=ctx.rng, config=group_config(p), store=self.store,
            trace=ctx.trace, run_id=ctx.run_id,
            keys={g.name: self._secret(g.name) for g in ctx.groups} if self.key else None,
            m2mp_config=M2MPConfig(
                redundancy=int(p.get("redundancy", 1)),
                flow_control=bool(p.get("flow_control", True)),
                message_timeout=float(p.get("message_timeout", 5.0)),
                flow_timeout=float(p.get("flow_timeout", 0.1))))
        # A datagram is decoded once for all the nodes that receive it (m2mc.sim.decode_memo).
        self.node.receiver.decode_body = decode_memo.SHARED.decode
        self._delivered: dict[str, deque[str]] = {}  # the latest (RECENT_DELIVERIES)
        self._discover = {g.name for g in ctx.discover}  # joined once discovered
        self._now = 0.0

    # ------------------------------------------------------------ lifecycle
    def _secret(self, group: str) -> GroupSecret:
        assert self.key is not None
        secret = self._secrets.get(group)
        if secret is None:
            secret = self._secrets[group] = self.key.resolve(group)
        return secret

    def start(self, now: float) -> None:
        self._now = now
        first_boot = self.store.get_meta("sim_booted") is None
        # Seal counters start at the virtual clock in microseconds: a restarted node
        # continues above what it sealed before its crash.
        self.node.counter_start = counter_start_at(max(now, 0.0))
        self.node.start(now)
        if first_boot:
            self.store.set_meta("sim_booted", "1")
            for spec in self.ctx.groups:
                self.node.join_group(spec.name, now, order=spec.order)
        self._drain()

    # ------------------------------------------------------------------ app
    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        self._now = now
        if not self.node.is_member(group):
            return None
        try:
            mid = self.node.send(group, payload, now, reply_to or None)
        except (UsageError, BufferFullError):  # not a member; total order held back too much
            return None
        self._drain()
        return str(mid)

    def delivered_mids(self, group: str) -> Sequence[str]:
        return self._delivered.get(group, ())

    def app_join(self, group: str, now: float) -> None:
        self._now = now
        key = self._secret(group) if self.key is not None else None
        self.node.join_group(group, now, order=self.orders.get(group, Order.SB), key=key)
        self._drain()

    def app_create(self, group: str, order: Order, now: float) -> None:
        """Create ``group`` (its name is its id), announced to the others by GJLP."""
        self._now = now
        if not self.node.is_member(group):
            key = self._secret(group) if self.key is not None else None
            self.node.create_group(group, now, order=order, gid=group, key=key)
        self._drain()

    def network_changed(self, now: float) -> None:
        """The node regained coverage (the simulator's interface coming back up)."""
        self._now = now
        self.node.network_changed(now)
        self._drain()

    def app_leave(self, group: str, now: float) -> None:
        self._now = now
        if self.node.is_member(group):
            self.node.leave_group(group, now)
        self._drain()

    # -------------------------------------------------------------- sans-IO
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self._now = now
        self.node.receive_datagram(datagram, now)
        self._drain()

    def on_timer(self, now: float) -> None:
        self._now = now
        self.node.on_timer(now)
        self._drain()

    def next_deadline(self) -> float | None:
        return self.node.next_deadline()

    def datagrams_to_send(self, now: float) -> list[bytes]:
        out = self.node.datagrams_to_send(now)
        # Nothing leaves before the log holds it: commit, then trace (m2mc.core).
        carry_out(self.node.take_save(now), self.store.commit, self.ctx.trace)
        return out

    def _drain(self) -> None:
        for event in self.node.events():
            if isinstance(event, Delivered):
                mids = self._delivered.get(event.gid)
                if mids is None:
                    mids = self._delivered[event.gid] = deque(maxlen=RECENT_DELIVERIES)
                mids.append(str(event.message.mid))
            elif (isinstance(event, GroupDiscovered) and event.info.gid in self._discover
                  and not self.node.is_member(event.info.gid)):
                key = self._secret(event.info.gid) if self.key is not None else None
                self.node.join_group(event.info.gid, self._now, key=key)


def _factory(ctx: NodeContext) -> GroupSimStack:
    return GroupSimStack(ctx)


register_stack("group", _factory, check_params=check_params, creates=True)
