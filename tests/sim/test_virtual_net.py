"""m2mc.sim.testing.VirtualNet's hold and release: a node's output kept back, then
sent in order, none of it lost (what tests/group/test_window_nodes.py mutes with)."""

from __future__ import annotations

import pytest

from m2mc.sim.testing import CoreStack, SimError, VirtualNet


class Sender:
    """A sans-IO core that sends what it is told."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.out.append(data)

    def receive_datagram(self, datagram: bytes, now: float) -> None:
        return None

    def on_timer(self, now: float) -> None:
        return None

    def next_deadline(self) -> float | None:
        return None

    def datagrams_to_send(self, now: float) -> list[bytes]:
        out, self.out = self.out, []
        return out


def test_held_output_leaves_in_order_on_release() -> None:
    net = VirtualNet({"lan": {"delay": 0.001, "loopback": False}})
    sent: list[bytes] = []
    net.add("a", lambda ctx: CoreStack(Sender(), on_send=sent.append))
    listener = net.outsider("x", "lan")
    net.call("a", lambda stack, now: stack.core.send(b"1"))
    net.run(0.01)
    net.hold("a")
    net.call("a", lambda stack, now: stack.core.send(b"2"))
    net.call("a", lambda stack, now: stack.core.send(b"3"))
    net.run(1.0)
    assert [d for _, d in listener.heard] == [b"1"] and sent == [b"1"]
    net.release("a")
    net.call("a", lambda stack, now: stack.core.send(b"4"))
    net.run(0.01)
    assert [d for _, d in listener.heard] == [b"1", b"2", b"3", b"4"]
    assert sent == [b"1", b"2", b"3", b"4"]  # on_send sees them when they leave


def test_only_a_core_stack_is_held() -> None:
    net = VirtualNet()
    net.outsider("x")
    with pytest.raises(SimError, match="CoreStack"):
        net.hold("x")
