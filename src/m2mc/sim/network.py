"""The simulated network: broadcast domains, interfaces, per-link faults, capacity.

A *domain* is a broadcast medium (a LAN segment, a cell, the wired backbone).
Node interfaces attach to domains (mobile ones move between cells). A datagram
sent on an interface goes either to every other interface on its domain
(broadcast, ``dest=None``) or to one named node on it (unicast). Each directed
pair (sender, receiver) on a domain is a *link* with its own delay
distribution, loss (independent or Gilbert-Elliott bursts), duplication and
reordering, from the domain's defaults or a ``[[links]]`` override. On a domain with
an ``mtu``, a datagram larger than one IP packet travels as IP fragments and loss
strikes each fragment (:func:`fragments_of`): it arrives only if all of them do, as on
a real link, where one lost frame costs the whole datagram. Partitions
cut links (some or all domains). Each sending interface has a transmit queue
(``capacity``): packets serialise at ``rate`` bytes/s and overflow drops.

Hot path: per packet and receiver, a few ``random()`` calls, one
:class:`~m2mc.sim.events.Arrival` and one ``heappush``. All per-link parameters are
precomputed into :class:`~m2mc.sim.world.LinkRuntime`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from heapq import heappush
from itertools import count
from typing import Any

from m2mc.sim.events import Arrival, Event
from m2mc.sim.scenario import DomainSpec
from m2mc.sim.world import Domain, LinkRuntime, SimNode

DropHook = Callable[[SimNode, SimNode | None, str, int, Domain], None]
IP_HEADER = 20  # bytes of an IPv4 header without options
UDP_HEADER = 8


def fragments_of(datagram: int, mtu: int) -> int:
    """IP packets that carry a UDP datagram of ``datagram`` payload bytes on a link of
    ``mtu`` (RFC 791: each fragment but the last carries a multiple of 8 bytes)."""
    per = (mtu - IP_HEADER) // 8 * 8
    return max(1, -(-(datagram + UDP_HEADER) // per))


def fragment_loss(loss: float, datagram: int, mtu: int) -> float:
    """The chance that a datagram is lost when each of its fragments is lost with
    ``loss``; ``loss`` itself for a datagram that fits one packet (or ``mtu`` 0)."""
    if not mtu or not loss or datagram + UDP_HEADER + IP_HEADER <= mtu:
        return loss
    return 1.0 - (1.0 - loss) ** fragments_of(datagram, mtu)


class Network:
    def __init__(self, specs: tuple[DomainSpec, ...], rng: random.Random, heap: list[Event],
                 seq: count[int], counters: dict[str, int], on_drop: DropHook,
                 on_packet_out: Callable[[SimNode, int, str | None, bytes, Domain], None] | None
                 ) -> None:
        self.rng = rng
        self.random = rng.random
        self.heap = heap
        self.seq = seq
        self.counters = counters
        self.on_drop = on_drop
        self.on_packet_out = on_packet_out
        self.domains = [Domain(i, spec, rng) for i, spec in enumerate(specs)]
        self.by_name = {d.name: d for d in self.domains}

    # ------------------------------------------------------------ attachment
    def attach(self, node: SimNode, iface: int, domain: Domain | None) -> bool:
        """Move ``node``'s interface to ``domain`` (None: no coverage). True if it changed."""
        old = node.attach[iface]
        if old is domain:
            return False
        if old is not None:
            old.members.remove((node, iface))
            del old.member_iface[node.index]
        node.attach[iface] = domain
        if domain is not None:
            domain.members.append((node, iface))
            domain.member_iface[node.index] = iface
        return True

    def set_cuts(self, n_nodes: int, cuts_by_domain: dict[int, dict[int, dict[int, float]]]
                 ) -> None:
        for dom in self.domains:
            table = cuts_by_domain.get(dom.index, {})
            dom.cuts = [table.get(i) for i in range(n_nodes)] if table else []

    def heal(self) -> None:
        """Lift every fault: clean links (delay kept), no partitions, no bursts."""
        for dom in self.domains:
            dom.link = LinkRuntime(dom.spec.link.healed(), self.rng)
            for key, link in list(dom.overrides.items()):
                dom.overrides[key] = LinkRuntime(link.params.healed(), self.rng)
            dom.burst_state.clear()
            dom.cuts = []

    # -------------------------------------------------------------- sending
    def transmit(self, node: SimNode, iface: int, dest: str | None, data: bytes, t: float,
                 dest_node: SimNode | None = None) -> None:
        """Put one datagram from ``node``'s interface on its domain at virtual time ``t``."""
        dom = node.attach[iface]
        if dom is None:
            self.on_drop(node, dest_node, "no_coverage", len(data), _NO_DOMAIN)
            return
        if self.on_packet_out is not None:
            self.on_packet_out(node, iface, dest, data, dom)
        depart = t
        if dom.capacity_rate:  # finite capacity: serialise, drop on overflow
            queue = node.txq[iface]
            while queue and queue[0] <= t:
                queue.popleft()
            if len(queue) >= dom.capacity_queue:
                self.on_drop(node, dest_node, "capacity", len(data), dom)
                return
            start = queue[-1] if queue else t
            depart = start + len(data) / dom.capacity_rate
            queue.append(depart)
        if dest is None:
            if dom.loopback:
                heappush(self.heap, Arrival(depart + dom.loopback_delay, next(self.seq), node,
                                            iface, data, node, dom))
            link = dom.link
            if dom.cuts or dom.overrides or dom.fifo or link.burst is not None:
                send = self._link_send
                for receiver, r_iface in dom.members:
                    if receiver is not node:
                        send(node, receiver, r_iface, data, depart, dom)
                return
            # Fast path, the common case: same link parameters to every receiver.
            rnd = self.random
            heap = self.heap
            seq = self.seq
            loss, dup, reorder = link.loss, link.duplicate, link.reorder
            if dom.mtu:
                loss = fragment_loss(loss, len(data), dom.mtu)
            const = link.delay_const
            sample = link.delay
            for receiver, r_iface in dom.members:
                if receiver is node:
                    continue
                if loss and rnd() < loss:
                    self.on_drop(receiver, node, "loss", len(data), dom)
                    continue
                delay = const if const is not None else sample()
                if reorder and rnd() < reorder:
                    delay += rnd() * link.reorder_delay
                    self.counters["reordered"] += 1
                heappush(heap, Arrival(depart + delay, next(seq), receiver, r_iface, data, node,
                                       dom))
                if dup and rnd() < dup:
                    self.counters["duplicated"] += 1
                    again = depart + (const if const is not None else sample())
                    heappush(heap, Arrival(again, next(seq), receiver, r_iface, data, node, dom))
            return
        if dest_node is None or dest_node.index not in dom.member_iface:
            self.on_drop(node, dest_node, "no_coverage", len(data), dom)
            return
        if dest_node is node:
            heappush(self.heap, Arrival(depart + dom.loopback_delay, next(self.seq), node,
                                        iface, data, node, dom))
            return
        self._link_send(node, dest_node, dom.member_iface[dest_node.index], data, depart, dom)

    def _link_send(self, src: SimNode, dst: SimNode, dst_iface: int, data: bytes, t: float,
                   dom: Domain) -> None:
        rnd = self.random
        si, di = src.index, dst.index
        if dom.cuts:
            cut = dom.cuts[si]
            if cut is not None:
                p = cut.get(di)
                if p is not None and (p >= 1.0 or rnd() < p):
                    self.on_drop(dst, src, "partition", len(data), dom)
                    return
        link = dom.overrides.get((si, di), dom.link) if dom.overrides else dom.link
        if link.burst is not None:
            ge = link.burst
            key = (si, di)
            bad = dom.burst_state.get(key, False)
            lost = False
            # the chain steps once per IP packet: a fragment lost loses the datagram
            for _ in range(fragments_of(len(data), dom.mtu) if dom.mtu else 1):
                bad = (rnd() >= ge.p_bad_good) if bad else (rnd() < ge.p_good_bad)
                lost = rnd() < (ge.loss_bad if bad else ge.loss_good) or lost
            dom.burst_state[key] = bad
            if lost:
                self.on_drop(dst, src, "burst" if bad else "loss", len(data), dom)
                return
        elif link.loss and rnd() < (fragment_loss(link.loss, len(data), dom.mtu)
                                    if dom.mtu else link.loss):
            self.on_drop(dst, src, "loss", len(data), dom)
            return
        delay = link.delay_const if link.delay_const is not None else link.delay()
        if link.reorder and rnd() < link.reorder:
            delay += rnd() * link.reorder_delay
            self.counters["reordered"] += 1
        arrive = t + delay
        if dom.fifo:
            key = (si, di)
            last = dom.fifo_last.get(key, 0.0)
            if arrive < last:
                arrive = last
            dom.fifo_last[key] = arrive
        heappush(self.heap, Arrival(arrive, next(self.seq), dst, dst_iface, data, src, dom))
        if link.duplicate and rnd() < link.duplicate:
            self.counters["duplicated"] += 1
            again = t + (link.delay_const if link.delay_const is not None else link.delay())
            if dom.fifo:
                again = max(again, dom.fifo_last[(si, di)])
                dom.fifo_last[(si, di)] = again
            heappush(self.heap, Arrival(again, next(self.seq), dst, dst_iface, data, src, dom))


class _NoDomain:
    name = ""


_NO_DOMAIN: Any = _NoDomain()
