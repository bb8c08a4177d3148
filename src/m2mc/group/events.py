"""What the group layer tells the application: the ``ApplGrpMngrInterface``
callbacks of seeds/000 IX.E as values (drained with ``GroupNode.events()``)."""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.group.codec import GrpInfo
from m2mc.kinds import Order, ReconnectReason, RejoinReason
from m2mc.ordering import Message, MessageId


@dataclass(frozen=True, slots=True)
class Delivered:
    """``sendMsg2Appl``: a message of group ``gid``, in the group's order."""

    gid: str
    message: Message


@dataclass(frozen=True, slots=True)
class DeliveredBatch:
    """Consecutive ``Delivered`` events of group ``gid`` as one, ``messages`` in the
    group's order. Only a node whose ``batch_deliveries`` is set emits it (the
    asyncio API does): one event per batch instead of one object per message,
    since building those is a large part of a receiver's CPU per message."""

    gid: str
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class GroupDiscovered:
    """``displayNewGroupInfo``: a group this node is not in; join or reject it."""

    info: GrpInfo


@dataclass(frozen=True, slots=True)
class GroupCreated:
    """``createdNewGroup``."""

    gid: str
    desc: str
    order: Order


@dataclass(frozen=True, slots=True)
class MemberJoined:
    """``pid`` joined group ``gid``; ``name``: its display name when known (``""``: none
    known yet, or it has none), from its JOIN or what others told of it."""

    gid: str
    pid: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class MemberNamed:
    """The display name of member ``pid`` of group ``gid`` is now ``name`` (``""``: it
    has none): its status said so (a member that restarted under another name, or one
    whose JOIN we missed), or a discovery reply did before we heard its own word."""

    gid: str
    pid: str
    name: str


@dataclass(frozen=True, slots=True)
class MemberLeft:
    gid: str
    pid: str


@dataclass(frozen=True, slots=True)
class CatchUpProgress:
    """MSP progress after joining or restarting: ``recovered`` messages so far;
    ``remaining`` is what responders said is still to come; ``done`` once over."""

    gid: str
    recovered: int
    remaining: int
    done: bool


@dataclass(frozen=True, slots=True)
class MessagesSkipped:
    """Messages of group ``gid`` this node gave up: the members that answered for them
    had evicted them from their logs (retention, docs/group.md section 8) and none
    served them within ``gone_grace``. ``ranges``: seqnos per sender; ``gseqs``:
    total-order positions passed over whose message was not known; ``count``: how
    many in all. Ordering goes on past them: a reply to a skipped message, a later
    message of its sender, the next position, are delivered."""

    gid: str
    ranges: dict[str, list[tuple[int, int]]]
    gseqs: list[tuple[int, int]]
    count: int


@dataclass(frozen=True, slots=True)
class Reconnected:
    """This node is back in range (docs/group.md section 4, "Coming back into range"):
    its interface came back (``reason = "interface"``: the driver's word) or it heard
    others again after ``silent_for`` seconds of silence (``reason = "silence"``).
    It advertises, re-announces the groups it created and catches up every group it
    is in (MSP, with ``CatchUpProgress``); groups new to it come as ``GroupDiscovered``."""

    reason: ReconnectReason
    silent_for: float | None = None


@dataclass(frozen=True, slots=True)
class Rejoined:
    """Infrastructure mode: the hosts ended this node's membership ``mid`` at ``gseq``
    without its leave, and it joined again with its groups (docs/infra.md, "Members
    that sleep", "Bounded hosts", "Hosts without a data directory"). After
    ``EXPELLED`` or ``RESUME_REFUSED`` it catches up from the hosts' log, and what
    their retention dropped comes as :class:`MessagesSkipped`; after
    ``SEQUENCE_LOST`` what the old sequence held beyond ``gseq`` is gone."""

    mid: str
    reason: RejoinReason
    gseq: int


@dataclass(frozen=True, slots=True)
class StreamUpdate:
    """News of a streamed message's body for its readers (docs/group.md section 12):
    ``available`` bytes from its start are held here; ``done``: all of it, checked;
    ``error``: it will never be complete (``timeout``, ``aborted``, ``corrupt``,
    ``malformed``, ``store_full``, ``busy``). The asyncio API consumes these."""

    gid: str
    mid: MessageId
    available: int
    done: bool = False
    error: str | None = None


GroupEvent = (Delivered | DeliveredBatch | GroupDiscovered | GroupCreated | MemberJoined
              | MemberLeft | MemberNamed | CatchUpProgress | MessagesSkipped | Reconnected
              | Rejoined | StreamUpdate)
