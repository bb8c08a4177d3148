"""A class-data archive (Java's AppCDS) for the embedded Spark JVM: faster start-ups.

Spark's driver loads some 15,000 classes from 280 jars before the first job; a
JVM spends seconds finding, parsing and verifying them. Java can save the loaded
classes in an archive at exit (``-XX:ArchiveClassesAtExit``) and map it at the
next start (``-XX:SharedArchiveFile``). Measured on a 4,656-event trace: start-up
12 s -> 5 s and the JVM's CPU time 25 s -> 19.5 s (the machine busy; docs/pipeline.md).

The archive lives in ``$M2MC_CACHE_DIR`` (default ``$XDG_CACHE_HOME/m2mc`` or
``~/.cache/m2mc``), named after everything it depends on (the Java binary, the
PySpark version and its jars), so another Java or PySpark makes a new one. It is
made by a run that ends its JVM itself (``m2mc analyze`` / ``m2mc sweep``, through
:func:`finish`): the JVM writes it to a temporary name while it exits, and it is
renamed only once complete, so a start never sees half an archive. A JVM that
cannot use an archive (another Java, a changed class path) says so in spark.log
and starts without it. ``M2MC_SPARK_CLASS_CACHE=0`` turns all of this off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_STALE_S = 3600.0  # a temporary archive this old belongs to a run that died: removed
_EXIT_WAIT_S = 180.0  # writing the archive takes seconds; a busy machine, more


@dataclass(frozen=True, slots=True)
class ClassCache:
    """The JVM options for this start, and what :func:`finish` must do afterwards."""

    options: str                 # "-XX:SharedArchiveFile=..." or "-XX:ArchiveClassesAtExit=..."
    archive: Path
    writing: Path | None = None  # set when this JVM writes a new archive at exit


def enabled() -> bool:
    return os.environ.get("M2MC_SPARK_CLASS_CACHE", "1").lower() not in ("0", "false", "no")


def cache_dir() -> Path:
    explicit = os.environ.get("M2MC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "m2mc"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_name(spark_home: Path) -> str | None:
    """A name that changes with the Java binary, the PySpark version and its jars."""
    java = _java()
    jars = spark_home / "jars"
    if java is None or not jars.is_dir():
        return None
    h = hashlib.sha256()
    st = java.stat()
    h.update(f"{java}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for jar in sorted(jars.iterdir()):
        h.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    return f"spark-classes-{h.hexdigest()[:16]}.jsa"


def plan(spark_home: Path, may_write: bool) -> ClassCache | None:
    """Use the archive if there is one; else, when ``may_write``, have this JVM write it.

    None: no archive and none to write (or the cache is off or unusable).
    """
    if not enabled():
        return None
    name = archive_name(spark_home)
    if name is None:
        return None
    where = cache_dir()
    archive = where / name
    if archive.is_file():
        return ClassCache(f"-XX:SharedArchiveFile={archive}", archive)
    if not may_write:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True)
        _remove_stale(where)
    except OSError:
        return None
    writing = where / f"{name}.{os.getpid()}.tmp"
    # -Xlog:cds=off: the dump names every class it cannot keep (thousands of lines).
    return ClassCache(f"-XX:ArchiveClassesAtExit={writing} -Xlog:cds=off", archive, writing)


def _remove_stale(where: Path) -> None:
    now = time.time()
    for tmp in where.glob("spark-classes-*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > _STALE_S:
                tmp.unlink()


def finish(cache: ClassCache | None, gateway: Any) -> None:
    """After the session stopped: when this JVM writes an archive, end the JVM (it exits
    when its stdin closes, as when Python exits), wait for the archive, keep it."""
    if cache is None or cache.writing is None or gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=_EXIT_WAIT_S)
    except Exception:  # still writing after minutes: leave it; the stale sweep removes it
        return
    with contextlib.suppress(OSError):
        if proc.returncode == 0 and cache.writing.is_file() and cache.writing.stat().st_size:
            cache.writing.replace(cache.archive)
        else:
            cache.writing.unlink()
