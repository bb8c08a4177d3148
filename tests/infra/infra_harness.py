"""The infrastructure-mode cores on the simulator's virtual network (m2mc.sim.testing),
driven by the simulator's own infra stacks (m2mc.sim.infra_stack), for tests.

Virtual time, from one seed. Hosts are joined by the ``backbone`` domain, reliable
and FIFO (constant delay); each host's cell is a broadcast domain named after the
host, in which every datagram is lost with probability ``loss`` per receiver.
Members are attached to at most one cell at a time (``move``). Hosts can crash: what
reaches a crashed host is dropped. Hosts are durable unless ``durable_hosts=False``:
each keeps its promise and log in a :class:`MemoryHostStore` that outlives its
crashes (``host_stores``), so ``restart`` (and ``power_cut`` of all) takes it up.

A member with a store (``add_member(..., store=...)``) can be switched off and on
again (``power_off``, ``power_on``): its core is dropped and a new one takes up
what the store holds. ``crash_after(node, n)`` switches it off right after its
n-th next input (a datagram, a timer, a send), before what that input produced
is drained: the arbitrary crash point of the durability tests.

With ``key`` every host and member seals its frames under that deployment key
(their counters start at the virtual time in microseconds, as drivers start them at
the wall clock); ``inject_*`` hand an outsider's bytes to a node as if they came off
a link, and ``tapped`` sees every frame a node takes in.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from m2mc.infra import codec
from m2mc.infra import messages as msg
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.host_persist import MemoryHostStore
from m2mc.infra.ids import NO_EPOCH
from m2mc.infra.member import (
    Delivered,
    GroupJoined,
    GroupLeft,
    GroupRefused,
    HistoryLoaded,
    Joined,
    Left,
    MemberCore,
    MemberEvent,
    MessagesLost,
    MoveRequest,
    Phase,
    Uplink,
    ViewChange,
)
from m2mc.infra.persist import MemberStore, decode_saved
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import GroupAuth
from m2mc.sim.infra_stack import RADIO, WIRED, HostSimStack, MemberSimStack
from m2mc.sim.node import Outgoing
from m2mc.sim.testing import Arrival, VirtualNet
from m2mc.trace.schema import ListSink

BACKBONE = "backbone"


@dataclass
class MemberLog:
    delivered: list[Delivered] = field(default_factory=list)
    views: list[ViewChange] = field(default_factory=list)
    joined: list[Joined] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    moves: list[MoveRequest] = field(default_factory=list)
    groups: list[GroupJoined | GroupLeft | GroupRefused] = field(default_factory=list)
    lost: list[MessagesLost] = field(default_factory=list)
    histories: list[HistoryLoaded] = field(default_factory=list)
    sent: dict[str, bytes] = field(default_factory=dict)
    sent_to: dict[str, str] = field(default_factory=dict)  # message id -> its group
    left_process: dict[str, bytes] = field(default_factory=dict)  # NEWs seen on the uplink


class Net:
    def __init__(self, *, seed: int = 1, hosts: Iterable[str] = ("H1", "H2", "H3"),
                 cfg: InfraConfig | None = None, loss: float = 0.0,
                 backbone_delay: float = 0.002, cell_delay: float = 0.001,
                 trace: bool = False, obey_moves: bool = False,
                 key: bytes | None = None, durable_hosts: bool = True) -> None:
        self.cfg = (cfg or InfraConfig()).check()
        self.key = key
        self.rng = random.Random(seed)  # the cores' seeds and the workloads' draws
        self.loss = loss
        self.sink = ListSink() if trace else None
        self.host_ids = list(hosts)
        domains: dict[str, dict[str, object]] = {BACKBONE: {
            "reliable": True, "fifo": True, "delay": backbone_delay, "loopback": False}}
        for h in self.host_ids:
            domains[h] = {"delay": cell_delay, "loss": loss, "loopback": False}
        self.net = VirtualNet(domains, seed=seed)
        self.hosts: dict[str, HostCore] = {}
        self.durable_hosts = durable_hosts
        self.host_stores: dict[str, MemoryHostStore] = {}
        self.alive: dict[str, bool] = {}
        self._incarnation: dict[str, int] = {}
        self.members: dict[str, MemberCore] = {}
        self.logs: dict[str, MemberLog] = {}
        self.where: dict[str, str | None] = {}
        self.obey_moves = obey_moves  # members follow MoveRequest (as the real driver does)
        self.admin_results: dict[int, msg.AdminResult] = {}  # request -> the operator's answer
        self._admin_seq = 0
        self.stores: dict[str, MemberStore] = {}
        self.off: set[str] = set()  # members switched off
        self._groups: dict[str, tuple[str, ...] | None] = {}  # the groups each joins with
        self._crash_in: dict[str, int] = {}  # member -> inputs left before it crashes
        for i, h in enumerate(self.host_ids):
            self._boot_host(h, i)

    @property
    def now(self) -> float:
        return self.net.now

    @property
    def cell_drops(self) -> int:
        """Datagrams the cells lost (the backbone loses none)."""
        return self.net.counters.get("drops_loss", 0)

    # ------------------------------------------------------------------ set-up
    def _boot_host(self, h: str, index: int | None = None) -> None:
        if index is None:
            index = self.host_ids.index(h)
        inc = self._incarnation.get(h, -1) + 1
        self._incarnation[h] = inc
        core = HostCore(HostIdentity(h, "127.0.0.1", 7100 + index, cell=h, uplink=h), self.cfg,
                        random.Random(self.rng.getrandbits(32)),
                        expected_hosts=len(self.host_ids), trace=self.sink, incarnation=inc,
                        wire=self.wire(h), durable=self.durable_hosts)
        store = self.host_stores.setdefault(h, MemoryHostStore(
            retention_age=self.cfg.retention_age, retention_bytes=self.cfg.retention_bytes)
        ) if self.durable_hosts \
            else None
        self.hosts[h] = core
        self.alive[h] = True
        self.net.add(h, lambda ctx: HostSimStack(core, on_admin=self._admin_answer,
                                                 store=store),
                     ifaces={WIRED: BACKBONE, RADIO: h}, addressed=True)

    def add_member(self, node: str, cell: str | None, *, join: bool = True,
                   cfg: InfraConfig | None = None, store: MemberStore | None = None,
                   groups: tuple[str, ...] | None = None) -> MemberCore:
        """A member in ``cell``; it joins the deployment with ``groups`` (default: the
        core's group, "infra")."""
        m = MemberCore(node, cfg or self.cfg, random.Random(self.rng.getrandbits(32)),
                       trace=self.sink, wire=self.wire(node), store=store)
        if store is not None:
            self.stores[node] = store
        self.logs[node] = MemberLog()
        self._groups[node] = groups
        self._start_member(node, m, cell, join)
        return m

    def _start_member(self, node: str, m: MemberCore, cell: str | None, join: bool) -> None:
        self.members[node] = m
        self.where[node] = cell
        if node in self.net.sim.by_id:
            self.net.crash(node)  # a new process in place of the old one (if still up)
            self.net.move(node, RADIO, cell)  # where it powers on
        groups = self._groups.get(node)
        self.net.add(node, lambda ctx: _Member(self, node, m, cell, join, groups),
                     ifaces={RADIO: cell}, addressed=True)

    def wire(self, sender: str, key: bytes | None = None) -> InfraWire:
        """A wire for ``sender`` under the deployment key (or ``key``), plain without."""
        key = key or self.key
        if key is None:
            return InfraWire()
        return InfraWire(GroupAuth(INFRA_KEY_CONTEXT, key, sender,
                                   counter_start=int(self.now * 1_000_000) + 1))

    # ------------------------------------------------------------------ outsiders
    def inject_cell(self, h: str, src: str, data: bytes) -> None:
        """A datagram on host ``h``'s uplink from address ``src``."""
        self.net.call(h, lambda stack, now: stack.core.receive_cell(src, data, now))

    def inject_backbone(self, dst: str, src: str, data: bytes) -> None:
        """A backbone frame reaching ``dst`` on a connection that says it is ``src``."""
        self.net.call(dst, lambda stack, now: stack.core.receive_backbone(src, data, now))

    def inject_member(self, node: str, data: bytes) -> None:
        """A datagram reaching member ``node`` (its cell's multicast, or its uplink)."""
        self.net.call(node, lambda stack, now: stack.core.receive_frame(data, now))

    @contextmanager
    def tapped(self, tap: Callable[[Arrival], None]) -> Iterator[None]:
        """``tap(arrival)`` sees every frame a host or member takes in, in the block."""
        with self.net.tapped(tap):
            yield

    # ------------------------------------------------------------------ events
    def at(self, t: float, fn: Callable[[], None]) -> None:
        self.net.at(t, fn)

    def run_until(self, t_end: float) -> None:
        self.net.run_until(t_end)

    def run_while(self, cond: Callable[[], bool], limit: float, step: float = 0.05) -> bool:
        """Run until ``cond()`` is false or time reaches ``limit``; True if it became false."""
        while cond():
            if self.now >= limit:
                return False
            self.run_until(self.now + step)
        return True

    # ------------------------------------------------------------------ actions
    def send(self, node: str, body: bytes, group: str | None = None) -> str | None:
        """The message id, or None when the member crashed before it left (the id
        died with the process: nothing outside saw it)."""

        def send(stack: _Member, now: float) -> str | None:
            mid = stack.core.send(body, now, group)
            return None if self._crashed(node) else mid

        mid: str | None = self.net.call(node, send)
        if mid is None:
            return None
        log = self.logs[node]
        assert mid not in log.sent, f"{node} numbered two messages {mid}"
        log.sent[mid] = body
        log.sent_to[mid] = group or self.members[node].group
        return mid

    def join_group(self, node: str, group: str) -> None:
        self.net.call(node, lambda stack, now: stack.core.join_group(group, now))

    def leave_group(self, node: str, group: str) -> None:
        self.net.call(node, lambda stack, now: stack.core.leave_group(group, now))

    def request_history(self, node: str, group: str, upto: int) -> None:
        self.net.call(node, lambda stack, now: stack.core.request_history(group, upto, now))

    # ------------------------------------------------------------------ switch-off
    def power_off(self, node: str) -> None:
        """Switch ``node`` off now: its core and everything not drained are gone."""
        self.off.add(node)
        self.where[node] = None
        self.net.crash(node)

    def power_on(self, node: str, cell: str | None, *, join: bool = True,
                 cfg: InfraConfig | None = None) -> MemberCore:
        """A new core for ``node`` takes up its store (joins if it resumed nothing)."""
        store = self.stores[node]
        m = MemberCore(node, cfg or self.cfg, random.Random(self.rng.getrandbits(32)),
                       trace=self.sink, wire=self.wire(node), store=store)
        stored = store.load()
        if stored is not None:
            m.restore(decode_saved(stored))
        self.off.discard(node)
        self._start_member(node, m, cell, join)
        return m

    def crash_after(self, node: str, inputs: int) -> None:
        """Switch ``node`` off right after its ``inputs``-th next input, undrained."""
        self._crash_in[node] = inputs

    def _crashed(self, node: str) -> bool:
        left = self._crash_in.get(node)
        if left is None:
            return False
        if left > 1:
            self._crash_in[node] = left - 1
            return False
        del self._crash_in[node]
        self.power_off(node)
        return True

    def leave(self, node: str) -> None:
        self.net.call(node, lambda stack, now: stack.core.leave(now))

    def move(self, node: str, cell: str | None) -> None:
        self.where[node] = cell
        self.net.move(node, RADIO, cell)

    def crash(self, h: str) -> None:
        self.alive[h] = False
        self.net.crash(h)

    def admin(self, h: str, op: int, target: str = "") -> int:
        """An operator's request to host ``h`` (``m2mc host retire`` ...); the answer
        lands in ``admin_results[request]``."""
        self._admin_seq += 1
        request = self._admin_seq
        self.net.call(h, lambda stack, now: stack.core.admin("operator", request, op, target,
                                                             now))
        return request

    def _admin_answer(self, client: str, data: bytes) -> None:
        result, _ = self.wire("operator").decode(data)
        assert isinstance(result, msg.AdminResult)
        self.admin_results[result.request] = result

    def answer(self, request: int, limit: float = 10.0) -> msg.AdminResult:
        """Run until the operator's request is answered (at most ``limit`` seconds)."""
        assert self.run_while(lambda: request not in self.admin_results, self.now + limit), \
            f"request {request} never answered"
        return self.admin_results[request]

    def restart(self, h: str) -> None:
        self._boot_host(h)

    def power_cut(self, hosts: Iterable[str] | None = None) -> None:
        """Every host (or ``hosts``) crashes at once."""
        for h in list(hosts if hosts is not None else self.host_ids):
            if self.alive[h]:
                self.crash(h)

    def coordinator(self) -> str | None:
        live = [h for h, c in self.hosts.items() if self.alive[h] and c.coordinator is not None]
        return max(live, key=lambda h: self.hosts[h].coordinator.epoch) if live else None  # type: ignore[union-attr]

    # ------------------------------------------------------------------ members' book
    def _member_events(self, node: str, events: list[MemberEvent]) -> None:
        log = self.logs[node]
        for ev in events:
            if isinstance(ev, Delivered):
                log.delivered.append(ev)
            elif isinstance(ev, ViewChange):
                log.views.append(ev)
            elif isinstance(ev, Joined):
                log.joined.append(ev)
            elif isinstance(ev, Left):
                log.left.append(ev)
            elif isinstance(ev, GroupJoined | GroupLeft | GroupRefused):
                log.groups.append(ev)
            elif isinstance(ev, MessagesLost):
                log.lost.append(ev)
            elif isinstance(ev, HistoryLoaded):
                log.histories.append(ev)
            else:
                log.moves.append(ev)
                if self.obey_moves and self.where[node] != ev.target.cell:
                    cell = ev.target.cell
                    self.at(self.now, lambda n=node, c=cell: self.move(n, c))  # type: ignore[misc]

    # ------------------------------------------------------------------ checks
    def all_sent(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for log in self.logs.values():
            out.update(log.sent)
        return out

    def pending(self) -> int:
        return sum(m.pending_sends for n, m in self.members.items() if n not in self.off)


class _Member(MemberSimStack):
    """A harness member: attached and (if asked) joining at start, its events to the
    book, every NEW that leaves checked, and switched off at its crash point."""

    def __init__(self, net: Net, node: str, core: MemberCore, cell: str | None,
                 join: bool, join_with: tuple[str, ...] | None = None) -> None:
        super().__init__(core, on_events=lambda events: net._member_events(node, events),
                         store=net.stores.get(node), trace=net.sink)
        self.net = net
        self.node = node
        self.cell = cell
        self.join = join
        self.join_with = join_with

    def start(self, now: float) -> None:
        self.core.on_attach(self.cell, now)
        if self.join and self.core.phase in (Phase.IDLE, Phase.LEFT):
            self.core.join(now, self.join_with)

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None:
        super().receive(iface, src, datagram, now)
        self.net._crashed(self.node)

    def on_timer(self, now: float) -> None:
        super().on_timer(now)
        self.net._crashed(self.node)

    def outgoing(self, frames: list[tuple[Uplink, bytes]]) -> list[Outgoing]:
        log = self.net.logs[self.node]
        for up, _ in frames:
            if isinstance(up.message, msg.NewReq):  # a message id outside the process
                for item in up.message.items:
                    key = f"{self.node}:{item.app_seq}"
                    seen = log.left_process.setdefault(key, item.body)
                    assert seen == item.body, f"{self.node} reused the message id {key}"
        return super().outgoing(frames)


def check_total_order(net: Net) -> dict[int, str]:
    """P1, P2, P6: one gseq -> message map, increasing gseqs, no duplicates, all sent."""
    sent = net.all_sent()
    by_gseq: dict[int, str] = {}
    for node, log in net.logs.items():
        seen: set[str] = set()
        last = 0
        for d in log.delivered:
            assert d.gseq > last, f"{node}: gseq {d.gseq} after {last}"
            last = d.gseq
            assert d.mid not in seen, f"{node}: duplicate {d.mid}"
            seen.add(d.mid)
            assert by_gseq.setdefault(d.gseq, d.mid) == d.mid, f"{node}: gseq {d.gseq} differs"
            assert sent.get(d.mid) == d.body, f"{node}: {d.mid} never sent like this"
    return by_gseq


def check_complete(net: Net, nodes: Iterable[str] | None = None) -> None:
    """P4/P5: every message sent is delivered by every member that was a member then."""
    by_gseq = check_total_order(net)
    sent = net.all_sent()
    assert set(by_gseq.values()) == set(sent), (
        f"never sequenced: {sorted(set(sent) - set(by_gseq.values()))[:5]}")
    for node in nodes if nodes is not None else net.members:
        log = net.logs[node]
        assert log.joined, f"{node} never joined"
        first = log.joined[0].gseq
        last = log.left[-1].gseq if log.left else max(by_gseq, default=0)
        want = {g for g in by_gseq if first <= g <= last}
        got = {d.gseq for d in log.delivered}
        missing = sorted(want - got)
        assert not missing, f"{node} missed gseqs {missing[:10]} (of {len(missing)})"


def run_workload(net: Net, *, members: int = 9, rounds: int = 150, p_send: float = 0.3,
                 p_move: float = 0.02, crash_at: int | None = None, gaps: bool = True,
                 leave_all: bool = True, retire_at: int | None = None) -> None:
    """Members join in the cells, send and move (into gaps too); optionally the
    coordinator crashes at round ``crash_at`` and (``retire_at``) an operator retires
    it at that round through a live host, until the change is committed; then
    everyone comes back into a live cell, drains and (``leave_all``) leaves."""
    crashed = ""
    retire_request: int | None = None
    cells = list(net.host_ids)
    for i in range(members):
        net.add_member(f"M{i}", cells[i % len(cells)])
    net.run_until(net.now + 3.0)
    places: list[str | None] = [*cells, None] if gaps else list(cells)
    for k in range(rounds):
        t = net.now
        for n in list(net.members):
            if net.rng.random() < p_send and net.members[n].phase.value in ("joining", "member"):
                net.send(n, f"{n}-{k}".encode())
            if net.rng.random() < p_move:
                net.move(n, net.rng.choice(places))
        if k == crash_at:
            c = net.coordinator()
            assert c is not None
            net.crash(c)
            crashed = c
        if retire_at is not None and k >= retire_at and crashed and (
                retire_request is None or net.admin_results.get(retire_request, _PENDING).code
                in ("no_master", "busy")):
            via = next(h for h in cells if net.alive[h])
            retire_request = net.admin(via, msg.OP_RETIRE, crashed)
        net.run_until(t + 0.02)
    if retire_request is not None:
        while net.answer(retire_request, 30).code in ("no_master", "busy"):
            net.run_until(net.now + 0.2)
            retire_request = net.admin(next(h for h in cells if net.alive[h]), msg.OP_RETIRE,
                                       crashed)
        assert net.admin_results[retire_request].code == "ok", net.admin_results[retire_request]
    live = [h for h in cells if net.alive[h]]
    for i, n in enumerate(net.members):
        where = net.where[n]
        if where is None or not net.alive[where]:
            net.move(n, live[i % len(live)])
    assert net.run_while(lambda: net.pending() > 0, net.now + 60), "sends never sequenced"
    if leave_all:
        for n in net.members:
            net.leave(n)
        assert net.run_while(
            lambda: any(m.phase.value != "left" for m in net.members.values()), net.now + 60), \
            {n: m.phase.value for n, m in net.members.items()}
    net.run_until(net.now + 2.0)


def bootstrapped(core: HostCore, others: Iterable[str], now: float = 0.0) -> HostCore:
    """A host core tested alone, past its recovery: every other host says it is there
    (a status) and holds no state either, so a fresh deployment starts
    (m2mc.infra.recovery). The core must have started."""
    r = core.succession.recovery
    for h in others:
        core.receive_backbone(h, codec.encode(msg.Status(
            h, 1, "127.0.0.1", 7000, "cell", h, 0, (), "", NO_EPOCH, NO_EPOCH, 0, 0, None)), now)
        if r is not None:
            core.receive_backbone(h, codec.encode(msg.RecoverReply(h, r.nonce, NO_EPOCH, True)),
                                  now)
    assert not core.succession.recovering
    core.drain(now)
    return core


def traffic(net: Net, seconds: float, tag: str, rate: float = 10.0) -> None:
    """Every member that may send sends ``rate`` messages a second for ``seconds``."""
    for k in range(int(seconds * rate)):
        for n, core in net.members.items():
            if n not in net.off and core.phase.value in ("joining", "member"):
                net.send(n, f"{n}-{tag}{k}".encode())
        net.run_until(net.now + 1.0 / rate)


def restart_the_quorum_depends_on(net: Net) -> str:
    """Issue 34's case: a host cut off the backbone, traffic, the master crashes for
    good and the other follower restarts (its log is the only live one that holds
    what the master committed with it), traffic, the partition heals. Returns the
    restarted follower."""
    traffic(net, 1.0, "a")
    master = net.coordinator()
    assert master is not None
    follower, cut = sorted(h for h in net.host_ids if h != master)
    net.net.partition([cut], domains=["backbone"])
    traffic(net, 2.0, "b")
    net.crash(master)
    net.crash(follower)
    net.run_until(net.now + 0.3)
    net.restart(follower)
    traffic(net, 1.0, "c")
    net.net.heal_partitions()
    return follower


def drain(net: Net, limit: float = 60.0) -> None:
    """Members out of coverage, or in a dead host's cell, come into live cells; then
    run until every send is sequenced (at most ``limit`` seconds), and a little more."""
    live = [h for h in net.host_ids if net.alive[h]]
    for i, n in enumerate(net.members):
        if net.where[n] is None or not net.alive[net.where[n] or ""]:
            net.move(n, live[i % len(live)])
    assert net.run_while(lambda: net.pending() > 0, net.now + limit), "sends never sequenced"
    net.run_until(net.now + 2.0)


_PENDING = msg.AdminResult("", "", 0, "pending", "")  # a request not answered yet


def check_garbage_collected(net: Net) -> None:
    """P7: after every member left, nothing is held for any of them anywhere."""
    check_hosts_collected({h: core for h, core in net.hosts.items() if net.alive[h]})


def check_hosts_collected(hosts: Mapping[str, HostCore]) -> None:
    """P7 on the live hosts' cores: the coordinator holds no member, no gateway holds
    anything for one, every replica freed every copy."""
    masters = [core.coordinator for core in hosts.values() if core.coordinator is not None]
    assert masters, "no coordinator"
    c = max(masters, key=lambda c: c.epoch)
    assert c.work.members == set() and c.work.rows == {}
    assert c.norm_buffer == {} and c.stable == {} and c.early == {} and c.last_seen == {}
    for h, core in hosts.items():
        g = core.gateway
        assert g.local_m == {} and g.trans == {} and len(g.outbox) == 0, h
        assert core.log.state.rows == {}, h
        assert len(core.log) == 0, (h, core.log.low, core.log.high)  # every copy freed


def group_spans(log: MemberLog, top: int) -> dict[str, list[tuple[int, int]]]:
    """Each group's membership of a member, as spans of positions ``(after, upto)``:
    from its GroupJoined (exclusive) to its GroupLeft (inclusive), or ``top``."""
    spans: dict[str, list[tuple[int, int]]] = {}
    open_at: dict[str, int] = {}
    for ev in log.groups:
        if isinstance(ev, GroupJoined) and ev.group not in open_at:
            open_at[ev.group] = ev.gseq
        elif isinstance(ev, GroupLeft) and ev.group in open_at:
            spans.setdefault(ev.group, []).append((open_at.pop(ev.group), ev.gseq))
    for g, start in open_at.items():
        spans.setdefault(g, []).append((start, top))
    return spans


def check_groups(net: Net, nodes: Iterable[str] | None = None) -> dict[int, str]:
    """Several groups in one order: P1, P2, P6 over everything (one gseq per message),
    and per group P4/P5: a member delivers exactly the messages of its groups, each
    one sequenced while it was in the group, every one of them unless it was told it
    lost it (MessagesLost, counted in ``stats.lost``)."""
    by_gseq = check_total_order(net)
    sent_to = {mid: g for log in net.logs.values() for mid, g in log.sent_to.items()}
    assert set(by_gseq.values()) == set(net.all_sent()), (
        f"never sequenced: {sorted(set(net.all_sent()) - set(by_gseq.values()))[:5]}")
    top = max(by_gseq, default=0)
    for node in nodes if nodes is not None else net.members:
        log = net.logs[node]
        spans = group_spans(log, top)
        for d in log.delivered:
            assert d.group == sent_to[d.mid], f"{node}: {d.mid} delivered in {d.group}"
            assert any(a < d.gseq <= b for a, b in spans.get(d.group, ())), (
                f"{node} delivered {d.mid} of {d.group} while not in it")
        got = {d.gseq for d in log.delivered}
        missing = sorted(g for g, mid in by_gseq.items()
                         if any(a < g <= b for a, b in spans.get(sent_to[mid], ()))
                         and g not in got)
        told = sum(x.count for x in log.lost)
        assert len(missing) == told, f"{node} missed {missing[:10]} ({len(missing)}), told {told}"
    return by_gseq
