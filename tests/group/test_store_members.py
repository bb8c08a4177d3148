"""A group's membership in the SQLite store: a row per entry, a save writing the
entries that changed, those the caller names or else those it finds (m2mc.store.sqlite).
Whatever the saves, a reopened store loads each group as last saved; a file of an
earlier version (the list in JSON in the ``groups`` row) loads as it was saved and
takes new saves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.group.codec import MemberEntry
from m2mc.group.membership import Membership
from m2mc.kinds import GjlpState, Order
from m2mc.store import GroupRow
from m2mc.store.sqlite import SqliteStore

PIDS = ("a", "b", "c", "d", "e", "f")


def loaded(path: Path) -> dict[str, tuple[GroupRow, dict[str, MemberEntry]]]:
    store = SqliteStore(path)
    try:
        return {r.gid: (r, {e.pid: e for e in r.members}) for r in store.load_groups()}
    finally:
        store.close()


entry = st.builds(MemberEntry, st.sampled_from(PIDS), st.integers(0, 5), st.booleans())
step = st.tuples(st.sampled_from(("g", "h")), st.lists(entry, max_size=4),
                 st.booleans(),  # a row built from a fresh Membership (every object new)
                 st.booleans(),  # commit after it
                 st.integers(1, 3),  # my_version
                 st.booleans())  # the save names the entries that changed


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=12), st.booleans())
def test_a_reopened_store_has_each_group_as_last_saved(
        tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, list[MemberEntry], bool, bool, int, bool]],
        reopen_between: bool) -> None:
    path = tmp_path_factory.mktemp("members") / "s.sqlite3"
    memberships: dict[str, Membership] = {}
    last: dict[str, GroupRow] = {}
    store = SqliteStore(path)
    for i, (gid, entries, fresh, commit, version, named) in enumerate(steps):
        first = gid not in memberships
        membership = memberships.setdefault(gid, Membership(100))
        changed = membership.merge(entries)
        if fresh:  # new objects, the same entries: a save may write them again
            membership = memberships[gid] = Membership(
                100, [MemberEntry(e.pid, e.version, e.joined) for e in membership.entries()])
        row = GroupRow(gid, "d", Order.SB, GjlpState.MEMBER, version, list(membership.entries()))
        # (as a node does: after its first save of the group, saves that name the changes)
        store.save_group(row, changed if named and not first else None)
        last[gid] = row
        if commit:
            store.commit()
        if reopen_between and i % 4 == 3:
            store.close()
            store = SqliteStore(path)
            for r in store.load_groups():  # a restarted node's memberships: the loaded objects
                memberships[r.gid] = Membership(100, r.members)
    store.close()
    found = loaded(path)
    assert set(found) == set(last)
    for gid, row in last.items():
        got, members = found[gid]
        assert (got.desc, got.order, got.state, got.my_version) == (
            row.desc, row.order, row.state, row.my_version)
        assert members == {e.pid: e for e in row.members}


def test_a_row_with_fewer_entries_replaces_the_list(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    a, b = MemberEntry("a", 1, True), MemberEntry("b", 1, True)
    store.save_group(GroupRow("g", "", Order.SB, GjlpState.MEMBER, 1, [a, b]))
    store.save_group(GroupRow("g", "", Order.SB, GjlpState.MEMBER, 1, [b]))
    store.close()
    assert loaded(path)["g"][1] == {"b": b}


def test_a_file_of_an_earlier_version_loads_and_takes_new_saves(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    SqliteStore(path).close()
    db = sqlite3.connect(path)  # what an earlier version wrote: the list in JSON, no rows
    db.execute("INSERT INTO groups VALUES ('g', 'old', 'sb', 'member', 3, ?)",
               (json.dumps([["a", 1, True], ["b", 2, False]]),))
    db.commit()
    db.close()
    found = loaded(path)["g"]
    assert found[0].my_version == 3
    assert found[1] == {"a": MemberEntry("a", 1, True), "b": MemberEntry("b", 2, False)}
    store = SqliteStore(path)
    membership = Membership(100, store.load_groups()[0].members)
    membership.apply(MemberEntry("c", 1, True))
    store.save_group(GroupRow("g", "old", Order.SB, GjlpState.MEMBER, 3,
                              list(membership.entries())))
    store.close()
    assert loaded(path)["g"][1] == {"a": MemberEntry("a", 1, True),
                                    "b": MemberEntry("b", 2, False),
                                    "c": MemberEntry("c", 1, True)}
