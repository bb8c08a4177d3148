"""The shape every sans-IO protocol stack shares, so both drivers can run any of them.

A driver (asyncio runtime or simulator) owns the clock and the channel. It calls
``receive_datagram`` for each datagram that arrives, ``on_timer`` when
``next_deadline`` has passed, and after every call transmits what
``datagrams_to_send`` returns. The stack never blocks, sleeps or reads a clock.
A stack may also have ``receive_datagrams(datagrams, now)``, the same as
``receive_datagram`` for each in order; the asyncio driver then hands it each
batch it reads at once.
"""

from __future__ import annotations

from typing import Protocol


class SansIOStack(Protocol):
    def receive_datagram(self, datagram: bytes, now: float) -> None: ...

    def on_timer(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...

    def datagrams_to_send(self, now: float) -> list[bytes]: ...
