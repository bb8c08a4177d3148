"""A member changing cells: when it looks for another one (its host went silent,
seeds/004 4.5 "Host crash"), and its unacknowledged frame readdressed to the new
gateway. Split from :mod:`m2mc.infra.member`; sans-IO, on the core's own state."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from m2mc.infra import messages as msg
from m2mc.infra.member_events import MoveRequest

if TYPE_CHECKING:
    from m2mc.infra.member import MemberCore


def check_host(core: MemberCore, now: float) -> None:
    """A silent host makes the member ask to move to the least loaded other cell."""
    if core.cell is None or now < max(core._gateway_heard, core._attached_at,
                                      core._move_asked) + core.cfg.host_silence:
        return
    core._move_asked = now
    silent = core.gateway or core._expect
    if silent is not None:
        core._unheard.add(silent)  # not this one again until we hear it
    # Hosts are told apart by id: a cell's URL names the interface it is joined on,
    # which differs between a host's directory and this computer.
    others = [c for c in core.directory if c.host not in core._unheard and c.cell != core.cell]
    if not others and core._unheard:  # everybody was silent: try them all again
        core._unheard = {silent} if silent is not None else set()
        others = [c for c in core.directory
                  if c.host not in core._unheard and c.cell != core.cell]
    if others:
        best = min(others, key=lambda c: (c.load, c.host))
        core._expect = best.host
        core._events.append(MoveRequest(best))
    elif core.configured:
        # No directory to choose from: none heard yet (a fresh start, or a power-on in
        # the cell of a host that died meanwhile). Try the configuration's cells in turn.
        cells = core.configured
        after = cells.index(core.cell) + 1 if core.cell in cells else 0
        target = next((c for c in cells[after:] + cells[:after] if c != core.cell), None)
        if target is not None:
            core._expect = None
            core._events.append(MoveRequest(msg.CellInfo("", target, "")))


def readdress(frame: msg.UplinkMessage, gateway: str) -> msg.UplinkMessage:
    """``frame`` as sent to ``gateway`` (a resend after the member changed gateway)."""
    if isinstance(frame, msg.Hello) or frame.host == gateway:
        return frame
    return replace(frame, host=gateway)
