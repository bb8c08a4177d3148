"""The ``infra`` simulator stack: infrastructure mode on simulated nodes
(``[stack] kind = "infra"``, docs/simulator.md "Addressed form", docs/infra.md).

A node with a ``wired`` interface is a host (its ``radio`` interface is its cell);
a node with only a ``radio`` interface (usually ``"@cells"``) is a mobile member.
The scenario's groups (``order = "total"``) are groups of the deployment (seeds/001
2.2 (i) lifted, docs/infra.md "Groups"): a member joins the deployment with the
groups it is listed in, and a ``join``/``leave`` in the schedule joins or leaves one.

[stack] keys:

* ``hosts`` (list of node ids, required): every host, in port order (the election's
  tie-break after the load);
* ``durable_hosts`` (default true): hosts keep their promise and log in
  ``durable_dir`` (``m2mc host --data-dir``), so a crash and restart, of one host or
  all, loses nothing; false runs them on memory only (docs/infra.md, "Durable hosts");
* ``join_after`` (seconds, default 0): members join this long after their first
  boot (so that the hosts' first election sees no load and a scenario knows which
  host is the first coordinator: the first one listed);
* ``key`` (hex/base64 text), ``key_file`` (a path, from the working directory) or
  ``passphrase``, and ``suite``: the deployment key (docs/security.md,
  "Infrastructure mode"). Every host and member then seals every frame with it, as
  ``m2mc host --key-file`` and ``Node(infra_key=...)`` do, its counters starting at
  its boot time in virtual microseconds (a restarted node goes on above them);
* any :class:`~m2mc.infra.config.InfraConfig` field (``subscribe``,
  ``member_buffer``, ``skip_membership``, ``beacon_interval``, ``member_timeout``, ...).

A node is driven as the asyncio drivers drive it (infra_runtime/host_driver.py,
member_driver.py): frames go in through the core's wire (``receive_backbone``,
``receive_cell``, ``MemberCore.receive_frame``, whose origin is the sending node:
a gateway beacons from its uplink, which is its node id here) and come out sealed
(``HostCore.drain``, ``MemberCore.drain_frames``, sent to the uplink address the
beacons named). What a wire refuses is counted in the core's stats.

A host keeps its incarnation number in ``durable_dir``, and (``durable_hosts``) its
saved log (``infra-host.sqlite3``); a member keeps its saved state there
(``infra-member.sqlite3``, docs/infra.md "Switch-off and power-on"): a crashed member
is a switched-off one, and its restart is a power-on that resumes its membership (or
joins afresh when the hosts expelled it meanwhile), never reusing a message id.
Members cannot choose their cell in the simulator (mobility does), so load-balancing
moves and "my host is silent" requests are counted and ignored.

A ``[[schedule]]`` entry with ``action = "retire"`` (or ``"readmit"``), ``node`` a
host and ``target`` a host is an operator's ``m2mc host retire --id TARGET`` to that
host; the answer is the host's ``elect`` trace event with ``phase = "admin"``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from m2mc.core import carry_out
from m2mc.errors import BufferFullError, ConfigError, UsageError
from m2mc.infra import messages as msg
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import ADMIN, HostCore, HostIdentity
from m2mc.infra.host_persist import HostStore
from m2mc.infra.member import Delivered, MemberCore, MemberEvent, Phase, Uplink
from m2mc.infra.persist import MemberStore, decode_saved
from m2mc.infra.pieces import datagram_limit
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire, sealing_auth
from m2mc.infra_runtime import host_store
from m2mc.infra_runtime.member_store import FILE_NAME, SqliteMemberStore
from m2mc.kinds import Order
from m2mc.security.auth import counter_start_at
from m2mc.security.keys import GroupKey, GroupSecret
from m2mc.sim.node import RECENT_DELIVERIES, NodeContext, Outgoing, register_stack
from m2mc.sim.schema import Table
from m2mc.trace.schema import NullSink, TraceSink

WireAt = Callable[[float], InfraWire]  # the wire of a node booting at that time

WIRED = "wired"
RADIO = "radio"
_CONFIG_KEYS = tuple(f.name for f in fields(InfraConfig))


def infra_config(params: Mapping[str, Any]) -> InfraConfig:
    values = {k: v for k, v in params.items() if k in _CONFIG_KEYS}
    try:
        return InfraConfig().with_overrides(values)
    except ConfigError as exc:
        raise ConfigError(f"stack.{exc}") from None


def check_params(params: Mapping[str, Any]) -> None:
    t = Table(params, "stack")
    t.string("kind")
    hosts = t.string_list("hosts")
    if not hosts:
        raise t.fail("hosts", "must list at least one host")
    t.number("join_after", 0.0, low=0.0)
    t.boolean("durable_hosts", True)
    for name in ("key", "key_file", "passphrase", "suite"):
        t.opt_string(name)
    t.expect(*_CONFIG_KEYS)
    t.finish()
    infra_config(params)
    deployment_secret(params)  # a missing key file or a bad key shows at load time


def deployment_secret(params: Mapping[str, Any]) -> GroupSecret | None:
    """The scenario's deployment key, resolved (None: an unkeyed deployment)."""
    try:
        source = GroupKey.of(params.get("key"), key_file=params.get("key_file"),
                             passphrase=params.get("passphrase"), suite=params.get("suite"))
        return None if source is None else source.resolve(INFRA_KEY_CONTEXT)
    except ConfigError as exc:
        raise ConfigError(f"stack: {exc}") from None


def node_wire(secret: GroupSecret | None, node: str, cfg: InfraConfig, now: float) -> InfraWire:
    """The wire of ``node`` booting at ``now``: sealed under ``secret``, or plain."""
    if secret is None:
        return InfraWire()
    return InfraWire(sealing_auth(secret, node, counter_start_at(max(now, 0.0)),
                                  replay_window=cfg.replay_window,
                                  max_senders=cfg.max_auth_senders))


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


class HostSimStack:
    """A host: gateway of its cell, replica, voter, coordinator when elected.

    ``on_admin(client, frame)`` (if given) takes the answers to operators' requests;
    without it they are only in the trace (the host's ``elect`` events). ``wire_at``
    (if given) makes the core's wire when it starts (sealing counters begin then).
    ``store`` (a durable core's): restored from at start, committed to before every
    output leaves."""

    def __init__(self, core: HostCore, *,
                 on_admin: Callable[[str, bytes], None] | None = None,
                 wire_at: WireAt | None = None, store: HostStore | None = None) -> None:
        self.core = core
        self.on_admin = on_admin
        self.wire_at = wire_at
        self.store = store
        self._requests = 0

    def app_admin(self, action: str, target: str, now: float) -> None:
        self._requests += 1
        op = msg.OP_RETIRE if action == "retire" else msg.OP_READMIT
        self.core.admin("schedule", self._requests, op, target, now)

    def start(self, now: float) -> None:
        if self.wire_at is not None:
            self.core.wire = self.wire_at(now)
        if self.store is not None:
            self.core.restore(self.store.load(), now)
        self.core.start(now)

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None:
        if iface == WIRED:
            self.core.receive_backbone(src, datagram, now)
        else:
            self.core.receive_cell(src, datagram, now)

    def on_timer(self, now: float) -> None:
        self.core.on_timer(now)

    def next_deadline(self) -> float | None:
        return self.core.next_deadline()

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        out: list[Outgoing] = []
        sends = self.core.drain(now)
        # Nothing leaves before the store holds it (m2mc.core.carry_out).
        carry_out(self.core.take_save(now), None if self.store is None else self.store.commit,
                  NullSink())
        for s in sends:
            if s.link == ADMIN:
                if self.on_admin is not None:
                    self.on_admin(s.dest or "", s.data)
            else:
                out.append(Outgoing(WIRED if s.link == "backbone" else RADIO, s.dest, s.data))
        return out

    def on_attach(self, iface: str, domain: str | None, now: float) -> None:
        return None

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        return None

    def delivered_mids(self, group: str) -> Sequence[str]:
        return ()

    def app_join(self, group: str, now: float) -> None:
        return None

    def app_leave(self, group: str, now: float) -> None:
        return None


def make_host(ctx: NodeContext, cfg: InfraConfig, hosts: Sequence[str],
              wire_at: WireAt, durable: bool = True) -> HostSimStack:
    """A scenario's host: its incarnation number goes up at each boot (``durable_dir``),
    where a durable one keeps its log too."""
    path = ctx.durable_dir / "incarnation"
    incarnation = _read_int(path, -1) + 1
    path.write_text(str(incarnation))
    cell = (ctx.ifaces or {}).get(RADIO) or ""
    ident = HostIdentity(ctx.node_id, "127.0.0.1", 7100 + list(hosts).index(ctx.node_id),
                         cell=cell, uplink=ctx.node_id)
    # sync="off": a simulated crash drops the core, never what SQLite has written
    store = host_store.SqliteHostStore(ctx.durable_dir / host_store.FILE_NAME, ctx.node_id,
                                       sync="off", retention_age=cfg.retention_age,
                                       retention_bytes=cfg.retention_bytes) if durable else None
    return HostSimStack(HostCore(ident, cfg, ctx.rng, expected_hosts=len(hosts),
                                 trace=ctx.trace, run_id=ctx.run_id,
                                 group=ctx.groups[0].name if ctx.groups else "infra",
                                 incarnation=incarnation, durable=durable),
                        wire_at=wire_at, store=store)


class MemberSimStack:
    """A mobile member, driven as :class:`~m2mc.infra_runtime.member_driver.MemberDriver`
    drives one: ``receive_frame`` in, ``drain_frames`` out to the gateway's uplink, then
    its events. It cannot choose its cell (mobility does), so load-balancing moves and
    "my host is silent" requests are ignored unless ``on_events`` takes the events.

    ``join_after`` (None: never by itself): at start, a member that resumed no
    membership joins this many seconds later, with ``groups`` (default: the core's
    group). ``wire_at`` as for a host."""

    def __init__(self, core: MemberCore, *, join_after: float | None = None,
                 on_events: Callable[[list[MemberEvent]], None] | None = None,
                 wire_at: WireAt | None = None, store: MemberStore | None = None,
                 trace: TraceSink | None = None, groups: tuple[str, ...] = ()) -> None:
        self.core = core
        self.store = store  # where take_save's commits go (None: no data_dir)
        # where a commit's trace events go once it is durable
        self.trace: TraceSink = NullSink() if trace is None else trace
        self.wire_at = wire_at
        self.groups = groups or (core.group,)
        self.join_after = join_after
        self.on_events = on_events
        self._join_at: float | None = None
        self.delivered: dict[str, deque[str]] = {}  # the latest (RECENT_DELIVERIES)

    @property
    def decode_errors(self) -> int:
        return self.core.stats.decode_errors

    def start(self, now: float) -> None:
        if self.wire_at is not None:
            self.core.wire = self.wire_at(now)
        if self.join_after is not None and self.core.phase in (Phase.IDLE, Phase.LEFT):
            self._join_at = now + self.join_after  # not resumed: join (again)

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None:
        self.core.receive_frame(datagram, now, src)

    def on_timer(self, now: float) -> None:
        if self._join_at is not None and now >= self._join_at:
            self._join_at = None
            self.core.join(now, self.groups)
        self.core.on_timer(now)

    def next_deadline(self) -> float | None:
        d = self.core.next_deadline()
        if self._join_at is not None:
            d = self._join_at if d is None else min(d, self._join_at)
        return d

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        frames = self.core.drain_frames()
        events = self.core.events()
        # Nothing leaves before the store holds it: commit, then trace (m2mc.core).
        carry_out(self.core.take_save(now), None if self.store is None else self.store.commit,
                  self.trace)
        for ev in events:
            if isinstance(ev, Delivered):
                mids = self.delivered.get(ev.group)
                if mids is None:
                    mids = self.delivered[ev.group] = deque(maxlen=RECENT_DELIVERIES)
                mids.append(ev.mid)
        if self.on_events is not None and events:
            self.on_events(events)
        return self.outgoing(frames)

    def outgoing(self, frames: list[tuple[Uplink, bytes]]) -> list[Outgoing]:
        """The frames drained, each to the gateway uplink its beacons named."""
        return [Outgoing(RADIO, u.addr, data) for u, data in frames if u.addr]

    def on_attach(self, iface: str, domain: str | None, now: float) -> None:
        self.core.on_attach(domain, now)

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        if group not in self.core.groups or not self.core.is_member:
            return None
        try:
            return self.core.send(payload, now, group)
        except (UsageError, BufferFullError):
            return None

    def delivered_mids(self, group: str) -> Sequence[str]:
        return self.delivered.get(group, ())

    def app_join(self, group: str, now: float) -> None:
        with contextlib.suppress(UsageError, BufferFullError):
            self.core.join_group(group, now)

    def app_leave(self, group: str, now: float) -> None:
        with contextlib.suppress(UsageError, BufferFullError):
            self.core.leave_group(group, now)


def make_member(ctx: NodeContext, cfg: InfraConfig, join_after: float,
                wire_at: WireAt) -> MemberSimStack:
    """A scenario's member: its saved state in ``durable_dir`` (a restart is a power-on
    that resumes it); it joins the deployment with its groups ``join_after`` seconds
    after its first boot, at once after a later one that resumed nothing."""
    groups = tuple(g.name for g in ctx.groups)
    group = groups[0] if groups else "infra"
    store = SqliteMemberStore(ctx.durable_dir / FILE_NAME)
    core = MemberCore(ctx.node_id, cfg, ctx.rng, group=group, trace=ctx.trace,
                      run_id=ctx.run_id, store=store)
    stored = store.load()
    if stored is not None:  # a restart: power-on from the saved state
        core.restore(decode_saved(stored))
    joins: float | None = None
    if ctx.groups:
        booted = ctx.durable_dir / "booted"
        joins = 0.0 if booted.exists() else join_after
        booted.write_text("1")
    return MemberSimStack(core, join_after=joins, wire_at=wire_at, store=store, trace=ctx.trace,
                          groups=groups)


def make_stack(ctx: NodeContext) -> HostSimStack | MemberSimStack:
    cfg = infra_config(ctx.params)
    if cfg.cell_mtu:  # batches fitted to the cells' packets, as the real drivers do
        cfg = cfg.fitted(datagram_limit(cfg.cell_mtu))
    hosts = [str(h) for h in ctx.params.get("hosts", ())]
    ifaces = ctx.ifaces or {}
    secret = deployment_secret(ctx.params)

    def wire_at(now: float) -> InfraWire:
        return node_wire(secret, ctx.node_id, cfg, now)

    if WIRED in ifaces:
        if ctx.node_id not in hosts:
            raise ConfigError(f"stack.hosts: host {ctx.node_id!r} is not listed")
        return make_host(ctx, cfg, hosts, wire_at, bool(ctx.params.get("durable_hosts", True)))
    if RADIO not in ifaces:
        raise ConfigError(f"node {ctx.node_id}: an infra node needs a {RADIO!r} interface")
    return make_member(ctx, cfg, float(ctx.params.get("join_after", 0.0)), wire_at)


register_stack("infra", make_stack, addressed=True, orders=(Order.TOTAL,),
               check_params=check_params)
