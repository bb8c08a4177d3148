"""Find trace files under the input directories and load them as one DataFrame.

Inputs (docs/interfaces.md §4): ``*.jsonl`` (also ``*.jsonl.gz``) or ``*.parquet``
files anywhere under each directory, plus ``run.json`` describing the run.
Local directories are listed here; remote ones (``hdfs://``, ``s3a://``, ...)
are listed by Spark itself. Each directory that holds a ``run.json`` is a
*scope*: its trace files (and those below it, down to the next ``run.json``)
carry the scope's number, so run metadata (scenario, seed, parameters) can be
attached to the runs found in it without collecting any event.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyspark.sql.functions as F
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType

from m2mc.errors import ConfigError
from m2mc_pipeline.schema import COLUMNS, POS, TRACE_SCHEMA
from m2mc_pipeline.session import small_frame

_REMOTE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
SCOPE = "scope"
_ADAPTIVE_FROM = 256 << 20  # bytes of input
# Up to this many events (estimated before reading) a trace is small: the session is
# tuned for latency, not throughput (session.py's quick profile, _size_shuffles below).
QUICK_EVENTS = 50_000
# A JSON line of the simulator's traces is about 200 bytes; counting 100 errs towards
# "large", where the default profile is at worst a few seconds slower.
_JSONL_BYTES_PER_EVENT = 100
_GZIP_RATIO = 10
# (key, value for a small trace, value otherwise): code generation (_size_shuffles).
_CODEGEN = (("spark.sql.codegen.wholeStage", "false", "true"),
            ("spark.sql.codegen.factoryMode", "NO_CODEGEN", "FALLBACK"))


@dataclass(frozen=True, slots=True)
class Scope:
    """One directory with its run.json (``meta`` is empty when there is none)."""

    index: int
    path: str
    meta: dict[str, Any]
    jsonl: tuple[str, ...] = ()
    parquet: tuple[str, ...] = ()


@dataclass(slots=True)
class Loaded:
    """The loaded trace: every event (``events``, cached) and where it came from."""

    events: DataFrame
    scopes: list[Scope] = field(default_factory=list)
    input_bytes: int = 0
    events_estimate: int | None = None  # None: some input is remote (size unknown)


def is_remote(path: str) -> bool:
    return bool(_REMOTE.match(path)) and not path.startswith("file://")


def _local_path(path: str) -> Path:
    return Path(path[len("file://"):]) if path.startswith("file://") else Path(path)


def _is_trace_file(p: Path) -> bool:
    return p.name.endswith(_TRACE_SUFFIXES) and (p.is_file() or p.is_dir())


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON run description ({exc})") from exc
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: run.json must hold a JSON object")
    return meta


def discover_local(root: Path, first_index: int) -> list[Scope]:
    """Scopes under one local directory: trace files grouped by their nearest run.json."""
    if not root.exists():
        raise ConfigError(f"no such directory: {root}")
    if root.is_file():
        if not _is_trace_file(root):
            raise ConfigError(f"{root}: not a trace file (*.jsonl or *.parquet)")
        files = [root]
        base = root.parent
    else:
        base = root
        files = []
        # A directory named *.parquet (Spark's output) is one trace; do not descend into it.
        stack = [root]
        while stack:
            d = stack.pop()
            for child in sorted(d.iterdir()):
                if _is_trace_file(child):
                    files.append(child)
                elif child.is_dir():
                    stack.append(child)
    if not files:
        raise ConfigError(f"no trace files (*.jsonl, *.parquet) under {root}")
    files = _one_copy(files)
    grouped: dict[Path, list[Path]] = {}
    for f in sorted(files):
        scope_dir = _nearest_run_json(f.parent, base)
        grouped.setdefault(scope_dir, []).append(f)
    scopes = []
    for i, (scope_dir, group) in enumerate(sorted(grouped.items())):
        run_json = scope_dir / "run.json"
        meta = _read_meta(run_json) if run_json.is_file() else {}
        scopes.append(Scope(
            index=first_index + i, path=str(scope_dir), meta=meta,
            jsonl=tuple(str(f) for f in group if not f.name.endswith(".parquet")),
            parquet=tuple(str(f) for f in group if f.name.endswith(".parquet")),
        ))
    return scopes


def _stem(p: Path) -> Path:
    name = p.name
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix):
            return p.with_name(name[: -len(suffix)])
    return p


def _one_copy(files: list[Path]) -> list[Path]:
    """Trace writers may leave ``n0.jsonl`` and its Parquet copy ``n0.parquet`` side by
    side; the same events must be read once. The Parquet copy wins (typed, faster)."""
    parquet_stems = {_stem(f) for f in files if f.name.endswith(".parquet")}
    return [f for f in files if f.name.endswith(".parquet") or _stem(f) not in parquet_stems]


def _nearest_run_json(d: Path, base: Path) -> Path:
    cur = d
    while True:
        if (cur / "run.json").is_file():
            return cur
        if cur == base or cur.parent == cur:
            return base
        cur = cur.parent


def _size(paths: Sequence[str]) -> int:
    total = 0
    for p in paths:
        path = Path(p)
        if path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        else:
            total += path.stat().st_size
    return total


def _parquet_rows(path: Path) -> int:
    """Rows of a Parquet file (or Spark's directory of part files), from the footers."""
    import pyarrow.parquet as pq

    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    total = 0
    for f in files:
        try:
            total += pq.read_metadata(f).num_rows
        except (OSError, ValueError):  # not Parquet after all: Spark will say so
            total += _size([str(f)]) // _JSONL_BYTES_PER_EVENT
    return total


def estimate_events(scopes: Sequence[Scope]) -> int:
    """About how many events the local ``scopes`` hold, without reading them: Parquet
    footers' row counts, JSONL sizes (over-estimated)."""
    total = 0
    for sc in scopes:
        for f in sc.jsonl:
            factor = _GZIP_RATIO if f.endswith(".gz") else 1
            total += factor * _size([f]) // _JSONL_BYTES_PER_EVENT
        for f in sc.parquet:
            total += _parquet_rows(Path(f))
    return total


def _normalize(df: DataFrame) -> DataFrame:
    """Select the schema's columns with the schema's types; absent columns become null."""
    cols = []
    present = set(df.columns)
    for f in TRACE_SCHEMA.fields:
        c = F.col(f"`{f.name}`").cast(f.dataType) if f.name in present else F.lit(None).cast(
            f.dataType)
        cols.append(c.alias(f.name))
    return df.select(*cols)


def _read_jsonl(spark: SparkSession, paths: Sequence[str], recursive: bool = False) -> DataFrame:
    reader = spark.read.schema(TRACE_SCHEMA).option("mode", "PERMISSIVE")
    if recursive:  # a glob on file names (Hadoop's GlobFilter): both plain and gzipped
        reader = (reader.option("recursiveFileLookup", "true")
                  .option("pathGlobFilter", "*.{jsonl,jsonl.gz}"))
    return reader.json(list(paths))


def _read_parquet(spark: SparkSession, paths: Sequence[str], recursive: bool = False
                  ) -> DataFrame:
    reader = spark.read.option("mergeSchema", "true")
    if recursive:
        reader = reader.option("recursiveFileLookup", "true").option("pathGlobFilter",
                                                                     "*.parquet")
    try:
        return _normalize(reader.parquet(*paths))
    except AnalysisException as exc:
        raise ConfigError(f"cannot read Parquet trace {paths[0]}...: "
                          f"{str(exc).splitlines()[0]}") from exc


def _local_frame(spark: SparkSession, scopes: Sequence[Scope]) -> DataFrame:
    """All local trace files in one read per format, each row tagged with its scope.

    One read (not one per run) keeps planning cheap for sweeps of many runs. With
    several scopes, each row's file (``input_file_name``, in the form Spark lists
    it) is mapped to its scope by a broadcast join with the file list.
    """
    where: dict[Path, int] = {}
    for sc in scopes:
        for f in (*sc.jsonl, *sc.parquet):
            where[Path(f).resolve()] = sc.index
    jsonl = [f for sc in scopes for f in sc.jsonl]
    parquet = [f for sc in scopes for f in sc.parquet]
    parts = []
    if jsonl:
        parts.append(_read_jsonl(spark, jsonl))
    if parquet:
        parts.append(_read_parquet(spark, parquet))
    if len(scopes) == 1:
        tagged = [p.withColumn(SCOPE, F.lit(scopes[0].index).cast(IntegerType())) for p in parts]
    else:
        tagged = []
        for p in parts:
            mapping = [(uri, _scope_of(uri, where)) for uri in p.inputFiles()]
            files = small_frame(spark, mapping, "_file string, scope int")
            tagged.append(p.withColumn("_file", F.input_file_name())
                          .join(F.broadcast(files), "_file", "left").drop("_file"))
    df = tagged[0]
    for other in tagged[1:]:
        df = df.unionByName(other)
    return df


def _scope_of(uri: str, where: dict[Path, int]) -> int | None:
    """Spark lists files as URIs (``file:///a%20b/x.jsonl``; a directory's part files)."""
    path = Path(unquote(urlparse(uri).path))
    for candidate in (path, *path.parents):
        if candidate in where:
            return where[candidate]
    return None


def _uri_stem(uri: str) -> str:
    """The trace a listed file belongs to, as :func:`_stem` names it: ``.../n0`` for
    ``.../n0.jsonl``, ``.../n0.jsonl.gz``, ``.../n0.parquet`` and the part files of a
    Parquet directory ``.../n0.parquet/part-*.parquet``."""
    path = unquote(urlparse(uri).path)
    parts = path.split("/")
    for i, name in enumerate(parts):
        if name.endswith(".parquet"):
            return "/".join([*parts[:i], name[: -len(".parquet")]])
    return str(_stem(Path(path)))


def _remote_frames(spark: SparkSession, path: str, index: int) -> tuple[DataFrame, Scope]:
    found: dict[str, DataFrame] = {}
    for kind, read in (("jsonl", _read_jsonl), ("parquet", _read_parquet)):
        try:
            found[kind] = read(spark, [path], True)
        except (AnalysisException, ConfigError) as exc:
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                raise ConfigError(f"no such directory: {path}") from exc
            # No file of that kind there: Spark cannot infer or read an empty set.
    if "jsonl" in found and "parquet" in found:
        # As _one_copy does for local inputs: a JSONL file with a Parquet copy beside
        # it is read once, from the copy. Only file listings are compared, no event.
        copies = {_uri_stem(f) for f in found["parquet"].inputFiles()}
        listed = found["jsonl"].inputFiles()
        alone = [f for f in listed if _uri_stem(f) not in copies]
        if not alone:
            del found["jsonl"]
        elif len(alone) < len(listed):
            found["jsonl"] = _read_jsonl(spark, alone)
    parts = list(found.values())
    if not parts:
        raise ConfigError(f"no trace files (*.jsonl, *.parquet) under {path}")
    meta: dict[str, Any] = {}
    try:
        rows = spark.read.option("multiLine", "true").json(path.rstrip("/") + "/run.json").collect()
        if rows:
            meta = rows[0].asDict(recursive=True)
    except AnalysisException:
        pass
    df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return (df.withColumn(SCOPE, F.lit(index).cast(IntegerType())),
            Scope(index=index, path=path, meta=meta))


def check_inputs(paths: Sequence[str | Path]) -> int | None:
    """Fail fast (before Spark starts) on a missing local directory or one without traces.

    Returns the estimated number of events (:func:`estimate_events`), None when
    some input is remote.
    """
    if not paths:
        raise ConfigError("no input directory given")
    total: int | None = 0
    for raw in paths:
        if is_remote(str(raw)):
            total = None
            continue
        found = discover_local(_local_path(str(raw)), 0)
        if total is not None:
            total += estimate_events(found)
    return total


def load(spark: SparkSession, paths: Sequence[str | Path]) -> Loaded:
    """Read every trace under ``paths`` into one cached DataFrame.

    Columns: the schema's (docs/interfaces.md §4), ``pos`` (the event's place in its
    input, to break ties in ``t`` at one node), ``scope`` (which run.json
    describes it) and ``ok`` (false for a malformed row: no run, node, event or t).
    """
    if not paths:
        raise ConfigError("no input directory given")
    scopes: list[Scope] = []
    frames: list[DataFrame] = []
    input_bytes = 0
    local_scopes: list[Scope] = []
    for raw in paths:
        p = str(raw)
        if is_remote(p):
            df, scope = _remote_frames(spark, p, len(scopes) + len(local_scopes))
            frames.append(df)
            scopes.append(scope)
        else:
            found = discover_local(_local_path(p), len(scopes) + len(local_scopes))
            local_scopes.extend(found)
    estimate = None if scopes else estimate_events(local_scopes)  # scopes: remote ones
    if local_scopes:
        for sc in local_scopes:
            input_bytes += _size(sc.jsonl) + _size(sc.parquet)
        frames.append(_local_frame(spark, local_scopes))
        scopes.extend(local_scopes)
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    _size_shuffles(spark, input_bytes, estimate)
    ok = (F.col("run").isNotNull() & F.col("node").isNotNull() & F.col("event").isNotNull()
          & F.col("t").isNotNull() & ~F.isnan("t"))
    events = df.select(*COLUMNS, SCOPE, F.monotonically_increasing_id().alias(POS),
                       ok.alias("ok"))
    # JSON is parsed once and cached. Parquet is not: re-reading the columns each job
    # needs is faster than building Spark's in-memory cache (measured: 1M events, all
    # checks, 24 s without the cache against 40 s with it). ``pos`` stays the same on
    # every read: same files, same splits, and no filter is pushed below it.
    json_inputs = any(s.jsonl for s in scopes) or any(is_remote(str(p)) for p in paths)
    if json_inputs:
        events = events.cache()
    return Loaded(events=events, scopes=scopes, input_bytes=input_bytes,
                  events_estimate=estimate)


def _size_shuffles(spark: SparkSession, input_bytes: int, events: int | None = None) -> None:
    """Few shuffle partitions for small traces (a task costs more than its data), more
    for big ones; on a cluster (or when the size is unknown) Spark's settings apply."""
    master = spark.sparkContext.master or ""
    if not input_bytes or not master.startswith("local"):
        return
    parallelism = spark.sparkContext.defaultParallelism
    wanted = max(parallelism, math.ceil(input_bytes / (64 << 20)))
    spark.conf.set("spark.sql.shuffle.partitions", str(min(wanted, 4 * parallelism, 400)))
    # Adaptive execution re-plans after every shuffle: worth it on big inputs, but on
    # small ones that costs more than the data (measured: 2.4x on a 1,000-row join).
    spark.conf.set("spark.sql.adaptive.enabled", str(input_bytes > _ADAPTIVE_FROM).lower())
    # Code generation compiles Java for every stage of every plan and for every
    # projection and predicate (with Janino, then the JIT): on a few thousand rows that
    # costs far more than running the operators and expressions as they are (measured:
    # the JVM's CPU time for a 4,656-event analyze, 17.7 s -> 13.2 s). Set both ways: a
    # session analyses traces of any size. A value given at start-up (--conf) stays.
    quick = events is not None and events <= QUICK_EVENTS
    given = spark.sparkContext.getConf()
    for key, small, large in _CODEGEN:
        if not given.contains(key):
            spark.conf.set(key, small if quick else large)
