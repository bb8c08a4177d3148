"""The ``infra`` simulator stack: infrastructure mode on simulated nodes
(``[stack] kind = "infra"``, docs/simulator.md "Addressed form", docs/infra.md).

A node with a ``wired`` interface is a host (its ``radio`` interface is its cell);
a node with only a ``radio`` interface (usually ``"@cells"``) is a mobile member.
The scenario's one group, with ``order = "total"``, is the group of seeds/001.

[stack] keys:

* ``hosts`` (list of node ids, required): every host, in port order (the election's
  tie-break after the load);
* ``join_after`` (seconds, default 0): members join this long after their first
  boot (so that the hosts' first election sees no load and a scenario knows which
  host is the first coordinator: the first one listed);
* any :class:`~m2mc.infra.config.InfraConfig` field (``subscribe``,
  ``member_buffer``, ``skip_membership``, ``beacon_interval``, ``member_timeout``, ...).

A host keeps its incarnation number in ``durable_dir``; a member keeps its saved
state there (``infra-member.sqlite3``, docs/infra.md "Switch-off and power-on"): a
crashed member is a switched-off one, and its restart is a power-on that resumes
its membership (or joins afresh when the hosts expelled it meanwhile), never
reusing a message id. Members cannot choose their cell in the simulator (mobility does), so
load-balancing moves and "my host is silent" requests are counted and ignored.

A ``[[schedule]]`` entry with ``action = "retire"`` (or ``"readmit"``), ``node`` a
host and ``target`` a host is an operator's ``m2mc host retire --id TARGET`` to that
host; the answer is the host's ``elect`` trace event with ``phase = "admin"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from m2mc.core import carry_out
from m2mc.errors import BufferFullError, ConfigError, DecodeError, UsageError
from m2mc.infra import messages as msg
from m2mc.infra.codec import decode, encode
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import ADMIN, HostCore, HostIdentity
from m2mc.infra.member import Delivered, MemberCore, Phase
from m2mc.infra.persist import decode_saved
from m2mc.sim.node import NodeContext, Outgoing, register_stack
from m2mc.sim.schema import Table
from m2mc.store.infra_member import FILE_NAME, SqliteMemberStore

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
    t.expect(*_CONFIG_KEYS)
    t.finish()
    infra_config(params)


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


class HostSimStack:
    """A host: gateway of its cell, replica, voter, coordinator when elected."""

    def __init__(self, ctx: NodeContext, cfg: InfraConfig, hosts: Sequence[str]) -> None:
        self.ctx = ctx
        path = ctx.durable_dir / "incarnation"
        incarnation = _read_int(path, -1) + 1
        path.write_text(str(incarnation))
        cell = (ctx.ifaces or {}).get(RADIO) or ""
        ident = HostIdentity(ctx.node_id, "127.0.0.1", 7100 + list(hosts).index(ctx.node_id),
                             cell=cell, uplink=ctx.node_id)
        self.core = HostCore(ident, cfg, ctx.rng, expected_hosts=len(hosts), trace=ctx.trace,
                             run_id=ctx.run_id,
                             group=ctx.groups[0].name if ctx.groups else "infra",
                             incarnation=incarnation)
        self._requests = 0

    def app_admin(self, action: str, target: str, now: float) -> None:
        self._requests += 1
        op = msg.OP_RETIRE if action == "retire" else msg.OP_READMIT
        self.core.admin("schedule", self._requests, op, target, now)

    def start(self, now: float) -> None:
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
        return [Outgoing(WIRED if s.link == "backbone" else RADIO, s.dest, s.data)
                for s in self.core.drain(now) if s.link != ADMIN]  # answers: in the trace

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


class MemberSimStack:
    """A mobile member: the seeds/001 group member behind the scenario's group."""

    def __init__(self, ctx: NodeContext, cfg: InfraConfig, join_after: float) -> None:
        self.ctx = ctx
        self.group = ctx.groups[0].name if ctx.groups else "infra"
        self.store = SqliteMemberStore(ctx.durable_dir / FILE_NAME)
        self.core = MemberCore(ctx.node_id, cfg, ctx.rng, group=self.group, trace=ctx.trace,
                               run_id=ctx.run_id, store=self.store)
        stored = self.store.load()
        if stored is not None:  # a restart: power-on from the saved state
            self.core.restore(decode_saved(stored))
        self._booted = ctx.durable_dir / "booted"
        self._join_at: float | None = None
        self.join_after = join_after
        self.delivered: list[str] = []
        self.decode_errors = 0

    def start(self, now: float) -> None:
        if self.ctx.groups:
            first_boot = not self._booted.exists()
            self._booted.write_text("1")
            if self.core.phase in (Phase.IDLE, Phase.LEFT):  # not resumed: join (again)
                self._join_at = now + (self.join_after if first_boot else 0.0)

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None:
        try:
            m = decode(datagram)
        except DecodeError:
            self.decode_errors += 1
            return
        if isinstance(m, msg.Beacon | msg.Normals | msg.Transfer | msg.Ack | msg.Move
                      | msg.NotMember):
            self.core.receive(m, now)

    def on_timer(self, now: float) -> None:
        if self._join_at is not None and now >= self._join_at:
            self._join_at = None
            self.core.join(now)
        self.core.on_timer(now)

    def next_deadline(self) -> float | None:
        d = self.core.next_deadline()
        if self._join_at is not None:
            d = self._join_at if d is None else min(d, self._join_at)
        return d

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        events, frames = self.core.events(), self.core.drain()
        # Nothing leaves before the store holds it: commit, then trace (m2mc.core).
        carry_out(self.core.take_save(now), self.store.commit, self.ctx.trace)
        for ev in events:
            if isinstance(ev, Delivered):
                self.delivered.append(ev.mid)
            # A MoveRequest is ignored: this stack stays in its cell.
        return [Outgoing(RADIO, up.host, encode(up.message)) for up in frames]

    def on_attach(self, iface: str, domain: str | None, now: float) -> None:
        self.core.on_attach(domain, now)

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        if group != self.group or not self.core.is_member:
            return None
        try:
            return self.core.send(payload, now)
        except (UsageError, BufferFullError):
            return None

    def delivered_mids(self, group: str) -> Sequence[str]:
        return self.delivered if group == self.group else ()

    def app_join(self, group: str, now: float) -> None:
        if group == self.group:
            with contextlib.suppress(UsageError):
                self.core.join(now)

    def app_leave(self, group: str, now: float) -> None:
        if group == self.group:
            with contextlib.suppress(UsageError):
                self.core.leave(now)


def make_stack(ctx: NodeContext) -> HostSimStack | MemberSimStack:
    cfg = infra_config(ctx.params)
    hosts = [str(h) for h in ctx.params.get("hosts", ())]
    ifaces = ctx.ifaces or {}
    if WIRED in ifaces:
        if ctx.node_id not in hosts:
            raise ConfigError(f"stack.hosts: host {ctx.node_id!r} is not listed")
        return HostSimStack(ctx, cfg, hosts)
    if RADIO not in ifaces:
        raise ConfigError(f"node {ctx.node_id}: an infra node needs a {RADIO!r} interface")
    return MemberSimStack(ctx, cfg, float(ctx.params.get("join_after", 0.0)))


register_stack("infra", make_stack, addressed=True, orders=("total",), check_params=check_params)
