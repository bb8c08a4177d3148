"""A member changing cells: when it looks for another one (its host went silent,
seeds/004 4.5 "Host crash"), and its unacknowledged frame readdressed to the new
gateway. :class:`Moves` is one object of a :class:`~m2mc.infra.member.MemberCore`
holding when the member last heard its gateway, attached or asked to move, and the
hosts it did not hear; it sees the member only through the narrow port
:class:`~m2mc.infra.member_ports.MovesSeat`. Sans-IO."""

from __future__ import annotations

from dataclasses import replace

from m2mc.infra import messages as msg
from m2mc.infra.member_events import MoveRequest
from m2mc.infra.member_ports import MovesSeat


class Moves:
    __slots__ = ("asked_at", "attached_at", "expect", "heard_at", "seat", "unheard")

    def __init__(self, seat: MovesSeat) -> None:
        self.seat = seat
        self.heard_at = 0.0  # when the gateway was last heard
        self.attached_at = 0.0  # when the radio changed cell
        self.asked_at = 0.0  # when we last asked to move
        self.expect: str | None = None  # host of the cell we asked to move to
        self.unheard: set[str] = set()  # hosts we went to (or had) and did not hear

    def heard(self, host: str, now: float) -> None:
        """A beacon of ``host``, which we follow from now on."""
        self.unheard.discard(host)
        if host == self.expect:
            self.expect = None
        self.heard_at = now

    def deadline(self) -> float | None:
        """When the host we have counts as silent (None: out of every cell)."""
        if self.seat.cell is None:
            return None
        return max(self.heard_at, self.attached_at, self.asked_at) \
            + self.seat.cfg.host_silence

    def check(self, now: float) -> None:
        """A silent host makes the member ask to move to the least loaded other cell."""
        core = self.seat
        if core.cell is None or now < max(self.heard_at, self.attached_at,
                                          self.asked_at) + core.cfg.host_silence:
            return
        self.asked_at = now
        silent = core.gateway or self.expect
        if silent is not None:
            self.unheard.add(silent)  # not this one again until we hear it
        # Hosts are told apart by id: a cell's URL names the interface it is joined on,
        # which differs between a host's directory and this computer.
        others = [c for c in core.directory
                  if c.host not in self.unheard and c.cell != core.cell]
        if not others and self.unheard:  # everybody was silent: try them all again
            self.unheard = {silent} if silent is not None else set()
            others = [c for c in core.directory
                      if c.host not in self.unheard and c.cell != core.cell]
        if others:
            best = min(others, key=lambda c: (c.load, c.host))
            self.expect = best.host
            core.event_queue.append(MoveRequest(best))
        elif core.configured:
            # No directory to choose from: none heard yet (a fresh start, or a power-on
            # in the cell of a host that died meanwhile). Try the configuration's cells
            # in turn.
            cells = core.configured
            after = cells.index(core.cell) + 1 if core.cell in cells else 0
            target = next((c for c in cells[after:] + cells[:after] if c != core.cell), None)
            if target is not None:
                self.expect = None
                core.event_queue.append(MoveRequest(msg.CellInfo("", target, "")))


def readdress(frame: msg.UplinkMessage, gateway: str) -> msg.UplinkMessage:
    """``frame`` as sent to ``gateway`` (a resend after the member changed gateway)."""
    if isinstance(frame, msg.Hello) or frame.host == gateway:
        return frame
    return replace(frame, host=gateway)


__all__ = ["Moves", "readdress"]
