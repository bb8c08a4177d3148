"""Every message of infrastructure mode, as frozen dataclasses (codec: :mod:`.codec`).

Three families (docs/infra.md, "Message formats"):

* cell downlink, gateway -> members (seeds/001 2.4, 3.2; seeds/004 3.1 "Local
  Multicast"): :class:`Beacon`, :class:`Normals`, :class:`Transfer`, :class:`Ack`,
  :class:`Move`;
* cell uplink, member -> its gateway (seeds/001 2.3, 3.3; seeds/004 "Unicast"):
  :class:`Hello` (the beacon's greeting and the seeds/004 heartbeat),
  :class:`JoinReq`, :class:`NewReq`, :class:`LeaveReq`, :class:`LeaveOkReq`,
  :class:`NackReq`;
* backbone, host <-> host (seeds/001 "wired network"; seeds/004 "Global
  Multicast"): status, election, forwarding to the coordinator, replication of
  the coordinator's log, commit, subscription, fetch, reroute.

The coordinator's decisions are :class:`Record` values in a replicated log
(docs/infra.md, "Failover"). A record that carries a multicast (``gseq > 0``) is
what the seed calls a NORMAL message; sent to one member it is a TRANSFER.
"""

from __future__ import annotations

from dataclasses import dataclass

from m2mc.infra.ids import Epoch, MemberId

# Record kinds.
APP = 0  # a multicast from a member (seeds/001: NEW turned NORMAL)
JOINED = 1  # "mid has joined"
LEFT = 2  # "mid has left" after its LEAVE
EXPELLED = 3  # "mid has left" because its computer went silent (seeds/004 4.5)
CLEANUP = 4  # LEAVEOK processed: tables freed (seeds/001 figure 3 line 27); no gseq
RETIRED = 5  # a host leaves the deployment for good (``mid.node`` is its id); no gseq
ADMITTED = 6  # a retired host is admitted again (``mid.node`` is its id); no gseq
GENESIS = 7  # the first record of a sequence: ``body`` is its 8-byte id; no gseq
GJOINED = 8  # "mid has joined group ``group``" (a member already in the deployment)
GLEFT = 9  # "mid has left group ``group``" (and stays in the deployment)
NOOP = 10  # an item of mid the coordinator refused (a group it may not join, ...): it
# takes its place in mid's NEWs and in the order, and nobody delivers it

MEMBERSHIP_KINDS = frozenset({JOINED, LEFT, EXPELLED})  # the deployment's (4.3 may skip them)
GROUP_KINDS = frozenset({GJOINED, GLEFT})  # one group's membership, in its own order
ITEM_KINDS = frozenset({APP, GJOINED, GLEFT})  # what a member's NEW items ask for
CONFIG_KINDS = frozenset({RETIRED, ADMITTED})  # changes of the hosts' configuration
HOSTS_ONLY_KINDS = frozenset({RETIRED, ADMITTED, GENESIS})  # never relayed to a cell
NO_GSEQ_KINDS = frozenset({CLEANUP, RETIRED, ADMITTED, GENESIS})  # no multicast
RECORD_KINDS = frozenset({APP, JOINED, LEFT, EXPELLED, CLEANUP, RETIRED, ADMITTED, GENESIS,
                          GJOINED, GLEFT, NOOP})
MAX_GROUP_NAME = 200  # bytes of UTF-8 in a group's name

# Operators' requests (AdminRequest.op).
OP_SHOW = 0  # the host's view of the deployment
OP_RETIRE = 1
OP_READMIT = 2
ADMIN_OPS = frozenset({OP_SHOW, OP_RETIRE, OP_READMIT})


@dataclass(frozen=True, slots=True)
class Record:
    """One decision of the coordinator, at log position ``lsn``.

    ``gseq`` is the multicast's sequence number (0 for CLEANUP, RETIRED, ADMITTED):
    one order for the whole deployment, every group's records in it.
    ``mid`` is the sender (APP, NOOP) or the member concerned (JOINED, LEFT, EXPELLED,
    CLEANUP, GJOINED, GLEFT); for RETIRED and ADMITTED, ``mid.node`` is the host
    concerned. ``nseq`` is the sender's NEW number (seeds/001 3.1), ``app_seq`` the
    sender's application message number (the trace ``mid``); an EXPELLED record
    carries the last ``nseq`` and ``app_seq`` sequenced from the member. ``prememb``
    is the number of membership changes immediately before this multicast
    (seeds/001 4.3). ``group`` names the group of an APP, GJOINED, GLEFT or NOOP
    record; ``gpos`` is the number of the group's messages (APP records) up to this
    record, so an APP record's ``gpos`` is its place in its group (1, 2, 3, ...). A
    JOINED record's ``body`` lists the groups the member joins with it (msgpack).
    """

    lsn: int
    gseq: int
    kind: int
    mid: MemberId
    nseq: int = 0
    app_seq: int = 0
    prememb: int = 0
    body: bytes = b""
    group: str = ""
    gpos: int = 0


@dataclass(frozen=True, slots=True)
class CellInfo:
    """Where a host's cell is: its multicast channel and its uplink address."""

    host: str
    cell: str
    uplink: str
    load: int = 0


# --------------------------------------------------------------------- cell downlink
@dataclass(frozen=True, slots=True)
class Beacon:
    """Every T_B seconds (seeds/001 2.4). ``high``: highest gseq relayed in the cell.
    ``sequence``: the id of the hosts' sequence (its GENESIS record; 0 while the
    gateway holds none): a member of another sequence is no member any more."""

    host: str
    high: int
    uplink: str
    master: str
    directory: tuple[CellInfo, ...] = ()
    sequence: int = 0


@dataclass(frozen=True, slots=True)
class Normals:
    """NORMAL multicasts broadcast in the cell, in gseq order (a batch)."""

    host: str
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Transfer:
    """TRANSFER copies for one member (seeds/001 figure 5 lines 26-31)."""

    host: str
    dest: MemberId
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Ack:
    """ack(m) of seeds/001 (A2): the gateway took responsibility for frame ``rseq``."""

    host: str
    node: str
    rseq: int


@dataclass(frozen=True, slots=True)
class Move:
    """Load balancing (seeds/004 5.5): ``node`` should attach to ``target``."""

    host: str
    node: str
    target: CellInfo


@dataclass(frozen=True, slots=True)
class HistoryReply:
    """The answer to :class:`HistoryReq` ``req`` of member ``dest``: every record of
    the groups asked for with ``lo <= gseq <= hi`` that the answering host holds, the
    oldest first (a part of the range asked for: the member asks on from there).
    ``floor`` is the lowest ``gseq`` that host holds: below it, retention dropped
    the records (or that host never held them). ``members``: the members of the
    first group asked for, at the host's commit point (at most 1,024 computers)."""

    host: str
    dest: MemberId
    req: int
    lo: int
    hi: int
    floor: int
    records: tuple[Record, ...]
    members: tuple[str, ...] = ()


# --------------------------------------------------------------------- cell uplink
@dataclass(frozen=True, slots=True)
class Hello:
    """Greeting in answer to a beacon, and heartbeat (seeds/001 2.4; seeds/004 4.5).

    ``mid`` is set from the moment the computer asks to join ("I am a group
    member and mid is my member identifier"); ``mystable`` is a cumulative
    acknowledgement the gateway turns into STABINFO.
    """

    node: str
    host: str
    mid: MemberId | None
    mystable: int
    member: bool = False  # has delivered its own "has joined"


@dataclass(frozen=True, slots=True)
class NotMember:
    """The gateway's replica shows ``mid`` is no longer a member (expelled or cleaned
    up): it must stop acting as one and join again."""

    host: str
    mid: MemberId


@dataclass(frozen=True, slots=True)
class NewItem:
    """One NEW of a member: a message for ``group`` (``kind`` APP), or a request to
    join or leave ``group`` (GJOINED, GLEFT), numbered with its messages so that the
    coordinator takes them in the order the member made them."""

    nseq: int
    app_seq: int
    body: bytes
    group: str = ""
    kind: int = APP


@dataclass(frozen=True, slots=True)
class JoinReq:
    """Join the deployment, and at the same position the ``groups`` named."""

    node: str
    host: str
    rseq: int
    mid: MemberId
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NewReq:
    """One or more NEW messages of one member, consecutive ``nseq`` (one frame)."""

    node: str
    host: str
    rseq: int
    mid: MemberId
    items: tuple[NewItem, ...]


@dataclass(frozen=True, slots=True)
class LeaveReq:
    node: str
    host: str
    rseq: int
    mid: MemberId


@dataclass(frozen=True, slots=True)
class LeaveOkReq:
    node: str
    host: str
    rseq: int
    mid: MemberId


@dataclass(frozen=True, slots=True)
class NackReq:
    """``<NACK, s1, s2, mid>``: delivered up to s1, missed (s1, s2) (seeds/001 3.2)."""

    node: str
    host: str
    rseq: int
    mid: MemberId
    s1: int
    s2: int


@dataclass(frozen=True, slots=True)
class HistoryReq:
    """A member asks its gateway for the records of ``groups`` with ``lo <= gseq <=
    hi`` from the hosts' log (docs/infra.md, "History"): the oldest first, or with
    ``newest`` the newest first. ``req`` numbers the member's requests; the answer
    carries it back. Sent again until answered, never through the reliable uplink."""

    node: str
    host: str
    mid: MemberId
    req: int
    groups: tuple[str, ...]
    lo: int
    hi: int
    newest: bool = False


MemberRequest = JoinReq | NewReq | LeaveReq | LeaveOkReq
UplinkMessage = Hello | JoinReq | NewReq | LeaveReq | LeaveOkReq | NackReq | HistoryReq
DownlinkMessage = Beacon | Normals | Transfer | Ack | Move | NotMember | HistoryReply


# --------------------------------------------------------------------- backbone
@dataclass(frozen=True, slots=True)
class Status:
    """Periodic status update (seeds/004 4.2, 4.5, 5.2); also an election's status.

    ``eid`` is set when sent as part of election ``eid`` (seeds/004 5.1 step 2).
    """

    host: str
    incarnation: int
    address: str
    port: int
    cell: str
    uplink: str
    load: int
    local_m: tuple[MemberId, ...]
    master: str
    epoch: Epoch
    log_epoch: Epoch
    commit: int
    high: int
    eid: Epoch | None = None


@dataclass(frozen=True, slots=True)
class ElectStart:
    eid: Epoch


@dataclass(frozen=True, slots=True)
class Vote:
    eid: Epoch
    voter: str
    candidate: str


@dataclass(frozen=True, slots=True)
class Takeover:
    """The elected master announces itself and asks for every host's log.

    ``low`` is the lowest position the master's log holds: hosts also send the
    committed records they still hold below it (a 4.1 gateway that freed its tables
    may win, yet members may still need those copies)."""

    epoch: Epoch
    master: str
    commit: int
    low: int = 0


@dataclass(frozen=True, slots=True)
class TakeoverReject:
    epoch: Epoch
    host: str
    promised: Epoch


@dataclass(frozen=True, slots=True)
class Row:
    """One member's entry in the coordinator's tables (seeds/001 3.1 first/last/recv)."""

    mid: MemberId
    first: int
    last: int
    recv: int
    member: bool
    app_seq: int = 0  # the app_seq of NEW ``recv``


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One group in the coordinator's tables: its name, how many messages it has had
    (the ``gpos`` of its last APP record) and its members."""

    name: str
    count: int
    members: tuple[MemberId, ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The replicated tables after applying every record up to ``lsn`` (``groups`` in
    the order the tables made them)."""

    lsn: int
    gseq: int
    last_app_gseq: int
    rows: tuple[Row, ...]
    mcache: tuple[MemberId, ...]
    retired: tuple[str, ...] = ()  # hosts retired for good (docs/infra.md, "Retiring")
    config_lsn: int = 0  # the record that last changed ``retired``
    sequence: int = 0  # the id of the sequence (its GENESIS record; 0: none yet)
    groups: tuple[GroupRow, ...] = ()


@dataclass(frozen=True, slots=True)
class StateReply:
    """A host's answer to :class:`Takeover`: its log after ``base`` (and a snapshot
    at ``base`` when it can no longer give the records the master asked from)."""

    epoch: Epoch
    host: str
    log_epoch: Epoch
    commit: int
    high: int
    snapshot: Snapshot | None
    records: tuple[Record, ...]
    older: tuple[Record, ...] = ()  # committed records below the master's ``low``


@dataclass(frozen=True, slots=True)
class Forward:
    """A member's request relayed by gateway ``host`` to the coordinator (A4)."""

    host: str
    fseq: int
    request: MemberRequest


@dataclass(frozen=True, slots=True)
class FwdAck:
    """The coordinator processed forward ``fseq``; its effect is in the log up to ``upto``."""

    epoch: Epoch
    fseq: int
    upto: int


@dataclass(frozen=True, slots=True)
class StabInfo:
    """``<STABINFO, s, mid>`` for several members at once."""

    host: str
    pairs: tuple[tuple[MemberId, int], ...]


@dataclass(frozen=True, slots=True)
class Subscribe:
    host: str


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    host: str


@dataclass(frozen=True, slots=True)
class Fetch:
    """A gateway asks the coordinator's norm-buffer for multicasts [lo, hi]."""

    host: str
    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class Fetched:
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Replicate:
    """New records from the coordinator, in log order."""

    epoch: Epoch
    commit: int
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Sync:
    """Replace everything after ``base`` by ``records`` (takeover, catch-up, SUBSCOK)."""

    epoch: Epoch
    commit: int
    base: int
    snapshot: Snapshot | None
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Accepted:
    """A host holds the coordinator's log up to ``high`` in ``epoch``; ``gap``: it
    received records that did not follow on and needs them from ``high + 1``."""

    epoch: Epoch
    host: str
    high: int
    gap: bool = False


@dataclass(frozen=True, slots=True)
class Commit:
    """Records up to ``commit`` are committed; multicasts up to ``stable`` are stable.

    ``replicas`` (4.1 only): the hosts that hold the log whether subscribed or not; a
    host outside it with no members frees its tables (seeds/001 figure 7 line 15).
    """

    epoch: Epoch
    commit: int
    stable: int
    replicas: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reroute:
    """The master asks a host to move ``count`` members to ``target`` (seeds/004 5.5)."""

    epoch: Epoch
    count: int
    target: CellInfo


@dataclass(frozen=True, slots=True)
class AdminRequest:
    """An operator's command line asks a host (``op``: OP_SHOW, OP_RETIRE, OP_READMIT).

    ``client`` names the command line's connection; in a keyed deployment it is the
    sealing sender, so the operator holds the deployment key."""

    client: str
    request: int
    op: int
    target: str


@dataclass(frozen=True, slots=True)
class Reconfig:
    """Host ``host`` passes an operator's retire/readmit on to the master."""

    host: str
    client: str
    request: int
    op: int
    target: str


@dataclass(frozen=True, slots=True)
class AdminResult:
    """The answer to an operator's request: ``code`` "ok" or an error code
    (:mod:`m2mc.infra.reconfig`), a one-line ``text`` (JSON for OP_SHOW), and the log
    position of the change (0 if none)."""

    host: str
    client: str
    request: int
    code: str
    text: str
    lsn: int = 0


@dataclass(frozen=True, slots=True)
class RetiredNotice:
    """The master tells ``target``, whose status it refused, that it was retired at
    log position ``lsn``: it stops (docs/infra.md, "Retiring a host")."""

    host: str
    target: str
    lsn: int


@dataclass(frozen=True, slots=True)
class Recover:
    """A host without state asks the others where the deployment stands before it
    takes part in anything (docs/infra.md, "Hosts without a data directory"); only
    answers that echo ``nonce`` count, so none predates the question."""

    host: str
    nonce: int


@dataclass(frozen=True, slots=True)
class RecoverReply:
    """A host's answer to :class:`Recover`: the newest epoch it knows (at least its
    promise), whether it holds no state at all (``pristine``), and its committed
    configuration (the retired hosts, changed last at ``config_lsn``)."""

    host: str
    nonce: int
    epoch: Epoch
    pristine: bool
    retired: tuple[str, ...] = ()
    config_lsn: int = 0


@dataclass(frozen=True, slots=True)
class HistoryAsk:
    """Gateway ``host`` passes a member's :class:`HistoryReq` to the master, whose log
    reaches further back than its own (docs/infra.md, "History")."""

    host: str
    node: str
    mid: MemberId
    req: int
    groups: tuple[str, ...]
    lo: int
    hi: int
    newest: bool = False


@dataclass(frozen=True, slots=True)
class HistoryAnswer:
    """The master's answer to :class:`HistoryAsk`, for the gateway that asked to relay to
    computer ``node`` as a :class:`HistoryReply` (same fields)."""

    host: str
    node: str
    dest: MemberId
    req: int
    lo: int
    hi: int
    floor: int
    records: tuple[Record, ...]
    members: tuple[str, ...] = ()


BackboneMessage = (Status | ElectStart | Vote | Takeover | TakeoverReject | StateReply
                   | Forward | FwdAck | StabInfo | Subscribe | Unsubscribe | Fetch | Fetched
                   | Replicate | Sync | Accepted | Commit | Reroute | AdminRequest | Reconfig
                   | AdminResult | RetiredNotice | Recover | RecoverReply | HistoryAsk
                   | HistoryAnswer)
