"""The ``flood`` stack: the cheapest stack that still behaves like group messaging.

One datagram per application message, no M2MP, no ordering: a node delivers a
message the first time a copy arrives. It exists to measure the simulator
itself (network and scheduler) and to test faults without protocol noise. Its
trace rows say ``order = "none"``. Durable state: a lease on the send counter
(blocks of 1024), so a restarted node never reuses a message identity.
"""

from __future__ import annotations

from collections.abc import Sequence

from m2mc.kinds import Order
from m2mc.sim.node import NodeContext, register_stack
from m2mc.trace.schema import TraceEvent

_NONE: list[bytes] = []
_HEADER_CACHE = 65536
_LEASE = 1024  # identities reserved per durable write
_HEADERS: dict[bytes, tuple[str, str, str, int]] = {}


def _parse(datagram: bytes) -> tuple[str, str, str, int]:
    """(group, mid, parent, payload size); mid "" if malformed."""
    parts = datagram.split(b"\n", 3)
    if len(parts) != 4:
        return "", "", "", 0
    return (parts[0].decode(errors="replace"), parts[1].decode(errors="replace"),
            parts[2].decode(errors="replace"), len(parts[3]))


class FloodStack:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.pid = ctx.node_id
        self.trace = ctx.trace
        self._out: list[bytes] = []
        self._groups: dict[str, list[str]] = {}
        self._seen: set[bytes] = set()
        self._seq = 0
        self._lease = 0  # seqs up to here are reserved in durable state
        self._seq_file = ctx.durable_dir / "flood-seq"

    def start(self, now: float) -> None:
        if self._seq_file.exists():  # restart: skip the whole reserved block (gaps are fine)
            self._seq = self._lease = int(self._seq_file.read_text())
        for group in self.ctx.groups:
            self.app_join(group.name, now)

    # ---------------------------------------------------------------- app
    def app_join(self, group: str, now: float) -> None:
        if group not in self._groups:
            self._groups[group] = []
            self._event(now, "join", group)

    def app_leave(self, group: str, now: float) -> None:
        if self._groups.pop(group, None) is not None:
            self._event(now, "leave", group)

    def delivered_mids(self, group: str) -> Sequence[str]:
        return self._groups.get(group, ())

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        if group not in self._groups:
            return None
        self._seq += 1
        if self._seq > self._lease:
            self._lease = self._seq + _LEASE - 1
            self._seq_file.write_text(str(self._lease))
        mid = f"{self.pid}:{self._seq}"
        parent = reply_to or ""
        datagram = b"\n".join((group.encode(), mid.encode(), parent.encode(), payload))
        self._out.append(datagram)
        self._event(now, "send", group, mid, parent, len(payload))
        self._accept(datagram, now)
        return mid

    # ------------------------------------------------------------- sans-IO
    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self._accept(datagram, now)

    def _accept(self, datagram: bytes, now: float) -> None:
        # Every receiver gets the same bytes object, whose hash is computed once; the
        # parsed header is memoised process-wide (a pure function of the bytes).
        if datagram in self._seen:
            if self.trace.enabled:
                group, mid, parent, size = _parse(datagram)
                self._event(now, "dup", group, mid)
            return
        header = _HEADERS.get(datagram)
        if header is None:
            header = _parse(datagram)
            if len(_HEADERS) >= _HEADER_CACHE:
                _HEADERS.clear()
            _HEADERS[datagram] = header
        group, mid, parent, size = header
        delivered = self._groups.get(group)
        if delivered is None or not mid:
            return
        self._seen.add(datagram)
        delivered.append(mid)
        if self.trace.enabled:
            peer = mid.rpartition(":")[0]
            self._event(now, "recv", group, mid, parent, size, peer)
            self._event(now, "deliver", group, mid, parent, size, peer)

    def on_timer(self, now: float) -> None:
        return None

    def next_deadline(self) -> float | None:
        return None

    def datagrams_to_send(self, now: float) -> list[bytes]:
        if not self._out:
            return _NONE
        out, self._out = self._out, []
        return out

    def _event(self, now: float, event: str, group: str, mid: str | None = None,
               parent: str | None = None, nbytes: int | None = None,
               peer: str | None = None) -> None:
        if self.trace.enabled:
            self.trace.emit(TraceEvent("", "", now, event, group=group, mid=mid, parent=parent,
                                       order=Order.NONE, bytes=nbytes, peer=peer))


register_stack("flood", FloodStack)
