"""The headless participant: ``m2mc chat --script FILE --transcript OUT.json``.

A script is a text file, one step per line. Blank lines and lines starting
with ``#`` are skipped; the rest of a line is the step's text, ``#`` included::

    # create a group and make it the current one
    create lunch
    # or: join a group by description (or gid), waiting until it is discovered
    join lunch
    # a new thread in the current group
    send Pizza or curry?
    # until the current group holds at least 2 messages
    wait_for 2
    # until at least 3 members (this one included) are present in the current group
    wait_members 3
    # answer the 1st message as shown on screen (every thread expanded)
    reply 1 Curry
    # until a group is discovered (by description or gid), without joining it
    wait_group news
    # until a file exists (a test or another program says "go")
    wait_file /tmp/go
    # seconds
    wait 0.5
    # leave the current group
    leave

The transcript is the thread tree each group ended with, children sorted by
mid, so the transcripts of every participant of a run compare equal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m2mc.errors import ConfigError, M2MCError, UsageError
from m2mc_chat.model import ThreadTree
from m2mc_chat.session import ChatSession

__all__ = ["Create", "Join", "Leave", "Reply", "ScriptError", "ScriptRunner", "Send", "Step",
           "Wait", "WaitFile", "WaitFor", "WaitGroup", "WaitMembers", "parse_script"]


class ScriptError(Exception):
    """A step could not complete (a wait ran out): the run found a problem, exit status 1."""


@dataclass(frozen=True, slots=True)
class Create:
    desc: str


@dataclass(frozen=True, slots=True)
class Join:
    target: str


@dataclass(frozen=True, slots=True)
class Send:
    text: str


@dataclass(frozen=True, slots=True)
class Reply:
    n: int
    text: str


@dataclass(frozen=True, slots=True)
class Wait:
    seconds: float


@dataclass(frozen=True, slots=True)
class WaitFor:
    count: int


@dataclass(frozen=True, slots=True)
class WaitMembers:
    count: int


@dataclass(frozen=True, slots=True)
class WaitGroup:
    target: str


@dataclass(frozen=True, slots=True)
class WaitFile:
    path: str


@dataclass(frozen=True, slots=True)
class Leave:
    pass


Step = Create | Join | Send | Reply | Wait | WaitFor | WaitMembers | WaitGroup | WaitFile | Leave
FILE_POLL = 0.05  # seconds between looks for a wait_file's file

MAX_WAIT = 3600.0


def parse_script(text: str, source: str = "script") -> list[Step]:
    """Parse a script; raises :class:`UsageError` naming the line on any mistake."""
    steps: list[Step] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        verb, _, rest = line.partition(" ")
        try:
            steps.append(_step(verb, rest.strip()))
        except UsageError as exc:
            raise UsageError(f"{source} line {number}: {exc}") from None
    return steps


def _step(verb: str, rest: str) -> Step:
    if verb in {"create", "join", "send"}:
        if not rest:
            raise UsageError(f"'{verb}' needs an argument")
        return Create(rest) if verb == "create" else Join(rest) if verb == "join" else Send(rest)
    if verb == "reply":
        n_text, _, text = rest.partition(" ")
        if not n_text.isdigit() or int(n_text) < 1 or not text.strip():
            raise UsageError("use 'reply N TEXT' with N >= 1, the message number on screen")
        return Reply(int(n_text), text.strip())
    if verb == "wait":
        try:
            seconds = float(rest)
        except ValueError:
            raise UsageError("use 'wait SECONDS'") from None
        if not 0 <= seconds <= MAX_WAIT:
            raise UsageError(f"wait between 0 and {MAX_WAIT:g} seconds")
        return Wait(seconds)
    if verb == "wait_for":
        if not rest.isdigit():
            raise UsageError("use 'wait_for COUNT', a number of messages")
        return WaitFor(int(rest))
    if verb == "wait_members":
        if not rest.isdigit():
            raise UsageError("use 'wait_members COUNT', a number of members present")
        return WaitMembers(int(rest))
    if verb in {"wait_group", "wait_file"}:
        if not rest:
            raise UsageError(f"use '{verb} {'NAME' if verb == 'wait_group' else 'PATH'}'")
        return WaitGroup(rest) if verb == "wait_group" else WaitFile(rest)
    if verb == "leave":
        if rest:
            raise UsageError("'leave' takes no argument (it leaves the current group)")
        return Leave()
    raise UsageError(f"unknown step {verb!r}; steps: create join send reply wait wait_for "
                     "wait_members wait_group wait_file leave")


@dataclass(slots=True)
class _Touched:
    desc: str
    tree: ThreadTree
    left: bool = False


@dataclass(slots=True)
class ScriptRunner:
    """Runs steps against a started :class:`ChatSession` whose events are being pumped."""

    session: ChatSession
    step_timeout: float = 30.0
    log: Callable[[str], None] = field(default=lambda _line: None)
    current: str | None = None
    touched: dict[str, _Touched] = field(default_factory=dict)

    async def run(self, steps: Sequence[Step]) -> None:
        for index, step in enumerate(steps, start=1):
            self.log(f"step {index}: {step}")
            await self.step(step)

    def _group(self) -> str:
        if self.current is None or self.current not in self.session.views:
            raise UsageError("no current group: 'create' or 'join' one first")
        return self.current

    def _track(self, gid: str) -> None:
        view = self.session.views[gid]
        self.touched[gid] = _Touched(desc=view.info.desc, tree=view.tree)
        self.current = gid

    async def step(self, step: Step) -> None:
        match step:
            case Create(desc=desc):
                info = await self.session.create_group(desc)
                self._track(info.gid)
            case Join(target=target):
                found = await self.session.wait_until(
                    lambda: self.session.find_group(target) is not None, self.step_timeout)
                group = self.session.find_group(target)
                if not found or group is None:
                    raise ScriptError(f"no group {target!r} discovered in {self.step_timeout:g} s")
                await self.session.join_group(group.gid)
                self._track(group.gid)
            case Send(text=text):
                await self.session.send(self._group(), text)
            case Reply(n=n, text=text):
                gid = self._group()
                tree = self.session.views[gid].tree
                try:
                    parent = tree.nth(n)
                except IndexError as exc:
                    raise ScriptError(str(exc)) from None
                await self.session.send(gid, text, reply_to=parent)
            case Wait(seconds=seconds):
                await asyncio.sleep(seconds)
            case WaitFor(count=count):
                tree = self.session.views[self._group()].tree
                if not await self.session.wait_until(lambda: len(tree) >= count,
                                                     self.step_timeout):
                    raise ScriptError(f"only {len(tree)} of {count} messages arrived "
                                      f"in {self.step_timeout:g} s")
            case WaitMembers(count=count):
                view = self.session.views[self._group()]

                def present() -> int:
                    return view.presence.count(self.session.clock())

                if not await self.session.wait_until(lambda: present() >= count,
                                                     self.step_timeout):
                    raise ScriptError(f"only {present()} of {count} members present "
                                      f"in {self.step_timeout:g} s")
            case WaitGroup(target=target):
                if not await self.session.wait_until(
                        lambda: self.session.find_group(target) is not None, self.step_timeout):
                    raise ScriptError(f"no group {target!r} discovered in {self.step_timeout:g} s")
            case WaitFile(path=path):
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.step_timeout
                while not Path(path).exists():
                    if loop.time() > deadline:
                        raise ScriptError(f"no file {path} within {self.step_timeout:g} s")
                    await asyncio.sleep(FILE_POLL)
            case Leave():
                gid = self._group()
                await self.session.leave_group(gid)
                self.touched[gid].left = True

    def transcript(self) -> dict[str, Any]:
        """Every group the script touched, with the thread tree it ended with."""
        groups = [{"gid": gid, "desc": t.desc, "left": t.left, "count": len(t.tree),
                   "tree": t.tree.transcript()}
                  for gid, t in sorted(self.touched.items())]
        last = self.touched.get(self.current) if self.current else None
        return {"node": self.session.node_id, "nick": self.session.nick,
                "group": self.current, "tree": last.tree.transcript() if last else [],
                "groups": groups}

    def write_transcript(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.transcript(), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")


async def run_script_file(session: ChatSession, script: Path, transcript: Path | None, *,
                          step_timeout: float = 30.0,
                          log: Callable[[str], None] = lambda _line: None,
                          report: Callable[[str], None] = lambda _line: None,
                          on_started: Callable[[], None] = lambda: None) -> int:
    """Start ``session``, run the script, write the transcript, close. Returns the exit status.

    0: every step completed. 1: a step timed out (``report`` gets one line; the
    transcript is written anyway, to show how far it got). A malformed script
    raises :class:`UsageError` before anything starts; ``on_started`` is called once
    the network is up (the command line saves a first run's chat.toml then). A
    network that cannot start raises :class:`ConfigError` (one line).
    """
    try:
        steps = parse_script(script.read_text(encoding="utf-8"), str(script))
    except OSError as exc:
        raise UsageError(f"cannot read script {script}: {exc.strerror}") from None
    runner = ScriptRunner(session, step_timeout=step_timeout, log=log)
    try:
        await session.start()
    except (OSError, M2MCError) as exc:
        await session.backend.close()
        raise ConfigError(f"cannot start the network: {' '.join(str(exc).split())}") from None
    on_started()
    pump = asyncio.create_task(session.run())
    status = 0
    try:
        await runner.run(steps)
    except ScriptError as exc:
        report(str(exc))
        status = 1
    finally:
        if transcript is not None:
            runner.write_transcript(transcript)
        await session.close()
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump
    return status
