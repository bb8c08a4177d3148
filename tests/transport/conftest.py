"""Fixtures for transport tests: unique multicast groups/ports, isolated child processes."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from m2mc.demo.tour import Child, random_multicast_url

sys.path.insert(0, str(Path(__file__).parent))  # gated_channel.py, for the test modules

SpawnM2MC = Callable[..., Child]


@pytest.fixture
def mcast_url() -> str:
    """A loopback multicast channel no other test uses (random group and port)."""
    return random_multicast_url(random.Random())


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    """Environment for child processes: no user config files, no M2MC_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    env["HOME"] = str(tmp_path)
    env["XDG_CONFIG_HOME"] = str(tmp_path / ".config")
    return env


@pytest.fixture
def m2mc(isolated_env: dict[str, str], tmp_path: Path) -> Iterator[SpawnM2MC]:
    """Start ``python -m m2mc.cli ARGS`` in a clean directory; every child is killed at the end."""
    children: list[Child] = []

    def spawn(*args: str, stdin: bytes | None = None, script: str | None = None) -> Child:
        child = Child(args, stdin=stdin, env=isolated_env, cwd=tmp_path, script=script)
        children.append(child)
        return child

    try:
        yield spawn
    finally:
        for child in children:
            child.kill()
