"""A perfect medium for group-layer tests: every node hears every other at once (a
VirtualNet without delay, loss or loopback), each node driven as its runtime drives
it; ``mute(pid)`` holds a node's output back until ``unmute``."""

from __future__ import annotations

from collections.abc import Callable

from m2mc.group.manager import GroupNode
from m2mc.sim.testing import CoreStack, VirtualNet


class Medium:
    def __init__(self, nodes: list[GroupNode]) -> None:
        self.nodes = nodes
        self.net = VirtualNet({"lan": {"delay": 0.0, "loss": 0.0, "loopback": False}})
        for node in nodes:
            self.net.add(node.pid, lambda ctx, node=node: CoreStack(
                node, drain=GroupNode.events, commit=node.store.commit))

    @property
    def now(self) -> float:
        return self.net.now

    def step(self, dt: float = 0.001) -> None:
        self.net.run(dt)

    def call(self, node: GroupNode, action: Callable[[GroupNode, float], object]) -> object:
        """``action(node, now)``, then what it queued leaves."""
        return self.net.call(node.pid, lambda stack, now: action(stack.core, now))

    def mute(self, pid: str) -> None:
        self.net.hold(pid)

    def unmute(self, pid: str) -> None:
        self.net.release(pid)
