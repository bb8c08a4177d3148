"""What a member core gives out: its phase, the application's events, its uplink
frames and its counters (split from :mod:`m2mc.infra.member`, which re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from m2mc.infra import messages as msg
from m2mc.infra.ids import MemberId
from m2mc.kinds import ViewKind


class Phase(Enum):
    IDLE = "idle"
    JOINING = "joining"
    MEMBER = "member"
    LEAVING = "leaving"  # LEAVE sent (or waiting to be sent), until "has left" is delivered
    CLOSING = "closing"  # "has left" delivered, LEAVEOK being sent reliably
    LEFT = "left"


@dataclass(frozen=True, slots=True)
class Delivered:
    gseq: int
    sender: str  # the sending computer
    app_seq: int
    body: bytes

    @property
    def mid(self) -> str:
        return f"{self.sender}:{self.app_seq}"


@dataclass(frozen=True, slots=True)
class ViewChange:
    gseq: int
    kind: ViewKind
    member: MemberId


@dataclass(frozen=True, slots=True)
class Joined:
    mid: MemberId
    gseq: int


@dataclass(frozen=True, slots=True)
class Left:
    mid: MemberId
    gseq: int
    expelled: bool


@dataclass(frozen=True, slots=True)
class MoveRequest:
    """Attach to this cell (load balancing, or the current host went silent)."""

    target: msg.CellInfo


MemberEvent = Delivered | ViewChange | Joined | Left | MoveRequest


@dataclass(frozen=True, slots=True)
class Uplink:
    """A frame for gateway ``host`` (``addr``: its uplink address from the beacon)."""

    host: str
    addr: str
    message: msg.UplinkMessage


@dataclass(slots=True)
class MemberStats:
    delivered: int = 0
    duplicates: int = 0
    nacks: int = 0
    buffer_evictions: int = 0
    resent_news: int = 0
    decode_errors: int = 0  # frames refused by the wire (malformed, forged, replayed, ...)
    dummies_refused: int = 0  # 4.3 bridges longer than max_dummies (filled by NACK instead)
    uplink_mismatch: int = 0  # beacons naming an uplink other than the address they came from
    # power-on from saved state (seeds/001 4.2, docs/infra.md "Switch-off and power-on")
    resumed: int = 0  # saved memberships taken up again at power-on
    resumes_refused: int = 0  # ... that the hosts no longer held (expelled while off)
    restore_discarded: int = 0  # saved memberships unusable (corrupt): joined afresh
    sequence_lost: int = 0  # memberships ended because every host lost its state
    commits: int = 0  # saves of the durable state (before frames or events left)
    delivery_pauses: int = 0  # deliveries stopped: the application had no room
