"""Fixtures for tests on a real network made of namespaces (tests/netns/netns_lab.py).

These tests need root and iproute2 (and nftables for loss and partitions);
elsewhere they skip with the reason. All their traffic stays inside the
namespaces the lab creates.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # netns_lab, netns_processes

from netns_lab import Lab, LabUnavailable
from netns_processes import child_environment

pytestmark = pytest.mark.netns


@pytest.fixture
def lab() -> Iterator[Lab]:
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


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    """Environment for m2mc child processes: no user config, no M2MC_* variables."""
    return child_environment(tmp_path)
