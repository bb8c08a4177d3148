"""The dissector tests: helpers importable (pytest runs with --import-mode=importlib),
and the namespace lab of tests/netns for the tests that capture a real run."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
for path in (HERE, HERE.parent / "netns"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from netns_lab import Lab, LabUnavailable  # noqa: E402 - found through the path above


@pytest.fixture
def lab() -> Iterator[Lab]:
    """Four namespaces on a switch (tests/netns/netns_lab.py); skipped where they cannot
    be made (not root, no iproute2)."""
    made = Lab(size=4)
    try:
        made.create()
    except LabUnavailable as exc:
        made.destroy()
        pytest.skip(f"network namespace tests skipped: {exc}")
    try:
        yield made
    finally:
        made.destroy()
