"""A small deterministic network for the infrastructure-mode cores (tests only).

Virtual time, one event heap. Hosts are joined by reliable FIFO links (constant
delay per link, so order is kept); each host's cell is a broadcast domain in
which every datagram is lost with probability ``loss`` per receiver. Members are
attached to at most one cell at a time (``move``). Hosts can crash.

A member with a store (``add_member(..., store=...)``) can be switched off and on
again (``power_off``, ``power_on``): its core is dropped and a new one takes up
what the store holds. ``crash_after(node, n)`` switches it off right after its
n-th next input (a datagram, a timer, a send), before what that input produced
is drained: the arbitrary crash point of the durability tests.

With ``key`` every host and member seals its frames under that deployment key
(their counters start at the virtual time in microseconds, as drivers start them at
the wall clock); ``inject_*`` put an outsider's bytes on a link.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from m2mc.core import carry_out
from m2mc.infra import messages as msg
from m2mc.infra.config import InfraConfig
from m2mc.infra.host import HostCore, HostIdentity
from m2mc.infra.member import (
    Delivered,
    Joined,
    Left,
    MemberCore,
    MoveRequest,
    Phase,
    ViewChange,
)
from m2mc.infra.persist import MemberStore, decode_saved
from m2mc.infra.wire import INFRA_KEY_CONTEXT, InfraWire
from m2mc.security.auth import GroupAuth
from m2mc.trace.schema import ListSink


@dataclass
class MemberLog:
    delivered: list[Delivered] = field(default_factory=list)
    views: list[ViewChange] = field(default_factory=list)
    joined: list[Joined] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    moves: list[MoveRequest] = field(default_factory=list)
    sent: dict[str, bytes] = field(default_factory=dict)
    left_process: dict[str, bytes] = field(default_factory=dict)  # NEWs seen on the uplink


class Net:
    def __init__(self, *, seed: int = 1, hosts: Iterable[str] = ("H1", "H2", "H3"),
                 cfg: InfraConfig | None = None, loss: float = 0.0,
                 backbone_delay: float = 0.002, cell_delay: float = 0.001,
                 trace: bool = False, obey_moves: bool = False,
                 key: bytes | None = None) -> None:
        self.cfg = (cfg or InfraConfig()).check()
        self.key = key
        self.rng = random.Random(seed)
        self.loss = loss
        self.backbone_delay = backbone_delay
        self.cell_delay = cell_delay
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self.sink = ListSink() if trace else None
        self.host_ids = list(hosts)
        self.hosts: dict[str, HostCore] = {}
        self.alive: dict[str, bool] = {}
        self._incarnation: dict[str, int] = {}
        self.members: dict[str, MemberCore] = {}
        self.logs: dict[str, MemberLog] = {}
        self.where: dict[str, str | None] = {}
        self._wake: dict[str, float] = {}
        self.cell_drops = 0
        self.obey_moves = obey_moves  # members follow MoveRequest (as the real driver does)
        self.admin_results: dict[int, msg.AdminResult] = {}  # request -> the operator's answer
        self._admin_seq = 0
        self.stores: dict[str, MemberStore] = {}
        self.off: set[str] = set()  # members switched off
        self._crash_in: dict[str, int] = {}  # member -> inputs left before it crashes
        for i, h in enumerate(self.host_ids):
            self._boot_host(h, i)

    # ------------------------------------------------------------------ set-up
    def _boot_host(self, h: str, index: int | None = None) -> None:
        if index is None:
            index = self.host_ids.index(h)
        inc = self._incarnation.get(h, -1) + 1
        self._incarnation[h] = inc
        core = HostCore(HostIdentity(h, "127.0.0.1", 7100 + index, cell=h, uplink=h), self.cfg,
                        random.Random(self.rng.getrandbits(32)),
                        expected_hosts=len(self.host_ids), trace=self.sink, incarnation=inc,
                        wire=self.wire(h))
        self.hosts[h] = core
        self.alive[h] = True
        core.start(self.now)
        self._after(h)

    def add_member(self, node: str, cell: str | None, *, join: bool = True,
                   cfg: InfraConfig | None = None, store: MemberStore | None = None
                   ) -> MemberCore:
        m = MemberCore(node, cfg or self.cfg, random.Random(self.rng.getrandbits(32)),
                       trace=self.sink, wire=self.wire(node), store=store)
        if store is not None:
            self.stores[node] = store
        self.members[node] = m
        self.logs[node] = MemberLog()
        self.where[node] = cell
        m.on_attach(cell, self.now)
        if join:
            m.join(self.now)
        self._after(node)
        return m

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
        self.hosts[h].receive_cell(src, data, self.now)
        self._after(h)

    def inject_backbone(self, dst: str, src: str, data: bytes) -> None:
        """A backbone frame reaching ``dst`` on a connection that says it is ``src``."""
        self.hosts[dst].receive_backbone(src, data, self.now)
        self._after(dst)

    def inject_member(self, node: str, data: bytes) -> None:
        """A datagram reaching member ``node`` (its cell's multicast, or its uplink)."""
        self.members[node].receive_frame(data, self.now)
        self._after(node)

    # ------------------------------------------------------------------ events
    def at(self, t: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn))

    def run_until(self, t_end: float) -> None:
        while self._heap and self._heap[0][0] <= t_end:
            t, _, fn = heapq.heappop(self._heap)
            self.now = max(self.now, t)
            fn()
        self.now = max(self.now, t_end)

    def run_while(self, cond: Callable[[], bool], limit: float, step: float = 0.05) -> bool:
        """Run until ``cond()`` is false or time reaches ``limit``; True if it became false."""
        while cond():
            if self.now >= limit:
                return False
            self.run_until(self.now + step)
        return True

    # ------------------------------------------------------------------ actions
    def send(self, node: str, body: bytes) -> str | None:
        """The message id, or None when the member crashed before it left (the id
        died with the process: nothing outside saw it)."""
        mid = self.members[node].send(body, self.now)
        if self._crashed(node):
            return None
        log = self.logs[node]
        assert mid not in log.sent, f"{node} numbered two messages {mid}"
        log.sent[mid] = body
        self._after(node)
        return mid

    # ------------------------------------------------------------------ switch-off
    def power_off(self, node: str) -> None:
        """Switch ``node`` off now: its core and everything not drained are gone."""
        self.off.add(node)
        self.where[node] = None
        self._wake.pop(node, None)

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
        self.members[node] = m
        self.where[node] = cell
        m.on_attach(cell, self.now)
        if join and m.phase in (Phase.IDLE, Phase.LEFT):
            m.join(self.now)
        self._after(node)
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
        self.members[node].leave(self.now)
        self._after(node)

    def move(self, node: str, cell: str | None) -> None:
        self.where[node] = cell
        self.members[node].on_attach(cell, self.now)
        self._after(node)

    def crash(self, h: str) -> None:
        self.alive[h] = False

    def admin(self, h: str, op: int, target: str = "") -> int:
        """An operator's request to host ``h`` (``m2mc host retire`` ...); the answer
        lands in ``admin_results[request]``."""
        self._admin_seq += 1
        self.hosts[h].admin("operator", self._admin_seq, op, target, self.now)
        self._after(h)
        return self._admin_seq

    def answer(self, request: int, limit: float = 10.0) -> msg.AdminResult:
        """Run until the operator's request is answered (at most ``limit`` seconds)."""
        assert self.run_while(lambda: request not in self.admin_results, self.now + limit), \
            f"request {request} never answered"
        return self.admin_results[request]

    def restart(self, h: str) -> None:
        self._boot_host(h)

    def coordinator(self) -> str | None:
        live = [h for h, c in self.hosts.items() if self.alive[h] and c.coordinator is not None]
        return max(live, key=lambda h: self.hosts[h].coordinator.epoch) if live else None  # type: ignore[union-attr]

    # ------------------------------------------------------------------ plumbing
    def _after(self, node: str) -> None:
        """Send what ``node`` produced and schedule its next timer."""
        if node in self.hosts:
            self._after_host(node)
        else:
            self._after_member(node)

    def _after_host(self, h: str) -> None:
        if not self.alive[h]:
            return
        core = self.hosts[h]
        for s in core.drain(self.now):
            if s.link == "backbone":
                dests = [s.dest] if s.dest is not None else [x for x in self.host_ids if x != h]
                for d in dests:
                    self._backbone(h, d, s.data)
            elif s.link == "admin":
                result, _ = self.wire("operator").decode(s.data)
                assert isinstance(result, msg.AdminResult)
                self.admin_results[result.request] = result
            else:
                self._cell(h, s.dest, s.data)
        self._schedule(h, core.next_deadline(), core)

    def _after_member(self, node: str) -> None:
        if node in self.off:
            return
        m = self.members[node]
        log = self.logs[node]
        frames, events = m.drain_frames(), m.events()
        # Nothing leaves before the store holds it: commit, then trace (m2mc.core).
        store = self.stores.get(node)
        carry_out(m.take_save(self.now), None if store is None else store.commit, self.sink)
        for up, data in frames:
            if isinstance(up.message, msg.NewReq):  # a message id outside the process
                for item in up.message.items:
                    key = f"{node}:{item.app_seq}"
                    seen = log.left_process.setdefault(key, item.body)
                    assert seen == item.body, f"{node} reused the message id {key}"
            cell = self.where[node]
            if cell is None or cell != up.host or not self.alive.get(cell, False):
                continue
            if self.rng.random() < self.loss:
                self.cell_drops += 1
                continue
            self.at(self.now + self.cell_delay,
                    lambda c=cell, d=data, n=node: self._host_cell(c, n, d))
        for ev in events:
            if isinstance(ev, Delivered):
                log.delivered.append(ev)
            elif isinstance(ev, ViewChange):
                log.views.append(ev)
            elif isinstance(ev, Joined):
                log.joined.append(ev)
            elif isinstance(ev, Left):
                log.left.append(ev)
            else:
                log.moves.append(ev)
                if self.obey_moves and self.where[node] != ev.target.cell:
                    cell = ev.target.cell
                    self.at(self.now, lambda n=node, c=cell: self.move(n, c))
        self._schedule(node, m.next_deadline(), m)

    def _schedule(self, node: str, deadline: float | None, core: object) -> None:
        if deadline is None:
            return
        t = max(deadline, self.now)
        if t == self.now and node in self.hosts:
            t = self.now + 1e-6  # flush-now requests: give other events a turn
        if self._wake.get(node, float("inf")) <= t and self._wake.get(node, -1.0) >= self.now:
            return
        self._wake[node] = t
        self.at(t, lambda: self._timer(node, t))

    def _timer(self, node: str, t: float) -> None:
        if self._wake.get(node) != t:
            return
        del self._wake[node]
        if node in self.hosts:
            if not self.alive[node]:
                return
            self.hosts[node].on_timer(self.now)
        else:
            if node in self.off:
                return
            self.members[node].on_timer(self.now)
            if self._crashed(node):
                return
        self._after(node)

    def _backbone(self, src: str, dst: str, data: bytes) -> None:
        if not self.alive.get(dst, False):
            return
        inc = self._incarnation[dst]

        def deliver() -> None:
            if self.alive[src] and self.alive[dst] and self._incarnation[dst] == inc:
                self.hosts[dst].receive_backbone(src, data, self.now)
                self._after(dst)

        self.at(self.now + self.backbone_delay, deliver)

    def _cell(self, h: str, dest: str | None, data: bytes) -> None:
        nodes = [n for n, c in self.where.items() if c == h] if dest is None else (
            [dest] if self.where.get(dest) == h else [])
        for n in nodes:
            if self.rng.random() < self.loss:
                self.cell_drops += 1
                continue
            self.at(self.now + self.cell_delay, lambda n=n, d=data: self._member_cell(h, n, d))

    def _member_cell(self, h: str, node: str, data: bytes) -> None:
        if self.where.get(node) != h or node in self.off:
            return  # moved away while the datagram was in the air
        self.members[node].receive_frame(data, self.now)
        if self._crashed(node):
            return
        self._after(node)

    def _host_cell(self, h: str, node: str, data: bytes) -> None:
        if not self.alive[h] or self.where.get(node) != h:
            return
        self.hosts[h].receive_cell(node, data, self.now)
        self._after(h)

    # ------------------------------------------------------------------ checks
    def all_sent(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for log in self.logs.values():
            out.update(log.sent)
        return out

    def pending(self) -> int:
        return sum(m.pending_sends for n, m in self.members.items() if n not in self.off)


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


_PENDING = msg.AdminResult("", "", 0, "pending", "")  # a request not answered yet


def check_garbage_collected(net: Net) -> None:
    """P7: after every member left, nothing is held for any of them anywhere."""
    c_host = net.coordinator()
    assert c_host is not None
    c = net.hosts[c_host].coordinator
    assert c is not None
    assert c.work.members == set() and c.work.rows == {}
    assert c.norm_buffer == {} and c.stable == {} and c.early == {} and c.last_seen == {}
    for h, core in net.hosts.items():
        if not net.alive[h]:
            continue
        g = core.gateway
        assert g.local_m == {} and g.trans == {} and len(g.outbox) == 0, h
        assert core.log.state.rows == {}, h
        assert len(core.log) == 0, (h, core.log.low, core.log.high)  # every copy freed
