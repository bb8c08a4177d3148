"""Switch-off and power-on of a member (seeds/001 4.2, last paragraph), sans-IO.

The seed saves ``mystable`` and ``mynew`` before a mobile computer is switched off
and, at power-on, initialises the member as in 3.3 with those two values. We keep
more, and keep it all the time rather than only at a planned switch-off, so that a
crash (``kill -9``, a flat battery) is a switch-off too (docs/decisions.md):

* the membership: its join-id, phase, ``mystable``, ``mynew``, up to which ``nseq``
  the member saw its own NEWs sequenced, its groups (with the place of the last
  message delivered in each) and, during a catch-up after a return
  (:mod:`m2mc.infra.member_history`), what is still to read and which of its own
  messages it saw sequenced under the old join-id;
* the message numbering (the last ``app_seq`` used: ids are ``node:app_seq``);
* every own item not yet seen in the total order (``nseq``, ``app_seq``, body, group
  and kind: a message, or joining or leaving a group), so that a NEW the
  coordinator may be waiting for can be sent again after power-on (it numbers a
  member's NEWs without gaps: a lost one would block the rest).

The core never commits: each change goes into a save
(:meth:`~m2mc.infra.member.MemberCore.take_save`, a :class:`MemberCommit`) that the
driver commits to a :class:`MemberStore` before the frames and events it took from
the core leave (runtime/driver.py), so nothing outside the process ever sees a
message id, a NEW or a delivery the store does not hold. This module holds the
port, what is saved, and the checks of what is read back: :func:`decode_saved`
refuses unusable numbering with :class:`~m2mc.errors.SavedStateError` (starting
afresh could reuse message ids) and turns an unusable membership into a fresh join
with the reason in ``problem``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from m2mc.errors import SavedStateError
from m2mc.infra import messages as msg

FORMAT_VERSION = 1
PHASES = ("idle", "joining", "member", "leaving", "closing", "left")
RESUMABLE = frozenset(("member", "leaving", "closing"))  # phases taken up at power-on
_JOIN_ID_LIMIT = 1 << 32


@dataclass(frozen=True, slots=True)
class StoredMember:
    """What a :class:`MemberStore` holds, exactly as read back (checked by
    :func:`decode_saved`; any field may be damaged)."""

    pid: str
    app_seq: object  # the last message number used
    membership: str | None  # JSON text written by encode_membership
    # (app_seq, nseq, body, group, kind) rows (group "" and kind 0 in older files)
    pending: tuple[tuple[object, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class MemberCommit:
    """One atomic save: the scalars, the change in pending own messages, and the
    trace lines this save makes true (kept with it: runtime/tracing.py)."""

    pid: str
    app_seq: int
    membership: str
    put: tuple[msg.NewItem, ...] = ()  # own messages added (or renumbered by a join)
    drop: tuple[int, ...] = ()  # app_seqs of own messages seen in the total order
    trace_batch: str | None = None


class MemberStore(Protocol):
    """Where a member's durable state lives (a file in the runtime, memory in tests)."""

    def load(self) -> StoredMember | None:
        """What the last commit left, or None when nothing was ever saved."""
        ...

    def commit(self, c: MemberCommit) -> None:
        """Apply ``c`` atomically and durably (against a process crash)."""
        ...


@dataclass(frozen=True, slots=True)
class SavedMember:
    """The state a member takes up at power-on (checked)."""

    node: str
    app_seq: int
    group: str = "infra"
    phase: str = "idle"
    join_id: int | None = None
    mystable: int = 0
    mynew: int = 0
    confirmed: int = 0
    leave_requested: bool = False
    pending: tuple[msg.NewItem, ...] = ()
    problem: str = ""  # why the saved membership could not be used ("": it could)
    sequence: int = 0  # the hosts' sequence it belongs to (0: unknown, saved before ids)
    groups: tuple[tuple[str, int], ...] = ()  # our groups, each with its last gpos
    catchup: tuple[int, int] | None = None  # a catch-up under way: positions still to read
    resume_sequenced: tuple[int, ...] = ()  # ... our app_seqs it saw sequenced
    resume_upto: int = 0  # ... all of ours up to this app_seq were
    resume_from: int | None = None  # joining again after an expulsion: delivered up to here

    @property
    def resumable(self) -> bool:
        return self.phase in RESUMABLE and self.join_id is not None and not self.problem


def encode_membership(*, group: str, phase: str, join_id: int | None, mystable: int,
                      mynew: int, confirmed: int, leave_requested: bool,
                      sequence: int = 0, groups: dict[str, int] | None = None,
                      catchup: tuple[int, int] | None = None,
                      resume_sequenced: tuple[int, ...] = (), resume_upto: int = 0,
                      resume_from: int | None = None) -> str:
    d: dict[str, Any] = {"v": FORMAT_VERSION, "group": group, "phase": phase,
                         "join_id": join_id, "mystable": mystable, "mynew": mynew,
                         "confirmed": confirmed, "leave": leave_requested, "sequence": sequence,
                         "groups": groups or {}}
    if resume_from is not None:
        d["resume"] = resume_from
    if catchup is not None:
        d["catchup"] = {"lo": catchup[0], "hi": catchup[1], "seq": list(resume_sequenced),
                        "upto": resume_upto}
    return json.dumps(d, separators=(",", ":"), sort_keys=True)


def _int(value: object, low: int = 0) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        return None
    return value


def _pending(rows: Iterable[tuple[object, ...]], group: str) -> tuple[list[msg.NewItem], str]:
    """The pending items; a row of an older file (no group, kind) is a message to the
    saved membership's group. A row whose body is None (its bytes, kept beside the
    log, did not survive an operating-system crash: m2mc.infra_runtime.member_store)
    is left out and makes a problem: the others then go with a fresh join, since the
    coordinator would wait for the missing NEW forever."""
    items: list[msg.NewItem] = []
    lost = 0
    for row in rows:
        if len(row) == 3:
            row = (*row, "", msg.APP)
        if len(row) != 5:
            return [], f"a pending message is unreadable: {row!r:.80}"
        a, n, body, g, k = row
        if body is None and _int(a, 1) is not None:
            lost += 1
            continue
        app_seq, nseq, kind = _int(a, 1), _int(n, 1), _int(k)
        if app_seq is None or nseq is None or not isinstance(body, bytes | bytearray) \
                or not isinstance(g, str) or kind not in msg.ITEM_KINDS:
            return [], f"a pending message is unreadable: {row!r:.80}"
        items.append(msg.NewItem(nseq, app_seq, bytes(body), g or group, kind))
    items.sort(key=lambda i: i.app_seq)
    return items, f"the bytes of {lost} pending message(s) were lost" if lost else ""


def decode_saved(stored: StoredMember) -> SavedMember:
    """Check what a store read back. Unusable numbering raises SavedStateError; an
    unusable membership gives a SavedMember in phase ``idle`` with ``problem`` set
    (the member joins afresh, and its pending messages go with the new join)."""
    app_seq = _int(stored.app_seq)
    if app_seq is None:
        raise SavedStateError(f"the saved message numbering is unreadable "
                              f"({stored.app_seq!r:.40}): starting afresh under pid "
                              f"{stored.pid!r} could reuse message ids")
    fields_, why = _membership(stored.membership)
    saved_group = fields_.get("group")
    saved_group = saved_group if isinstance(saved_group, str) and saved_group else "infra"
    items, problem = _pending(stored.pending, saved_group)
    if items:
        app_seq = max(app_seq, items[-1].app_seq)  # never below an id that was used
    problem = problem or why
    if not problem:
        problem = _consistency(fields_, items)
    if problem:  # a fresh join, with the own messages renumbered in sending order
        renumbered = tuple(msg.NewItem(k, i.app_seq, i.body, i.group, i.kind)
                           for k, i in enumerate(items, 1))
        return SavedMember(stored.pid, app_seq, saved_group, pending=renumbered,
                           problem=problem)
    groups = fields_.get("groups")
    if groups is None:  # a file of one group per deployment: its group (count unknown)
        groups = {fields_["group"]: -1} if fields_["phase"] in RESUMABLE else {}
    cu = fields_.get("catchup")
    return SavedMember(stored.pid, app_seq, fields_["group"], fields_["phase"],
                       fields_["join_id"], fields_["mystable"], fields_["mynew"],
                       fields_["confirmed"], fields_["leave"], tuple(items),
                       sequence=fields_.get("sequence", 0),
                       groups=tuple(groups.items()),
                       catchup=None if cu is None else (cu["lo"], cu["hi"]),
                       resume_sequenced=() if cu is None else tuple(cu["seq"]),
                       resume_upto=0 if cu is None else cu["upto"],
                       resume_from=fields_.get("resume"))


def _membership(text: str | None) -> tuple[dict[str, Any], str]:
    if text is None:
        return {}, "no saved membership"
    try:
        d = json.loads(text)
    except (ValueError, TypeError):
        return {}, "the saved membership is not JSON"
    if not isinstance(d, dict):
        return {}, "the saved membership is not a JSON object"
    if d.get("v") != FORMAT_VERSION:
        return d, f"the saved membership has format {d.get('v')!r}, not {FORMAT_VERSION}"
    if not isinstance(d.get("group"), str) or d.get("phase") not in PHASES \
            or not isinstance(d.get("leave"), bool):
        return d, "the saved membership has a bad group, phase or leave flag"
    for key in ("mystable", "mynew", "confirmed"):
        if _int(d.get(key)) is None:
            return d, f"the saved membership has a bad {key}: {d.get(key)!r:.40}"
    if _int(d.get("sequence", 0)) is None:  # (absent in files saved before sequence ids)
        return d, f"the saved membership has a bad sequence: {d.get('sequence')!r:.40}"
    if "join_id" not in d:
        return d, "the saved membership has no join-id entry"
    groups = d.get("groups", {})
    if not isinstance(groups, dict) or not all(
            isinstance(g, str) and g and _int(p, -1) is not None for g, p in groups.items()):
        return d, "the saved membership has bad groups"
    if "resume" in d and _int(d["resume"]) is None:
        return d, "the saved membership has a bad resume point"
    cu = d.get("catchup")
    if cu is not None and not (isinstance(cu, dict) and _int(cu.get("lo"), 1) is not None
                               and _int(cu.get("hi")) is not None
                               and _int(cu.get("upto")) is not None
                               and isinstance(cu.get("seq"), list)
                               and all(_int(a, 1) is not None for a in cu["seq"])):
        return d, "the saved membership has a bad catch-up"
    jid = d["join_id"]
    if jid is not None and (_int(jid) is None or jid >= _JOIN_ID_LIMIT):
        return d, f"the saved membership has a bad join-id: {jid!r:.40}"
    return d, ""


def _consistency(d: dict[str, Any], items: list[msg.NewItem]) -> str:
    if d["phase"] in RESUMABLE and d["join_id"] is None:
        return f"the saved membership is {d['phase']} without a join-id"
    if d["confirmed"] > d["mynew"]:
        return "the saved membership confirms more NEWs than it sent"
    nseqs = [i.nseq for i in items]
    if nseqs != sorted(set(nseqs)):
        return "the saved pending messages are not numbered in sending order"
    if items and (nseqs[0] <= d["confirmed"] or nseqs[-1] > d["mynew"]):
        return "the saved pending messages do not fit the saved numbering"
    return ""


@dataclass
class MemoryMemberStore:
    """A :class:`MemberStore` in memory: what survives a simulated crash of the core
    (tests). ``commits`` counts commits; fields may be damaged on purpose."""

    pid: str = ""
    app_seq: object = None
    membership: str | None = None
    pending: dict[object, tuple[object, ...]] = field(default_factory=dict)
    trace_batch: str | None = None
    commits: int = 0

    def load(self) -> StoredMember | None:
        if self.commits == 0 and self.app_seq is None:
            return None
        return StoredMember(self.pid, self.app_seq, self.membership,
                            tuple(self.pending.values()))

    def commit(self, c: MemberCommit) -> None:
        self.pid = c.pid
        self.app_seq = c.app_seq
        self.membership = c.membership
        for a in c.drop:
            self.pending.pop(a, None)
        for item in c.put:
            self.pending[item.app_seq] = (item.app_seq, item.nseq, item.body, item.group,
                                          item.kind)
        if c.trace_batch is not None:
            self.trace_batch = c.trace_batch
        self.commits += 1
