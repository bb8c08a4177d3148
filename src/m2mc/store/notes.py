"""What :class:`~m2mc.store.sqlite.SqliteStore` learns about a message after its
record was written: the ``notes`` table (docs/group.md section 8).

A record is written once (its chunk row); a held message delivered later, or a
total-order position committed after the record was written, is a *note*. Under
total order that is every message: each is written when it arrives and stamped and
delivered a round trip later. A row per note (the ``late`` table of earlier
versions: an upsert into two b-trees per message delivered) cost a member more than
the chunk rows of the records themselves, so notes are written as records are, in
rows of many: the notes of one flush, per group and sender, in runs of at most
``NOTE_SPAN`` seqnos and ``GSEQ_SPAN`` positions, each row
``(gid, pid, lo, hi, glo, ghi, wn, data)`` with ``data`` the msgpack list
``[seq, delivered, gseq, seq, delivered, gseq, ...]`` (``delivered`` 1 or None,
``gseq`` a position or None) and ``glo..ghi`` the positions it names (NULL if
none), indexed by seqno and by position.

Rows are appended, never rewritten on the hot path. A note applies to a record
whose write number is at most the note's ``wn`` (the store's write number when
the note was flushed): a record written again later (a new write number) is not
changed by what was noted about the one before, as the earlier layout deleted its
``late`` row then. Of the notes that apply, in the order they were written, a
``delivered`` marks the message delivered and the last ``gseq`` is its position
(what the earlier layout's upserts kept). Retention removes the notes of the
messages it evicts (their rows rewritten in place). A file of the earlier layout
has its ``late`` rows converted into notes when opened.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import msgpack

from m2mc.native import packb
from m2mc.store.chunks import CHUNK_SPAN

__all__ = ["GSEQ_SPAN", "NOTE_SPAN", "SCHEMA", "Noted", "PendingNotes", "convert_late",
           "drop_notes", "fold", "notes_by_gseq", "notes_for",
           "notes_of_group", "write_notes"]

NOTE_SPAN = CHUNK_SPAN  # seqnos one notes row may cover (hi - lo < NOTE_SPAN)
GSEQ_SPAN = 4096  # positions one notes row may cover (ghi - glo < GSEQ_SPAN)

SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    gid TEXT NOT NULL, pid TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
    glo INTEGER, ghi INTEGER, wn INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS notes_by_seq ON notes (gid, pid, lo);
CREATE INDEX IF NOT EXISTS notes_by_gseq ON notes (gid, glo) WHERE glo IS NOT NULL;
"""
_INSERT = "INSERT INTO notes (gid, pid, lo, hi, glo, ghi, wn, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

# Notes waiting for the next flush: gid -> pid -> seq -> [delivered, gseq] (later
# notes of the same message merged in: delivered stays set, the last gseq wins).
PendingNotes = dict[str, dict[str, dict[int, list[Any]]]]
# The notes of one message as read: [(wn, delivered, gseq), ...] in the order written.
Noted = list[tuple[int, Any, Any]]


def _rows(gid: str, pid: str, notes: dict[int, list[Any]], wn: int
          ) -> Iterator[tuple[str, str, int, int, int | None, int | None, int, bytes]]:
    run: list[Any] = []
    lo = glo = ghi = 0
    for seq in sorted(notes):
        delivered, gseq = notes[seq]
        if run and (seq - lo >= NOTE_SPAN or (gseq is not None and glo and (
                gseq - glo >= GSEQ_SPAN or ghi - gseq >= GSEQ_SPAN))):
            yield gid, pid, lo, run[-3], glo or None, ghi or None, wn, packb(run)
            run = []
        if not run:
            lo, glo, ghi = seq, 0, 0
        if gseq is not None:
            if not glo:
                glo = ghi = gseq
            elif gseq < glo:
                glo = gseq
            elif gseq > ghi:
                ghi = gseq
        run += (seq, delivered, gseq)
    if run:
        yield gid, pid, lo, run[-3], glo or None, ghi or None, wn, packb(run)


def write_notes(db: sqlite3.Connection, pending: PendingNotes, wn: int) -> None:
    """Append the pending notes, noted at write number ``wn``."""
    db.executemany(_INSERT, [row for gid, by_pid in pending.items()
                             for pid, notes in by_pid.items()
                             for row in _rows(gid, pid, notes, wn)])


def _entries(data: bytes) -> Iterator[tuple[int, Any, Any]]:
    flat = msgpack.unpackb(data)
    return zip(flat[0::3], flat[1::3], flat[2::3], strict=True)


def notes_for(db: sqlite3.Connection, gid: str, pid: str, lo: int, hi: int
              ) -> dict[int, Noted]:
    """The notes of ``pid``'s messages ``lo..hi``, per seqno."""
    out: dict[int, Noted] = {}
    for wn, data in db.execute(
            "SELECT wn, data FROM notes WHERE gid = ? AND pid = ? AND lo BETWEEN ? AND ? "
            "AND hi >= ? ORDER BY rowid", (gid, pid, lo - NOTE_SPAN + 1, hi, lo)):
        for seq, delivered, gseq in _entries(data):
            if lo <= seq <= hi:
                out.setdefault(seq, []).append((wn, delivered, gseq))
    return out


def notes_of_group(db: sqlite3.Connection, gid: str) -> dict[tuple[str, int], Noted]:
    """Every note of the group, per (pid, seq)."""
    out: dict[tuple[str, int], Noted] = {}
    for pid, wn, data in db.execute(
            "SELECT pid, wn, data FROM notes WHERE gid = ? ORDER BY rowid", (gid,)):
        for seq, delivered, gseq in _entries(data):
            out.setdefault((pid, seq), []).append((wn, delivered, gseq))
    return out


def fold(noted: Noted | None, written: int) -> tuple[int | None, int | None] | None:
    """What the notes say of a record of write number ``written``: (delivered,
    gseq), each None if no note that applies sets it; None if none applies."""
    if noted is None:
        return None
    delivered = gseq = None
    for wn, d, g in noted:
        if wn >= written:
            if d is not None:
                delivered = 1
            if g is not None:
                gseq = g
    return None if delivered is None and gseq is None else (delivered, gseq)


def notes_by_gseq(db: sqlite3.Connection, gid: str, lo: int, hi: int, limit: int
                  ) -> list[tuple[int, str, int]]:
    """(gseq, pid, seq) noted with a position in ``lo..hi``, by position, the first
    ``limit`` positions at least (a message noted at two positions, which a store
    does not see from the group layer, is named at both: the caller checks)."""
    found: list[tuple[int, str, int]] = []
    for glo, pid, data in db.execute(
            "SELECT glo, pid, data FROM notes WHERE gid = ? AND glo BETWEEN ? AND ? "
            "AND ghi >= ? ORDER BY glo, rowid", (gid, lo - GSEQ_SPAN + 1, hi, lo)):
        # Rows come by their lowest position: once ``limit`` positions below this
        # row's are found, no later row can name a lower one.
        if len(found) >= limit and glo > sorted(found)[limit - 1][0]:
            break
        found += [(gseq, pid, seq) for seq, _, gseq in _entries(data)
                  if gseq is not None and lo <= gseq <= hi]
    found.sort()
    return found


def drop_notes(db: sqlite3.Connection, gid: str, pid: str, seqs: set[int]) -> None:
    """Remove every note of ``pid``'s messages ``seqs`` (evicted): the rows that name
    one are rewritten in place (same rowid, so the order of notes is kept) or
    deleted."""
    lo, hi = min(seqs), max(seqs)
    rows = db.execute(
        "SELECT rowid, data FROM notes WHERE gid = ? AND pid = ? AND lo BETWEEN ? AND ? "
        "AND hi >= ?", (gid, pid, lo - NOTE_SPAN + 1, hi, lo)).fetchall()
    for rowid, data in rows:
        entries = list(_entries(data))
        kept = [e for e in entries if e[0] not in seqs]
        if len(kept) == len(entries):
            continue
        if not kept:
            db.execute("DELETE FROM notes WHERE rowid = ?", (rowid,))
            continue
        gseqs = [g for _, _, g in kept if g is not None]
        db.execute("UPDATE notes SET lo = ?, hi = ?, glo = ?, ghi = ?, data = ? "
                   "WHERE rowid = ?",
                   (kept[0][0], kept[-1][0], min(gseqs, default=None),
                    max(gseqs, default=None), packb([x for e in kept for x in e]), rowid))


def convert_late(db: sqlite3.Connection, wn: int) -> None:
    """A file of the earlier layout: its ``late`` rows become notes (at ``wn``, the
    store's write number: they apply to the records stored, as they did), and the
    table goes."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'late'").fetchone()
    if not exists:
        return
    pending: PendingNotes = {}
    for gid, pid, seq, delivered, gseq in db.execute(
            "SELECT gid, pid, seq, delivered, gseq FROM late"):
        pending.setdefault(gid, {}).setdefault(pid, {})[int(seq)] = [
            1 if delivered else None, None if gseq is None else int(gseq)]
    write_notes(db, pending, wn)
    db.execute("DROP TABLE late")
