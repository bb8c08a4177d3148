"""The tour ``m2mc demo`` runs (docs/interfaces.md §3): its processes, context, results
and steps.

The tour is :data:`STEPS`, a list of ``(name, function)``; each function takes
the :class:`DemoContext` and returns a :class:`StepResult`. It starts with the M2MP
steps (multicast, daemon); later features add theirs with :func:`add_step`
(:mod:`m2mc.demo.steps` does, for the full tour). Every step runs real ``m2mc``
processes (:class:`Child`) on loopback (multicast groups in 239.255.0.0/16 with iface
127.0.0.1 and TTL 1) and checks what they printed. The command that runs it is
:mod:`m2mc.cli.demo`; this module, below both, is what the steps import.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

# ------------------------------------------------------------ child processes


class Child:
    """An ``m2mc`` subprocess whose output lines are collected by reader threads.

    Wait for output with deadlines (:meth:`wait_stderr`, :meth:`finish`), never with
    fixed sleeps. Use as a context manager: the process is killed on exit if alive.
    """

    def __init__(self, args: Sequence[str], *, stdin: bytes | None = None,
                 env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                 module: str = "m2mc.cli", script: str | None = None) -> None:
        command = [sys.executable, script] if script else [sys.executable, "-m", module]
        self.args = [*command, *args]
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        if stdin is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()

    def _pump(self, pipe: IO[bytes] | None, lines: list[str]) -> None:
        assert pipe is not None
        for raw in iter(pipe.readline, b""):
            with self._changed:
                lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_stderr(self, needle: str, timeout: float) -> str:
        """The first stderr line containing ``needle``; TimeoutError if none in time."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.stderr:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._alive_readers()):
                    raise TimeoutError(f"{' '.join(self.args[2:])}: no {needle!r} on stderr; "
                                       f"stderr: {' | '.join(self.stderr[-5:])}")
                self._changed.wait(min(left, 0.2))

    def _alive_readers(self) -> bool:
        return any(reader.is_alive() for reader in self._readers)

    def finish(self, timeout: float) -> int:
        """Wait for exit (killing it after ``timeout``); return the exit status."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"{' '.join(self.args[2:])} did not exit within {timeout}s") \
                from None
        for reader in self._readers:
            reader.join(timeout)
        return status

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout if line.startswith("{")]

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def random_multicast_url(rng: random.Random) -> str:
    """A loopback multicast channel on a random group and port (so runs never collide)."""
    group = f"239.255.{rng.randrange(1, 255)}.{rng.randrange(1, 255)}"
    return f"udp-multicast://{group}:{rng.randrange(20000, 60000)}?iface=127.0.0.1&ttl=1"


def daemon_port(child: Child, timeout: float) -> int:
    """Wait for a ``m2mc daemon`` child to listen; return its port."""
    line = child.wait_stderr("listening on", timeout)
    return int(line.split("127.0.0.1:", 1)[1].split(",", 1)[0])


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------- steps


@dataclass(frozen=True, slots=True)
class StepResult:
    name: str
    ok: bool
    summary: str
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class DemoContext:
    out: Path | None
    rng: random.Random
    timeout: float = 15.0  # seconds any one wait may take before the step fails
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    results: list[StepResult] = field(default_factory=list)

    def m2mc(self, *args: str, stdin: bytes | None = None) -> Child:
        return Child(args, stdin=stdin, env=self.env)


DemoStep = Callable[[DemoContext], StepResult]


def _received(child: Child) -> set[str]:
    return {str(row["sha256"]) for row in child.json_lines()}


def step_multicast(ctx: DemoContext) -> StepResult:
    """Two listeners and a sender on loopback multicast; one listener filters by prefix."""
    url = random_multicast_url(ctx.rng)
    messages = [b"hello, many-to-many", b"chat:" + ctx.rng.randbytes(3000),
                ctx.rng.randbytes(64 * 1024)]
    chat = [m for m in messages if m.startswith(b"chat:")]
    with ctx.m2mc("listen", "--channel", url, "--count", str(len(messages)),
                  "--timeout", str(ctx.timeout)) as everything, \
         ctx.m2mc("listen", "--channel", url, "--prefix", b"chat:".hex(),
                  "--count", str(len(chat)), "--timeout", str(ctx.timeout)) as filtered:
        for child in (everything, filtered):
            child.wait_stderr("listening on", ctx.timeout)
        for message in messages:
            with ctx.m2mc("send", "--channel", url, stdin=message) as sender:
                if sender.finish(ctx.timeout) != 0:
                    return StepResult("multicast", False, f"m2mc send failed: {sender.stderr}")
        everything.finish(ctx.timeout)
        filtered.finish(ctx.timeout)
        got_all, got_chat = _received(everything), _received(filtered)
    want_all, want_chat = {sha256(m) for m in messages}, {sha256(m) for m in chat}
    ok = got_all == want_all and got_chat == want_chat
    return StepResult(
        "multicast", ok,
        f"{len(got_all)}/{len(want_all)} messages (up to 64 KiB) reached the listener, "
        f"{len(got_chat)}/{len(want_chat)} the 'chat:' filter, over {url.split('?')[0]}",
        details={"channel": url, "sent": sorted(want_all), "listener": sorted(got_all),
                 "filtered_listener": sorted(got_chat)})


def step_daemon(ctx: DemoContext) -> StepResult:
    """The daemon serves two local processes and bridges them to the network."""
    network = random_multicast_url(ctx.rng)
    with ctx.m2mc("daemon", "--port", "0", "--channel", network) as daemon:
        local = f"daemon://127.0.0.1:{daemon_port(daemon, ctx.timeout)}"
        from_local, from_network = b"from a local process", b"from another device"
        with ctx.m2mc("listen", "--channel", local, "--count", "2",
                      "--timeout", str(ctx.timeout)) as local_listener, \
             ctx.m2mc("listen", "--channel", network, "--count", "2",
                      "--timeout", str(ctx.timeout)) as device:
            for child in (local_listener, device):
                child.wait_stderr("listening on", ctx.timeout)
            for channel, message in ((local, from_local), (network, from_network)):
                with ctx.m2mc("send", "--channel", channel, stdin=message) as sender:
                    if sender.finish(ctx.timeout) != 0:
                        return StepResult("daemon", False, f"m2mc send failed: {sender.stderr}")
            local_listener.finish(ctx.timeout)
            device.finish(ctx.timeout)
            got_local, got_device = _received(local_listener), _received(device)
    want = {sha256(from_local), sha256(from_network)}
    ok = got_local == want and got_device == want
    return StepResult(
        "daemon", ok,
        f"through the daemon: the local listener got {len(got_local)}/2 "
        f"(local sender + network), the network device got {len(got_device)}/2",
        details={"daemon_channel": local, "network": network, "sent": sorted(want),
                 "local_listener": sorted(got_local), "network_device": sorted(got_device)})


STEPS: list[tuple[str, DemoStep]] = [
    ("multicast", step_multicast),
    ("daemon", step_daemon),
]


def add_step(name: str, step: DemoStep) -> None:
    """Append a step to the tour (later features call this when imported)."""
    STEPS.append((name, step))


def run_steps(ctx: DemoContext, steps: Sequence[tuple[str, DemoStep]] | None = None,
              echo: Callable[[str], None] = print) -> list[StepResult]:
    for name, step in (STEPS if steps is None else steps):
        started = time.monotonic()
        try:
            result = step(ctx)
        except TimeoutError as exc:
            result = StepResult(name, False, f"timed out: {exc}")
        result = StepResult(result.name, result.ok, result.summary,
                            round(time.monotonic() - started, 2), result.details)
        ctx.results.append(result)
        echo(f"[{'ok' if result.ok else 'FAIL'}] {name} ({result.seconds:.1f}s): "
             f"{result.summary}")
    return ctx.results
