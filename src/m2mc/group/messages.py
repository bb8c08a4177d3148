"""The group layer's message types: the kinds (:class:`Kind`) and one frozen
dataclass per kind's body (docs/group.md section 2 gives each one's wire layout;
:mod:`m2mc.group.codec` encodes and decodes them).

Plain data, no behaviour: every module of the group layer (and the dissector's
tests) may import it. :class:`MemberEntry` is defined in :mod:`m2mc.store`, below
the group layer, because a stored group row holds it; it is re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from m2mc.group.stream_codec import StreamAck, StreamData, StreamNack
from m2mc.kinds import Order as GroupOrder  # Order here is the ORDER body
from m2mc.ordering import Message, MessageId
from m2mc.store import MemberEntry as MemberEntry  # re-exported: see the docstring

Intervals = list[tuple[int, int]]
Digest = dict[str, Intervals]


class Kind(IntEnum):
    DATA = 1
    REPAIR = 2
    ORDER = 3
    STATUS = 4
    NACK = 5
    SYNC_REQ = 6
    SYNC_RESP = 7
    JOIN = 8
    LEAVE = 9
    HANDOVER = 10
    ACK = 11
    PREPARE = 12
    PROMISE = 13
    START = 14
    DECIDED = 15
    GONE = 16
    STREAM = 17  # a chunk of a streamed message's body (stream_codec.py)
    STREAM_NACK = 18
    STREAM_ACK = 19  # how far a receiver holds a body in order (stream_pace.py)
    ADV = 20
    GRPS_INFO = 21



@dataclass(frozen=True, slots=True)
class GrpInfo:
    """``<gid, desc, cMemList, lMemList>`` (seeds/000 V.A) plus the group's ordering,
    whether it is keyed (authenticated: joining it takes the group's key) and the
    display names of its current members (``(pid, name)`` pairs sorted by pid; only
    members with a name; never for a keyed group: those travel sealed only).

    On the wire ``keyed`` is a fifth element and ``names`` a sixth (a map pid ->
    name), each written only when needed (``keyed`` as ``false`` before names), so
    the entries of open unnamed groups stay as they were and older entries decode
    as open and unnamed."""

    gid: str
    desc: str
    order: GroupOrder
    members: tuple[MemberEntry, ...]
    keyed: bool = False
    names: tuple[tuple[str, str], ...] = ()

    def name_of(self, pid: str) -> str:
        """The display name of member ``pid`` (``""``: none known)."""
        for who, name in self.names:
            if who == pid:
                return name
        return ""


@dataclass(frozen=True, slots=True)
class SequencerInfo:
    """A HANDOVER: the sequencer of ballot ``(epoch, sender)`` asks ``pid`` to take
    over; ``next_gseq`` is the position after its log."""

    epoch: int
    pid: str
    next_gseq: int


# An entry of the total-order sequencing log (docs/group.md, "Total order"): a data
# message's identity, or a membership record (a process enters or leaves the
# configuration whose majorities commit the log).
LogEntry = MessageId | MemberEntry
Entries = list[tuple[int, LogEntry]]  # (position = gseq, entry)


@dataclass(frozen=True, slots=True)
class LogState:
    """In a STATUS: the sender's promised ballot ``(epoch, leader)``, the ballot its
    log was last synced to ``(log_epoch, log_leader)`` (``(0, "")``: none) and how
    far its log goes (``high``)."""

    epoch: int
    leader: str
    log_epoch: int
    log_leader: str
    high: int


@dataclass(frozen=True, slots=True)
class Data:
    sender: str
    records: list[Message]


@dataclass(frozen=True, slots=True)
class Repair:
    sender: str
    records: list[Message]


@dataclass(frozen=True, slots=True)
class Order:
    """The sequencer of ballot ``(epoch, sender)`` proposes ``stamps``; every
    position up to ``commit`` is committed (the stamps there included)."""

    sender: str
    epoch: int
    stamps: Entries
    commit: int = 0


@dataclass(frozen=True, slots=True)
class Status:
    sender: str
    own_hw: int
    summary: dict[str, int]  # sender pid -> highest seqno known
    members: tuple[MemberEntry, ...]
    sequencer: LogState | None  # total order only
    max_gseq: int  # total order: the highest position the sender knows committed
    name: str = ""  # the sender's display name (a seventh element, only when set)


@dataclass(frozen=True, slots=True)
class Nack:
    sender: str
    ranges: Digest  # pid -> intervals of missing seqnos
    gseqs: Intervals  # total order: missing global sequence numbers


@dataclass(frozen=True, slots=True)
class SyncReq:
    sender: str
    sync_seqno: int
    digest: Digest  # what the requester holds: intervals per sender


@dataclass(frozen=True, slots=True)
class SyncResp:
    sender: str
    requester: str
    sync_seqno: int
    records: list[Message]
    remaining: int  # messages this responder still has to send after this one


@dataclass(frozen=True, slots=True)
class Join:
    sender: str
    version: int
    order: GroupOrder
    desc: str
    name: str = ""  # the joiner's display name (a fifth element, only when set)


@dataclass(frozen=True, slots=True)
class Leave:
    sender: str
    version: int


@dataclass(frozen=True, slots=True)
class Handover:
    sender: str
    sequencer: SequencerInfo


@dataclass(frozen=True, slots=True)
class Ack:
    """The sender holds the log of ballot ``(epoch, leader)`` up to ``high``;
    ``synced`` False: it has not got that ballot's log yet (send it a START)."""

    sender: str
    epoch: int
    leader: str
    high: int
    synced: bool = True


@dataclass(frozen=True, slots=True)
class Prepare:
    """A candidate asks for promises for ballot ``(epoch, sender)``; it knows every
    position up to ``commit`` committed."""

    sender: str
    epoch: int
    commit: int


@dataclass(frozen=True, slots=True)
class Promise:
    """The answer to a Prepare of ``(epoch, candidate)``: the sender's log (synced to
    ``(log_epoch, log_leader)``, committed up to ``commit``, held up to ``high``) and
    its entries after ``max(commit, the candidate's commit)``."""

    sender: str
    epoch: int
    candidate: str
    log_epoch: int
    log_leader: str
    commit: int
    high: int
    entries: Entries


@dataclass(frozen=True, slots=True)
class Start:
    """The sequencer of ballot ``(epoch, sender)``: its log after ``base`` (every
    position up to ``base`` is committed)."""

    sender: str
    epoch: int
    base: int
    entries: Entries


@dataclass(frozen=True, slots=True)
class Decided:
    """Committed log entries (an answer to a NACK of positions)."""

    sender: str
    entries: Entries


@dataclass(frozen=True, slots=True)
class Gone:
    """The sender cannot serve these any more: it delivered them but its log evicted
    (or it skipped) them (docs/group.md section 8). ``ranges``: seqnos per sender;
    ``gseqs``: total-order positions; ``stubs`` (``ids`` retention mode): some of
    those messages as identity, parent, position and clock, payload empty."""

    sender: str
    ranges: Digest
    gseqs: Intervals
    stubs: list[Message]


@dataclass(frozen=True, slots=True)
class Adv:
    sender: str


@dataclass(frozen=True, slots=True)
class GrpsInfo:
    sender: str
    groups: tuple[GrpInfo, ...]


Body = (Data | Repair | Order | Status | Nack | SyncReq | SyncResp | Join | Leave | Handover
        | Ack | Prepare | Promise | Start | Decided | Gone | Adv | GrpsInfo | StreamData
        | StreamNack | StreamAck)
