"""m2mc.store.row_segments, as the infrastructure stores use it: rows come and go in
any order, and at every point each live row's value reads back intact, and no segment
older than the oldest one a live row refers to is left on the disk (a Hypothesis state
machine, with small segments so that they roll over often)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from m2mc.store.payload_files import segment_of
from m2mc.store.row_segments import RowSegments

SEGMENT = 4096


class Rows(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.directory = Path(self.tmp.name) / "t-payloads"
        self.segments = RowSegments(self.directory, defer_sync=False,
                                    segment_bytes=SEGMENT)
        self.live: dict[int, tuple[bytes, str]] = {}  # key -> (value, ref)
        self.next_key = 1

    def teardown(self) -> None:
        self.segments.close(sync=False)
        self.tmp.cleanup()

    @rule(size=st.integers(1, 3000), count=st.integers(1, 4))
    def write_rows(self, size: int, count: int) -> None:
        """A commit of new rows (written, then tracked once committed)."""
        written = []
        for _ in range(count):
            value = os.urandom(size)
            written.append((self.next_key, value, self.segments.write(value)))
            self.next_key += 1
        for key, value, ref in written:
            self.segments.track(key, ref)
            self.live[key] = (value, ref)
        self.segments.release(now=True)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def drop_rows(self, data: st.DataObject) -> None:
        """A commit that deletes some rows (the oldest, or any: a truncation, a drop)."""
        keys = data.draw(st.lists(st.sampled_from(sorted(self.live)), min_size=1,
                                  unique=True))
        for key in keys:
            self.segments.track(key, None)
            del self.live[key]
        self.segments.release(now=True)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), size=st.integers(1, 3000))
    def replace_row(self, data: st.DataObject, size: int) -> None:
        """A row written again with another value (a backfill)."""
        key = data.draw(st.sampled_from(sorted(self.live)))
        value = os.urandom(size)
        ref = self.segments.write(value)
        self.segments.track(key, ref)
        self.live[key] = (value, ref)
        self.segments.release(now=True)

    @rule()
    def empty_table(self) -> None:
        self.segments.untrack_all()
        self.live.clear()
        self.segments.release(now=True)

    @invariant()
    def every_live_value_reads_back(self) -> None:
        for value, ref in self.live.values():
            assert self.segments.read(ref) == value

    @invariant()
    def no_segment_older_than_the_oldest_referred_to_is_left(self) -> None:
        on_disk = sorted(int(p.stem) for p in self.directory.glob("*.seg"))
        if not on_disk:
            return
        referred = {segment_of(ref) for _, ref in self.live.values()}
        oldest = min((s for s in referred if s is not None), default=on_disk[-1])
        assert on_disk[0] == oldest or (not referred and len(on_disk) == 1)


TestRowSegments = Rows.TestCase
TestRowSegments.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
