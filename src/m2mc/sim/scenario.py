"""Scenario files (TOML): parsed into frozen specs, every key checked.

The reference for every key is docs/simulator.md. :func:`load_scenario` takes a
path or an already-parsed mapping and raises :class:`~m2mc.errors.ConfigError`
naming the first wrong key or value.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m2mc.errors import ConfigError
from m2mc.kinds import GROUP_ORDERS, MobilityModel, Order, PartitionKind
from m2mc.sim.chaos import ChaosSpec, parse_chaos
from m2mc.sim.dists import Dist, constant
from m2mc.sim.node import GroupSpec
from m2mc.sim.schema import Table, number_or_range

CELLS = "@cells"  # an iface attached to whichever cell covers the node
DEFAULT_STACK = "group"  # a scenario without [stack] kind runs the M2MC group layer
MIN_MTU = 68  # the least MTU an IPv4 link may have (RFC 791)


@dataclass(frozen=True, slots=True)
class GilbertElliott:
    """Bursty loss: a two-state chain per directed link, stepped once per packet."""

    p_good_bad: float
    p_bad_good: float
    loss_good: float = 0.0
    loss_bad: float = 1.0


@dataclass(frozen=True, slots=True)
class LinkParams:
    delay: Dist = field(default_factory=lambda: constant(0.001))
    loss: float = 0.0
    burst: GilbertElliott | None = None
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_delay: float = 0.01  # a reordered packet is held up to this much longer

    def healed(self) -> LinkParams:
        return LinkParams(delay=self.delay)


@dataclass(frozen=True, slots=True)
class DomainSpec:
    name: str
    link: LinkParams
    fifo: bool = False
    reliable: bool = False
    capacity_rate: float | None = None  # bytes/s of each sender's interface; None = unbounded
    capacity_queue: int = 64  # packets waiting in an interface's transmit queue
    loopback: bool = True  # the sender hears its own broadcasts (multicast loop)
    loopback_delay: float = 1e-5
    # IP MTU of the medium (None: a datagram is lost or kept whole). A datagram larger
    # than one IP packet goes in fragments, each lost on its own (see fragments_of).
    mtu: int | None = None


@dataclass(frozen=True, slots=True)
class LinkOverride:
    domain: str
    src: str
    dst: str
    link: LinkParams


@dataclass(frozen=True, slots=True)
class Mobility:
    model: MobilityModel = MobilityModel.STATIC
    points: tuple[tuple[float, float, float], ...] = ()  # waypoints: (t, x, y)
    speed: tuple[float, float] = (1.0, 1.0)
    pause: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    id: str
    ifaces: tuple[tuple[str, str | None], ...]  # (iface, domain | CELLS)
    clock_offset: tuple[float, float] = (0.0, 0.0)  # drawn uniformly per node
    clock_drift: tuple[float, float] = (0.0, 0.0)
    position: tuple[float, float] = (0.0, 0.0)
    mobility: Mobility = Mobility()


@dataclass(frozen=True, slots=True)
class CellSpec:
    domain: str
    x: float
    y: float
    radius: float


@dataclass(frozen=True, slots=True)
class GroupWorkload:
    group: GroupSpec
    members: tuple[str, ...]
    rate: float  # application messages per second, over the whole group
    messages: int  # at most this many (the chaos phase may end first)
    reply: float  # probability that a message replies to a delivered one
    recent: float  # mean distance back (in delivered messages) of a reply's target
    size: Dist
    start: float
    # A group made during the run (docs/simulator.md, "Groups made during a run"): the
    # creator creates it at created_at (GJLP announces it) and the other members join
    # once they discover it, instead of every member joining it by name at the start.
    creator: str | None = None
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    kind: PartitionKind
    sides: tuple[tuple[str, ...], ...]  # symmetric
    src: tuple[str, ...]  # one-way / asymmetric: from
    dst: tuple[str, ...]
    loss: float  # from -> to drop probability
    reverse_loss: float  # to -> from
    at: float
    until: float | None
    domains: tuple[str, ...]  # empty: every domain


@dataclass(frozen=True, slots=True)
class CrashSpec:
    node: str
    at: float
    restart: float | None  # None: stays down (crashed for good)


@dataclass(frozen=True, slots=True)
class ScheduledAction:
    at: float
    node: str
    action: str  # join | leave | retire | readmit (an operator's request to host ``node``)
    group: str  # join, leave
    target: str = ""  # retire, readmit: the host concerned


@dataclass(frozen=True, slots=True)
class TraceSpec:
    enabled: bool = True
    packets: bool = False
    parquet: bool = False
    flush_every: int = 8192


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    chaos: float
    heal: float
    stack: Mapping[str, Any]
    trace: TraceSpec
    domains: tuple[DomainSpec, ...]
    links: tuple[LinkOverride, ...]
    nodes: tuple[NodeSpec, ...]
    groups: tuple[GroupWorkload, ...]
    partitions: tuple[PartitionSpec, ...]
    crashes: tuple[CrashSpec, ...]
    schedule: tuple[ScheduledAction, ...]
    cells: tuple[CellSpec, ...]
    mobility_tick: float
    area: tuple[float, float, float, float]
    swarm: Mapping[str, Any]
    raw: Mapping[str, Any]
    run_name: str = ""  # [run] id: the trace's run column is "<run_name>-<seed>"
    chaos_faults: tuple[ChaosSpec, ...] = ()  # [[chaos]] (m2mc.sim.chaos)
    episodes: tuple[Mapping[str, Any], ...] = ()  # the faults [[chaos]] drew for this run

    @property
    def stack_kind(self) -> str:
        return str(self.stack.get("kind", DEFAULT_STACK))

    @property
    def end(self) -> float:
        return self.chaos + self.heal

    @property
    def orderings(self) -> dict[str, Order]:
        return {g.group.name: g.group.order for g in self.groups}


# ------------------------------------------------------------------ loading
def read_toml(path: Path) -> dict[str, Any]:
    try:
        with Path(path).open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"scenario file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"scenario {path}: not valid TOML: {exc}") from None


def load_scenario(path_or_mapping: Path | str | Mapping[str, Any]) -> Scenario:
    """Parse and check a scenario (file path or mapping); ConfigError names the bad key."""
    if isinstance(path_or_mapping, Mapping):
        return parse_scenario(path_or_mapping, "scenario")
    path = Path(path_or_mapping)
    return parse_scenario(read_toml(path), path.stem)


def parse_scenario(data: Mapping[str, Any], default_name: str) -> Scenario:
    top = Table(data, "")
    name = top.string("name", default_name)
    description = top.string("description", "")
    run = top.table("run")
    chaos = run.number("chaos", above=0.0)
    heal = run.number("heal", 10.0, low=0.0)
    # The trace's run column is "<id>-<seed>"; id defaults to the scenario's name. A sweep
    # sets it per task so that runs of one scenario stay apart in the pipeline.
    run_name = run.string("id", name)
    if not run_name:
        raise run.fail("id", "must not be empty")
    run.finish()

    stack = top.table("stack")
    stack_kind = stack.string("kind", DEFAULT_STACK)
    stack_params = {"kind": stack_kind, **stack.data}
    stack._seen.update(stack.data)  # the rest is passed to the stack as is

    tr = top.table("trace")
    trace = TraceSpec(tr.boolean("enabled", True), tr.boolean("packets", False),
                      tr.boolean("parquet", False), tr.integer("flush_every", 8192, low=1))
    tr.finish()

    domains = _domains(top)
    domain_names = {d.name for d in domains}
    cells = _cells(top, domain_names)
    mob = top.table("mobility")
    tick = mob.number("tick", 0.1, above=0.0)
    area_raw = mob.raw("area", [0.0, 0.0, 100.0, 100.0])
    if not (isinstance(area_raw, list) and len(area_raw) == 4):
        raise mob.fail("area", "must be [x0, y0, x1, y1]")
    area = tuple(number_or_range(v, mob.key(f"area[{i}]"))[0] for i, v in enumerate(area_raw))
    mob.finish()

    nodes = _nodes(top, domain_names, bool(cells))
    node_ids = [n.id for n in nodes]
    known = set(node_ids)
    links = _links(top, domain_names, known)
    groups = _groups(top, known)
    group_names = {g.group.name for g in groups}

    from m2mc.sim.node import get_stack

    entry = get_stack(stack_kind)
    if entry.check_params is not None:
        entry.check_params(stack_params)
    for g in groups:
        if g.creator is not None and not entry.creates:
            raise ConfigError(f"groups: group {g.group.name!r} is created during the run, "
                              f"which stack {stack_kind!r} does not do (use kind = \"group\")")
        if g.creator is not None and g.created_at >= chaos:
            raise ConfigError(f"groups: group {g.group.name!r}: create.at={g.created_at} is "
                              f"not inside the chaos phase (< {chaos})")
        if g.group.order not in entry.orders:
            raise ConfigError(f"groups: group {g.group.name!r} asks for order "
                              f"{g.group.order!r}, which stack {stack_kind!r} does not support")
    for n in nodes:
        if not entry.addressed and len(n.ifaces) != 1:
            raise ConfigError(f"node {n.id!r}: stack {stack_kind!r} has one interface, "
                              f"the node has {len(n.ifaces)}")

    faults = top.table("faults")
    partitions = tuple(_partition(t, known, domain_names) for t in faults.tables("partition"))
    crashes = tuple(_crash(t, known) for t in faults.tables("crash"))
    faults.finish()
    schedule = tuple(_action(t, known, group_names) for t in top.tables("schedule"))
    swarm = top.raw("swarm", {})
    if not isinstance(swarm, Mapping):
        raise top.fail("swarm", "must be a table")
    from m2mc.sim.swarm import check_swarm

    check_swarm(swarm)
    # a sleep takes an interface that follows cells out of every cell: a static node's
    may_sleep = {n.id: n.mobility.model == MobilityModel.STATIC
                 and any(d == CELLS for _, d in n.ifaces) for n in nodes}
    chaos_faults = parse_chaos(top, may_sleep, domain_names, chaos)
    top.finish()
    for when, where in ([(p.at, "faults.partition") for p in partitions]
                        + [(c.at, "faults.crash") for c in crashes]):
        if when >= chaos:
            raise ConfigError(f"{where}: at={when} is not inside the chaos phase (< {chaos})")
    return Scenario(
        name=name, description=description, chaos=chaos, heal=heal, stack=stack_params,
        run_name=run_name,
        trace=trace, domains=domains, links=links, nodes=nodes, groups=groups,
        partitions=partitions, crashes=crashes, schedule=schedule, cells=cells,
        mobility_tick=tick, area=(area[0], area[1], area[2], area[3]), swarm=dict(swarm),
        raw=data, chaos_faults=chaos_faults)


def _link(t: Table, base: LinkParams) -> LinkParams:
    delay = t.dist("delay", base.delay)
    loss_raw = t.raw("loss", base.burst if base.burst is not None else base.loss)
    burst: GilbertElliott | None = None
    loss = 0.0
    if isinstance(loss_raw, GilbertElliott):
        burst = loss_raw
    elif isinstance(loss_raw, Mapping):
        ge = Table(loss_raw, t.key("loss"))
        ge.string("model", choices=("gilbert-elliott",))
        burst = GilbertElliott(ge.probability("p_good_bad", None),
                               ge.probability("p_bad_good", None),
                               ge.probability("loss_good", 0.0), ge.probability("loss_bad", 1.0))
        ge.finish()
    else:
        loss = t.probability("loss", base.loss)
    return LinkParams(delay=delay, loss=loss, burst=burst,
                      duplicate=t.probability("duplicate", base.duplicate),
                      reorder=t.probability("reorder", base.reorder),
                      reorder_delay=t.number("reorder_delay", base.reorder_delay, low=0.0))


def _domains(top: Table) -> tuple[DomainSpec, ...]:
    section = top.table("domains")
    found = []
    for name in section.data:
        t = section.table(name)
        link = _link(t, LinkParams())
        fifo = t.boolean("fifo", False)
        reliable = t.boolean("reliable", False)
        t.expect("capacity")
        cap = t.table("capacity") if t.has("capacity") else None
        rate = queue = None
        if cap is not None:
            rate = cap.number("rate", above=0.0)
            queue = cap.integer("queue", 64, low=1)
            cap.finish()
        loopback = t.boolean("loopback", True)
        loopback_delay = t.number("loopback_delay", 1e-5, low=0.0)
        mtu = t.integer("mtu", 0, low=MIN_MTU) if t.has("mtu") else None
        t.finish()
        if reliable and (link.loss or link.burst or link.duplicate):
            raise t.fail("reliable", "a reliable domain cannot have loss or duplicate")
        if fifo and link.reorder:
            raise t.fail("fifo", "a FIFO domain cannot have reorder")
        found.append(DomainSpec(name, link, fifo, reliable, rate,
                                queue if queue is not None else 64, loopback, loopback_delay,
                                mtu))
    section.finish()
    if not found:
        found.append(DomainSpec("lan", LinkParams()))
    return tuple(found)


def _cells(top: Table, domains: set[str]) -> tuple[CellSpec, ...]:
    cells = []
    for t in top.tables("cells"):
        domain = t.string("domain")
        if domain not in domains:
            raise t.fail("domain", f"no domain {domain!r} in [domains]")
        cells.append(CellSpec(domain, t.number("x"), t.number("y"), t.number("radius", above=0)))
        t.finish()
    return tuple(cells)


def _mobility(value: Any, where: str) -> Mobility:
    t = Table(value, where)
    model = MobilityModel(t.string("model", MobilityModel.STATIC, choices=tuple(MobilityModel)))
    points: list[tuple[float, float, float]] = []
    if model == MobilityModel.WAYPOINTS:
        raw = t.raw("points")
        if not isinstance(raw, list) or not raw:
            raise t.fail("points", "must be a non-empty list of [t, x, y]")
        for i, p in enumerate(raw):
            if not (isinstance(p, list) and len(p) == 3):
                raise t.fail(f"points[{i}]", "must be [t, x, y]")
            vals = [number_or_range(v, t.key(f"points[{i}]"))[0] for v in p]
            if points and vals[0] < points[-1][0]:
                raise t.fail(f"points[{i}]", "times must not decrease")
            points.append((vals[0], vals[1], vals[2]))
    speed = pause = (0.0, 0.0)
    if model == MobilityModel.RANDOM_WAYPOINT:
        speed = number_or_range(t.raw("speed", [1.0, 2.0]), t.key("speed"))
        pause = number_or_range(t.raw("pause", [0.0, 0.0]), t.key("pause"))
        if speed[0] <= 0:
            raise t.fail("speed", "must be > 0")
    t.finish()
    return Mobility(model, tuple(points), speed, pause)


def _position(t: Table) -> tuple[float, float]:
    raw = t.raw("position", [0.0, 0.0])
    if not (isinstance(raw, list) and len(raw) == 2):
        raise t.fail("position", "must be [x, y]")
    return (number_or_range(raw[0], t.key("position"))[0],
            number_or_range(raw[1], t.key("position"))[0])


def _moving(section: Table, count: int) -> int:
    """How many generated nodes follow ``[nodes] mobility``: ``mobile`` is a share of
    ``count`` (default 1, every node, when ``mobility`` is given), rounded half up."""
    share = section.number("mobile", 1.0 if section.has("mobility") else 0.0,
                           low=0.0, high=1.0)
    if share > 0 and not section.has("mobility"):
        raise section.fail("mobile", "needs nodes.mobility (how the mobile nodes move)")
    section.expect("mobility")
    return math.floor(share * count + 0.5)


def _nodes(top: Table, domains: set[str], have_cells: bool) -> tuple[NodeSpec, ...]:
    section = top.table("nodes")
    count = section.integer("count", 0, low=0)
    prefix = section.string("prefix", "n")
    iface = section.string("iface", "net")
    default_domain = section.string("domain", sorted(domains)[0] if len(domains) == 1 else "")
    offset = number_or_range(section.raw("clock_offset", 0.0), section.key("clock_offset"))
    drift = number_or_range(section.raw("clock_drift", 0.0), section.key("clock_drift"))
    start = _position(section)
    moving = _moving(section, count)
    mobility = _mobility(section.raw("mobility"), section.key("mobility")) \
        if section.has("mobility") else Mobility()
    section.finish()
    if count and default_domain not in domains and default_domain != CELLS:
        raise section.fail("domain", f"no domain {default_domain!r} in [domains]")
    width = len(str(count - 1)) if count > 1 else 1
    specs: dict[str, NodeSpec] = {}
    for i in range(count):
        nid = f"{prefix}{i:0{width}d}"
        # The last ``moving`` nodes move; the first (the founder of groups joined by
        # name, and their first total-order sequencer) stays where it starts.
        specs[nid] = NodeSpec(nid, ((iface, default_domain),), offset, drift, start,
                              mobility if i >= count - moving else Mobility())
    for t in top.tables("node"):
        nid = t.string("id")
        t.expect("domain", "ifaces", "mobility")
        base = specs.get(nid, NodeSpec(nid, ((iface, default_domain),), offset, drift))
        ifaces = base.ifaces
        if t.has("domain") and t.has("ifaces"):
            raise t.fail("domain", "give either domain or ifaces, not both")
        if t.has("domain"):
            ifaces = ((iface, t.string("domain")),)
        if t.has("ifaces"):
            table = t.table("ifaces")
            ifaces = tuple((name, table.string(name)) for name in table.data)
            table.finish()
            if not ifaces:
                raise t.fail("ifaces", "needs at least one interface")
        for name, dom in ifaces:
            if dom not in domains and dom != CELLS:
                raise t.fail("ifaces", f"interface {name!r}: no domain {dom!r} in [domains]")
            if dom == CELLS and not have_cells:
                raise t.fail("ifaces", f"interface {name!r} follows cells, but no [[cells]]")
        off = number_or_range(t.raw("clock_offset", list(base.clock_offset)),
                              t.key("clock_offset"))
        dr = number_or_range(t.raw("clock_drift", list(base.clock_drift)), t.key("clock_drift"))
        pos = _position(t) if t.has("position") else base.position
        mobility = _mobility(t.raw("mobility"), t.key("mobility")) if t.has("mobility") \
            else base.mobility
        t.finish()
        specs[nid] = NodeSpec(nid, ifaces, off, dr, pos, mobility)
    for spec in specs.values():
        if (any(d == CELLS for _, d in spec.ifaces) is False
                and spec.mobility.model != MobilityModel.STATIC):
            raise ConfigError(f"node {spec.id!r}: mobility needs an interface on {CELLS!r}")
        for name, dom in spec.ifaces:
            if dom not in domains and dom != CELLS:
                raise ConfigError(f"node {spec.id!r}: interface {name!r} is on no domain "
                                  f"(set nodes.domain)")
    if not specs:
        raise ConfigError("nodes: the scenario has no nodes (set nodes.count or add [[node]])")
    return tuple(specs.values())


def _links(top: Table, domains: set[str], nodes: set[str]) -> tuple[LinkOverride, ...]:
    links: list[LinkOverride] = []
    for t in top.tables("links"):
        domain = t.string("domain")
        if domain not in domains:
            raise t.fail("domain", f"no domain {domain!r} in [domains]")
        src, dst = t.string("from"), t.string("to")
        for key, nid in (("from", src), ("to", dst)):
            if nid not in nodes:
                raise t.fail(key, f"no node {nid!r}")
        both = t.boolean("bidirectional", False)
        base = top.data.get("domains", {}).get(domain, {})
        link = _link(t, _link(Table(dict(base), f"domains.{domain}"), LinkParams()))
        t.finish()
        links.append(LinkOverride(domain, src, dst, link))
        if both:
            links.append(LinkOverride(domain, dst, src, link))
    return tuple(links)


def _groups(top: Table, nodes: set[str]) -> tuple[GroupWorkload, ...]:
    groups: list[GroupWorkload] = []
    seen: set[str] = set()
    for t in top.tables("groups"):
        name = t.string("name")
        if name in seen:
            raise t.fail("name", f"group {name!r} is defined twice")
        seen.add(name)
        order = Order(t.string("order", Order.SB, choices=GROUP_ORDERS))
        members_raw = t.raw("members", "all")
        if members_raw == "all":
            members = tuple(sorted(nodes))
        else:
            members = tuple(t.string_list("members"))
            for m in members:
                if m not in nodes:
                    raise t.fail("members", f"no node {m!r}")
        creator, created_at = None, 0.0
        if t.has("create"):
            made = t.table("create")
            creator = made.string("node")
            if creator not in members:
                raise made.fail("node", f"the creator must be a member; {creator!r} is not")
            created_at = made.number("at", low=0.0)
            made.finish()
        groups.append(GroupWorkload(
            GroupSpec(name, order), members,
            rate=t.number("rate", 10.0, low=0.0),
            messages=t.integer("messages", 100, low=0),
            reply=t.probability("reply", 0.6),
            recent=t.number("recent", 3.0, low=0.0),
            size=t.dist("size", constant(64.0)),
            start=t.number("start", 0.0, low=0.0), creator=creator, created_at=created_at))
        t.finish()
    return tuple(groups)


def _names(t: Table, key: str, nodes: set[str]) -> tuple[str, ...]:
    names = t.string_list(key)
    for n in names:
        if n not in nodes:
            raise t.fail(key, f"no node {n!r}")
    return tuple(names)


def _partition(t: Table, nodes: set[str], domains: set[str]) -> PartitionSpec:
    kind = PartitionKind(t.string("kind", PartitionKind.SYMMETRIC, choices=tuple(PartitionKind)))
    sides: tuple[tuple[str, ...], ...] = ()
    src: tuple[str, ...] = ()
    dst: tuple[str, ...] = ()
    loss = reverse = 1.0
    if kind == PartitionKind.SYMMETRIC:
        raw = t.raw("sides")
        if not isinstance(raw, list) or len(raw) < 1:
            raise t.fail("sides", "must be a list of node lists")
        for side in raw:
            if not isinstance(side, list) or not all(isinstance(n, str) for n in side):
                raise t.fail("sides", "must be a list of node lists")
            for n in side:
                if n not in nodes:
                    raise t.fail("sides", f"no node {n!r}")
        sides = tuple(tuple(side) for side in raw)
    else:
        src, dst = _names(t, "from", nodes), _names(t, "to", nodes)
        if kind == PartitionKind.ONE_WAY:
            reverse = 0.0
        else:
            loss = t.probability("loss", 1.0)
            reverse = t.probability("reverse_loss", 0.0)
    at = t.number("at", low=0.0)
    until = t.opt_number("until", above=at)
    doms = tuple(t.string_list("domains", []))
    for d in doms:
        if d not in domains:
            raise t.fail("domains", f"no domain {d!r}")
    t.finish()
    return PartitionSpec(kind, sides, src, dst, loss, reverse, at, until, doms)


def _crash(t: Table, nodes: set[str]) -> CrashSpec:
    node = t.string("node")
    if node not in nodes:
        raise t.fail("node", f"no node {node!r}")
    at = t.number("at", low=0.0)
    restart = t.opt_number("restart", above=at)
    t.finish()
    return CrashSpec(node, at, restart)


def _action(t: Table, nodes: set[str], groups: set[str]) -> ScheduledAction:
    at = t.number("at", low=0.0)
    node = t.string("node")
    if node not in nodes:
        raise t.fail("node", f"no node {node!r}")
    action = t.string("action", choices=("join", "leave", "retire", "readmit"))
    if action in ("retire", "readmit"):  # an operator's command to host `node` (infra)
        target = t.string("target")
        if target not in nodes:
            raise t.fail("target", f"no node {target!r}")
        t.finish()
        return ScheduledAction(at, node, action, "", target)
    group = t.string("group")
    if group not in groups:
        raise t.fail("group", f"no group {group!r}")
    t.finish()
    return ScheduledAction(at, node, action, group)
