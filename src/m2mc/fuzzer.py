"""A small coverage-guided mutational fuzzer, for where atheris is not installed.

bench/fuzz.py prefers atheris (libFuzzer). This engine is the fallback, and the
one the test suite runs for a few seconds: it is deterministic for a given
``random.Random`` seed and needs nothing outside the standard library.

Coverage is the set of (code object, previous line, line) edges executed in
the project's own modules, collected with ``sys.settrace``; an input that adds
an edge joins the corpus (bounded by ``max_corpus``). Mutations are the usual
byte-level ones plus msgpack length markers, since most of our decoders read
msgpack. Every outcome is counted by name: ``ok`` or the error type raised.
An error outside the target's ``expected`` types is a crash: recorded (the
first ``max_crashes`` distinct ones, with input and traceback) and fuzzing goes on.
"""

from __future__ import annotations

import random
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from m2mc.fuzz_targets import FuzzTarget

__all__ = ["Crash", "FuzzReport", "MutationalFuzzer", "mutate"]

_INTERESTING_8 = (0, 1, 0x7F, 0x80, 0xFF)
_INTERESTING_32 = (0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF)
# msgpack markers with large lengths: array16/32, map16/32, bin8/16/32, str8/16/32, ext.
_MSGPACK_MARKERS = (0xDC, 0xDD, 0xDE, 0xDF, 0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB, 0xC7, 0xD4,
                    0xC1, 0xCB, 0xCF, 0xD3)
_SOURCE = Path(__file__).resolve().parents[1]  # src/
_TRACED_ROOTS = (str(_SOURCE / "m2mc") + "/", str(_SOURCE / "m2mc_chat") + "/")


@dataclass(frozen=True, slots=True)
class Crash:
    target: str
    data: bytes
    error: str
    traceback: str


@dataclass(slots=True)
class FuzzReport:
    target: str
    inputs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    corpus: int = 0
    edges: int = 0
    crashes: list[Crash] = field(default_factory=list)
    crash_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "outcomes": dict(sorted(self.outcomes.items())),
                "corpus": self.corpus, "edges": self.edges, "crashes": self.crash_count,
                "crash_examples": [{"error": c.error, "input_hex": c.data.hex()[:512]}
                                   for c in self.crashes]}


def mutate(data: bytes, rng: random.Random, corpus: list[bytes], max_len: int) -> bytes:
    """One to four stacked mutations of ``data``."""
    buf = bytearray(data)
    for _ in range(1 + rng.getrandbits(2)):
        op = rng.randrange(11)
        n = len(buf)
        if op == 0 and n:
            buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.getrandbits(8)
        elif op == 2 and n:
            buf[rng.randrange(n)] = rng.choice(_INTERESTING_8)
        elif op == 3 and n >= 4:
            at = rng.randrange(n - 3)
            size = rng.choice((2, 4))
            value = rng.choice(_INTERESTING_32) & ((1 << (8 * size)) - 1)
            buf[at:at + size] = value.to_bytes(size, "big")
        elif op == 4:
            at = rng.randrange(n + 1)
            buf[at:at] = rng.randbytes(rng.randrange(1, 17))
        elif op == 5 and n:
            at = rng.randrange(n)
            del buf[at:at + rng.randrange(1, 17)]
        elif op == 6 and n:
            at = rng.randrange(n)
            chunk = buf[at:at + rng.randrange(1, 65)]
            to = rng.randrange(n + 1)
            buf[to:to] = chunk
        elif op == 7 and corpus:
            other = rng.choice(corpus)
            buf = buf[:rng.randrange(n + 1)] + other[rng.randrange(len(other) + 1):]
        elif op == 8 and n:
            del buf[rng.randrange(n):]
        elif op == 9:
            at = rng.randrange(n + 1)
            buf[at:at] = bytes([rng.choice(_MSGPACK_MARKERS)]) + b"\xff" * rng.randrange(5)
        else:
            buf += rng.randbytes(rng.randrange(1, 33))
    return bytes(buf[:max_len])


class _Coverage:
    """Edges (code, previous line, line) executed in the project's own source files."""

    def __init__(self) -> None:
        self.edges: set[tuple[CodeType, int, int]] = set()
        self._wanted: dict[str, bool] = {}

    def _want(self, filename: str) -> bool:
        wanted = self._wanted.get(filename)
        if wanted is None:
            wanted = filename.startswith(_TRACED_ROOTS) and filename != __file__
            self._wanted[filename] = wanted
        return wanted

    def run(self, call: Callable[[], object]) -> tuple[int, BaseException | None]:
        """Run ``call`` under tracing; new edges found and the exception it raised."""
        before = len(self.edges)
        edges = self.edges
        want = self._want

        def on_call(frame: FrameType, event: str, arg: object) -> Any:
            code = frame.f_code
            if not want(code.co_filename):
                return None
            last = [frame.f_lineno]

            def on_line(frame: FrameType, event: str, arg: object) -> Any:
                if event == "line":
                    line = frame.f_lineno
                    edges.add((code, last[0], line))
                    last[0] = line
                return on_line

            return on_line

        error: BaseException | None = None
        sys.settrace(on_call)
        try:
            call()
        except Exception as exc:
            error = exc
        finally:
            sys.settrace(None)
        return len(self.edges) - before, error


class MutationalFuzzer:
    def __init__(self, target: FuzzTarget, rng: random.Random, *, max_len: int = 4096,
                 max_corpus: int = 1024, max_crashes: int = 5, coverage: bool = True) -> None:
        self.target = target
        self.rng = rng
        self.max_len = min(max_len, target.max_len or max_len)
        self.max_corpus = max_corpus
        self.max_crashes = max_crashes
        self.coverage = _Coverage() if coverage else None
        self.corpus: list[bytes] = [s[:self.max_len] for s in target.seeds()] or [b""]
        self.report = FuzzReport(target.name)

    def run(self, inputs: int) -> FuzzReport:
        """Execute ``inputs`` inputs (the seeds first), return the running report."""
        report = self.report
        seeds = list(self.corpus)
        for i in range(inputs):
            data = seeds[i] if i < len(seeds) else mutate(
                self.rng.choice(self.corpus), self.rng, self.corpus, self.max_len)
            self.one(data)
        report.corpus = len(self.corpus)
        report.edges = len(self.coverage.edges) if self.coverage else 0
        return report

    def one(self, data: bytes) -> None:
        target = self.target
        report = self.report
        report.inputs += 1
        if self.coverage is not None:
            new_edges, error = self.coverage.run(lambda: target.run(data))
            if new_edges and len(self.corpus) < self.max_corpus:
                self.corpus.append(data)
        else:
            error = None
            try:
                target.run(data)
            except Exception as exc:
                error = exc
        if error is None:
            outcome = "ok"
        else:
            outcome = type(error).__name__
            if not isinstance(error, target.expected):
                self._crash(data, error)
                outcome = "CRASH " + outcome
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1

    def _crash(self, data: bytes, error: BaseException) -> None:
        report = self.report
        report.crash_count += 1
        text = f"{type(error).__name__}: {error}"
        if len(report.crashes) < self.max_crashes and all(c.error != text
                                                          for c in report.crashes):
            trace = "".join(traceback.format_exception(error))
            report.crashes.append(Crash(self.target.name, data, text, trace))
