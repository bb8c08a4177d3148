"""The application workload: chat-like traffic per group, scheduled joins/leaves, and
groups created during the run (``create`` in [[groups]]).

Per group, messages arrive as a Poisson process of ``rate`` per second (whole
group) from ``start`` until ``messages`` were sent or the chaos phase ends.
Each message's sender is a random live member. With probability ``reply`` it
answers a message the sender has already delivered, picked like a chat user
does: mostly one of the last few (the distance back from the newest is
exponential with mean ``recent``), so threads grow where the talk is.
Everything is drawn from the ``workload`` stream.
"""

from __future__ import annotations

import random
from typing import Any

from m2mc.sim.engine import Simulator
from m2mc.sim.scenario import GroupWorkload, ScheduledAction


def make_payload(group: str, number: int, size: int) -> bytes:
    """Deterministic payload of ``size`` bytes that names its group and number."""
    head = f"{group}#{number};".encode()
    if size <= len(head):
        return head[:size]
    return head + b"." * (size - len(head))


class Workload:
    def __init__(self, sim: Simulator, rng: random.Random) -> None:
        self.sim = sim
        self.rng = rng
        sc = sim.scenario
        self.groups = sc.groups
        self.members: list[list[str]] = [list(g.members) for g in sc.groups]
        self.sent = [0] * len(sc.groups)
        self.sizes = [g.size.sampler(rng) for g in sc.groups]
        self.by_name = {g.group.name: i for i, g in enumerate(sc.groups)}

    def start(self) -> None:
        for index, g in enumerate(self.groups):
            self._schedule(index, g, g.start)
        for action in self.sim.scenario.schedule:
            self.sim.call_at(action.at, self._action, action)
        for index, g in enumerate(self.groups):
            if g.creator is not None:
                self.sim.call_at(g.created_at, self._create, index)

    def _create(self, index: int) -> None:
        g = self.groups[index]
        assert g.creator is not None
        self.sim.app_create(self.sim.by_id[g.creator], g.group.name, g.group.order)

    def _schedule(self, index: int, g: GroupWorkload, after: float) -> None:
        if g.rate <= 0 or self.sent[index] >= g.messages:
            return
        t = after + self.rng.expovariate(g.rate)
        if t < self.sim.scenario.chaos:
            self.sim.call_at(t, self._send, index)

    def _send(self, index: int) -> None:
        g = self.groups[index]
        sim = self.sim
        rng = self.rng
        alive = [sim.by_id[m] for m in self.members[index] if sim.by_id[m].stack is not None]
        if alive:
            node = alive[rng.randrange(len(alive))]
            name = g.group.name
            reply_to = None
            if rng.random() < g.reply:
                mids = node.stack.delivered_mids(name)
                if mids:
                    back = int(rng.expovariate(1.0 / g.recent)) if g.recent > 0 else 0
                    reply_to = mids[max(0, len(mids) - 1 - back)]
            size = max(0, round(self.sizes[index]()))
            payload = make_payload(name, self.sent[index] + 1, size)
            if sim.app_send(node, name, payload, reply_to) is not None:
                self.sent[index] += 1
        self._schedule(index, g, sim.now)

    def _action(self, action: ScheduledAction) -> None:
        node = self.sim.by_id[action.node]
        if action.action in ("retire", "readmit"):
            self.sim.app_admin(node, action.action, action.target)
            return
        join = action.action == "join"
        if not self.sim.app_membership(node, action.group, join):
            return
        members = self.members[self.by_name[action.group]]
        if join and action.node not in members:
            members.append(action.node)
        elif not join and action.node in members:
            members.remove(action.node)

    def summary(self) -> dict[str, Any]:
        return {g.group.name: self.sent[i] for i, g in enumerate(self.groups)}
