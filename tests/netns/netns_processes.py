"""Child processes for the namespace tests: start-up command, output collection, waits
and clean stops. Kept out of conftest.py so that test modules import it by its own
name (the suite has several conftest.py files; importing one by name is ambiguous)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

M2MC = [sys.executable, "-m", "m2mc.cli"]


def child_environment(home: Path) -> dict[str, str]:
    """Environment for m2mc child processes: no user config, no M2MC_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("M2MC_")}
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    # ... but the machine's caches: with a new HOME, every test's `m2mc analyze` wrote
    # the JVM's class-data archive anew (m2mc_pipeline.classcache), about 50 s each
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Lines:
    """Collects a child's output lines in a thread, so the test can poll without blocking."""

    def __init__(self, stream: IO[bytes] | None) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        for raw in stream:
            with self._lock:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def closed(self, timeout: float = 10) -> list[str]:
        """Every line, once the child closed its end (it has exited)."""
        self._thread.join(timeout)
        return self.snapshot()

    def has(self, text: str) -> Callable[[], bool]:
        """A condition for polling: some line so far contains ``text``."""
        return lambda: any(text in line for line in self.snapshot())


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30,
               detail: Callable[[], object] = lambda: "") -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} {detail()}")
        time.sleep(0.05)


def wait_all(lines: dict[str, Lines], text: Callable[[str], str], what: str,
             timeout: float = 180) -> None:
    """Wait until each child ``pid`` has printed a line containing ``text(pid)``."""
    wait_until(lambda: all(lines[pid].has(text(pid))() for pid in lines), what, timeout,
               lambda: {pid: lines[pid].snapshot()[-3:] for pid in lines})


Child = tuple["subprocess.Popen[bytes]", Lines, Lines]  # process, stdout, stderr


def stop_processes(nodes: dict[str, Child]) -> None:
    """SIGTERM every process still running, all at once, then wait for each."""
    for process, _, _ in nodes.values():
        if process.poll() is None:
            process.terminate()
    for process, _, _ in nodes.values():
        process.wait(timeout=30)


def stop_nodes(nodes: dict[str, Child]) -> dict[str, tuple[int | None, Any]]:
    """SIGTERM every node, wait, and collect (exit status, last stdout line as JSON)."""
    stop_processes(nodes)
    results: dict[str, tuple[int | None, Any]] = {}
    for pid, (process, out, _) in nodes.items():
        lines = out.closed()
        results[pid] = (process.returncode, json.loads(lines[-1]) if lines else None)
    return results


def active_master(trace: Path) -> str | None:
    """The host that last became the active coordinator, from the hosts' elect events."""
    best: tuple[float, str] | None = None
    for path in trace.glob("H*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            detail = json.loads(row.get("detail") or "{}")
            if row["event"] == "elect" and detail.get("phase") == "active" \
                    and (best is None or row["t"] > best[0]):
                best = (row["t"], row["node"])
    return best[1] if best else None
