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


class Control(Enum):
    """A membership request waiting for the member's next uplink frame."""

    JOIN = "join"
    LEAVE = "leave"
    LEAVE_OK = "leaveok"  # the last step of a leave (seeds/001 2.4 (iii))


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message of ``group``, at ``gseq`` in the deployment's order; ``gpos``: its
    place in its group (1, 2, 3, ...)."""

    gseq: int
    sender: str  # the sending computer
    app_seq: int
    body: bytes
    group: str = ""
    gpos: int = 0

    @property
    def mid(self) -> str:
        return f"{self.sender}:{self.app_seq}"


@dataclass(frozen=True, slots=True)
class ViewChange:
    """Another member joined or left ``group`` (one of ours)."""

    gseq: int
    kind: ViewKind
    member: MemberId
    group: str = ""


@dataclass(frozen=True, slots=True)
class GroupJoined:
    """We are in ``group`` from ``gseq`` on (our JOINED or GJOINED record)."""

    group: str
    gseq: int


@dataclass(frozen=True, slots=True)
class GroupLeft:
    """We are out of ``group`` from ``gseq`` on (our GLEFT record, or we left the
    deployment: ``expelled`` when the hosts expelled us and we did not rejoin)."""

    group: str
    gseq: int
    expelled: bool = False


@dataclass(frozen=True, slots=True)
class GroupRefused:
    """The coordinator refused our joining ``group`` (too many groups, a bad name) or a
    message to a group we were not in (``sent``: the message's app_seq, else 0)."""

    group: str
    gseq: int
    sent: int = 0


@dataclass(frozen=True, slots=True)
class MessagesLost:
    """``count`` messages of ``group`` between positions ``after`` and ``before`` (of the
    deployment's order) will never be delivered here: we were away, and the hosts'
    retention dropped them before we came back (docs/infra.md, "Members that sleep")."""

    group: str
    after: int
    before: int
    count: int


@dataclass(frozen=True, slots=True)
class HistoryLoaded:
    """The hosts' history of ``group`` up to position ``upto``, as
    :meth:`~m2mc.infra.member.MemberCore.request_history` asked: ``messages`` oldest
    first (at most ``history_bytes`` of them). ``gone``: the group's messages before
    them that retention dropped (0 when the hosts still hold the group's first
    message, or the byte bound stopped the fetch first); ``members``: the group's
    members at the answering host."""

    group: str
    upto: int
    messages: tuple[Delivered, ...]
    gone: int
    members: tuple[str, ...] = ()


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


MemberEvent = (Delivered | ViewChange | Joined | Left | MoveRequest | GroupJoined | GroupLeft
               | GroupRefused | MessagesLost | HistoryLoaded)


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
    other_groups: int = 0  # messages of groups we are not in (passed over)
    groups_refused: int = 0  # joins of a group the coordinator refused
    sends_refused: int = 0  # messages the coordinator did not sequence (NOOP)
    # members that sleep (docs/infra.md, "Members that sleep")
    catchups: int = 0  # returns after an expulsion caught up from the hosts' log
    caught_up: int = 0  # messages delivered by those catch-ups
    lost: int = 0  # messages of our groups the hosts' retention dropped while we were away
    history_requests: int = 0  # history requests sent (again included)
    history_records: int = 0  # records the answers brought
