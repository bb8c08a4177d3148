"""The record format of :class:`~m2mc.store.sqlite.SqliteStore`'s chunk rows.

A chunk row holds the records of one group and sender with seqnos ``lo..hi``
(``hi - lo < CHUNK_SPAN``), packed with msgpack (m2mc.native.packb). A record is
``[write number, seq, ppid, pseq, payload, gseq, vclock, delivered]``; a *stub*
(``ids`` retention mode) is the same record with payload ``None``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

from m2mc.native import packb
from m2mc.ordering import ROOT, Message, MessageId

CHUNK_SPAN = 256  # seqnos one chunk row may cover (hi - lo < CHUNK_SPAN)

Record = list[Any]
# Writes waiting for the next flush: gid -> pid -> seq -> record, already grouped the
# way chunks are (per group and sender).
Pending = dict[str, dict[str, dict[int, Record]]]
SEQ_OF = operator.itemgetter(1)


def message_of(pid: str, r: Record, late: tuple[int | None, int | None] | None = None
               ) -> tuple[Message, bool]:
    _, seq, ppid, pseq, payload, gseq, vclock, delivered = r
    if late is not None:
        if late[0] is not None:
            delivered = bool(late[0])
        if late[1] is not None:
            gseq = late[1]
    parent = MessageId(ppid, pseq) if ppid else ROOT
    return (Message(MessageId(pid, seq), parent, b"" if payload is None else bytes(payload),
                    vclock, gseq), bool(delivered))


ChunkRow = tuple[str, str, int, int, bytes, float | None, int | None, int | None]


def chunk_rows(pending: Pending, t: float | None, references: bool = False
               ) -> Iterator[ChunkRow]:
    """Rows for the chunks table: per group and sender, runs of at most CHUNK_SPAN
    seqnos, stamped ``t``. ``references``: some payloads may be references to
    payload files (each row then says what it refers to: :func:`referenced`)."""
    for gid, by_pid in pending.items():
        for pid, by_seq in by_pid.items():
            records = list(by_seq.values())
            records.sort(key=SEQ_OF)
            for run in runs(records):
                ext, seg = referenced(run) if references else (None, None)
                yield gid, pid, run[0][1], run[-1][1], packb(run), t, ext, seg


def referenced(records: list[Record]) -> tuple[int | None, int | None]:
    """The bytes that ``records`` keep in payload files (m2mc.store.payload_files),
    and the lowest segment they refer to (segment 0: none, a payload known lost);
    (None, None) when they refer to none."""
    ext = 0
    seg: int | None = None
    found = False
    for r in records:
        ref = r[4]
        if type(ref) is list:
            found = True
            ext += ref[2]
            if ref[0] > 0 and (seg is None or ref[0] < seg):
                seg = ref[0]
    return (ext, seg) if found else (None, None)


def runs(records: list[Record]) -> Iterator[list[Record]]:
    """``records`` (sorted by seq) cut into runs spanning fewer than CHUNK_SPAN seqnos."""
    if records[-1][1] - records[0][1] < CHUNK_SPAN:  # the usual flush: one run
        yield records
        return
    run: list[Record] = []
    for r in records:
        if run and r[1] - run[0][1] >= CHUNK_SPAN:
            yield run
            run = []
        run.append(r)
    if run:
        yield run
