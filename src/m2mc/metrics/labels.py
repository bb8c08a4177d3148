"""The bound on ``group`` label values (docs/operations.md, "Label cardinality").

Each distinct label value is a time series the scraper stores for weeks, so the
values an outsider can influence must be bounded. Group ids are such values (anyone
may name a group, and an application may join what it discovers). A node gives the
first :data:`~m2mc.metrics.catalogue.MAX_GROUP_LABELS` groups it is in a label of
their own and keeps it while they last; the rest share ``group="(other)"``, whose
counters are the sums of theirs. A group that goes away frees its place for the next.
"""

from __future__ import annotations

from collections.abc import Iterable

from m2mc.metrics.catalogue import MAX_GROUP_LABELS, OTHER_GROUPS


class GroupLabels:
    def __init__(self, limit: int = MAX_GROUP_LABELS) -> None:
        if limit < 0:
            raise ValueError("the group label limit must be >= 0")
        self.limit = limit
        self._own: dict[str, None] = {}  # insertion-ordered: first come, first labelled

    def assign(self, gids: Iterable[str]) -> dict[str, str]:
        """The label value of each group present now (call once per scrape)."""
        present = dict.fromkeys(gids)
        for gone in [gid for gid in self._own if gid not in present]:
            del self._own[gone]
        for gid in present:
            if gid not in self._own and len(self._own) < self.limit:
                self._own[gid] = None
        return {gid: gid if gid in self._own else OTHER_GROUPS for gid in present}
