"""Progress on the user's terminal: one line per pipeline stage, and a bar for sweeps.

Spark's own console progress is switched off (session.py); these lines are
the pipeline's. Each finished stage prints one line with its duration. On a
terminal the running stage is shown too, with Spark's task count.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO, TypeVar

from pyspark import SparkContext

T = TypeVar("T")


class Progress:
    """Prints ``[label] stage ... done in 1.2s`` lines on ``stream`` (stderr)."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True,
                 sc: SparkContext | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.sc = sc
        self.tty = enabled and self.stream.isatty()
        self._name: str | None = None
        self._start = time.monotonic()
        self._t0 = self._start
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.timings: dict[str, float] = {}
        self._lock = threading.Lock()

    def stage(self, name: str) -> None:
        """Finish the current stage (if any) and start ``name``."""
        self._finish()
        self._name = name
        self._start = time.monotonic()
        if self.sc is not None:  # names the jobs in Spark's UI and event log
            self.sc.setJobDescription(f"m2mc {self.label}: {name}")
        if not self.enabled:
            return
        if self.tty:
            self._write(f"\r[{self.label}] {name} ...")
            self._start_ticker()

    def done(self, message: str = "") -> None:
        self._finish()
        if self.enabled:
            total = time.monotonic() - self._t0
            self._write(f"[{self.label}] done in {total:.1f}s{': ' + message if message else ''}\n")

    def item(self, name: str, seconds: float | None, message: str = "") -> None:
        """Report a part of the current stage that finished (parts may run in threads);
        ``seconds`` None: parts computed together, no time of their own."""
        with self._lock:
            if seconds is not None:
                self.timings[name] = round(seconds, 3)
            if self.enabled:
                erase = "\r\x1b[2K" if self.tty else ""
                extra = f": {message}" if message else ""
                took = f" ({seconds:.1f}s)" if seconds is not None else ""
                self._write(f"{erase}[{self.label}]   {name}{extra}{took}\n")

    def note(self, message: str) -> None:
        if self.enabled:
            self._write(f"{chr(13) if self.tty else ''}[{self.label}] {message}\n")

    def _finish(self) -> None:
        if self._name is None:
            return
        self._stop_ticker()
        took = time.monotonic() - self._start
        self.timings[self._name] = round(took, 3)
        if self.enabled:
            erase = "\r\x1b[2K" if self.tty else ""
            self._write(f"{erase}[{self.label}] {self._name} ({took:.1f}s)\n")
        self._name = None

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _start_ticker(self) -> None:
        if self.sc is None:
            return
        self._stop.clear()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None

    def _tick(self) -> None:
        assert self.sc is not None
        tracker = self.sc.statusTracker()
        while not self._stop.wait(0.5):
            done = total = 0
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            took = time.monotonic() - self._start
            tasks = f" tasks {done}/{total}" if total else ""
            self._write(f"\r\x1b[2K[{self.label}] {self._name} ...{tasks} {took:.0f}s")


def bar(done: int, total: int, width: int = 30) -> str:
    filled = width * done // total if total else width
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


def run_with_bar(sc: SparkContext, job_group: str, action: Callable[[], T], total: int,
                 label: str, stream: TextIO | None = None, enabled: bool = True) -> T:
    """Run ``action`` (a Spark action over ``total`` tasks) and draw a bar as tasks finish."""
    out = stream if stream is not None else sys.stderr
    result: list[T] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            sc.setJobGroup(job_group, label)
            result.append(action())
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    tracker = sc.statusTracker()
    last = -1
    tty = out.isatty()
    while worker.is_alive():
        worker.join(0.5)
        done = 0
        for job_id in tracker.getJobIdsForGroup(job_group):
            job = tracker.getJobInfo(job_id)
            for sid in (job.stageIds if job else []):
                info = tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
        done = min(done, total)
        step = max(1, total // 10)
        if enabled and done != last and (tty or done == total or done - last >= step):
            out.write(("\r" if tty else "") + f"[{label}] {bar(done, total)}"
                      + ("" if tty else "\n"))
            out.flush()
            last = done
    if enabled and (tty or last != total):
        out.write(("\r" if tty else "") + f"[{label}] {bar(total, total)}\n")
        out.flush()
    if error:
        raise error[0]
    return result[0]
