"""Typed errors of the ordering cores."""

from __future__ import annotations

from m2mc.errors import UsageError

__all__ = ["MissingGseqError"]


class MissingGseqError(UsageError):
    """A message given to :class:`~m2mc.ordering.total.TotalOrder` has no ``gseq``:
    it must have its place in the total order first."""
