"""The SparkSession the pipeline runs on: quiet, embedded by default, any master on request.

Spark writes a lot to the terminal (launcher banners, log4j warnings, JVM
notices). None of it is for the user: the JVM's stdout and stderr go to a log
file, log4j is set to WARN, and the pipeline prints its own progress lines.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from m2mc_pipeline import classcache

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"
# The embedded JVM for a small trace (the quick profile): a run is over in seconds, so
# the JIT's optimizing compiler (C2) never pays back its compile time, and neither do
# the parallel garbage collector's threads on a heap that stays small. C1 alone and the
# serial collector (measured on a 4,656-event trace: analyze 50 s -> 22 s, with no
# code generation; see docs/pipeline.md, "Small traces").
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# ... and its heap (when the driver may have 2 GiB or more). Planning some forty queries
# allocates about 3 GB; from the default heap (a 100 MB young generation) that took 25
# collections, 3 of them full (one for class metadata): 2-3 s of the JVM's CPU time
# (docs/pipeline.md, "Small traces").
QUICK_HEAP_OPTIONS = "-Xms1g -Xmn512m -XX:MetaspaceSize=256m"
_QUICK_HEAP_FROM = 2 << 30  # bytes of driver memory
# The memory pages of Spark's sorts and hash maps (by default up to 64 MB each, from the
# driver's memory and cores): on a small trace each sort and aggregation took a fresh
# 64 MB array, straight into the old generation, and full collections followed.
QUICK_PAGE_SIZE = "2m"

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

# The class-data archive plan of the JVM this process started (classcache.py).
_class_cache: classcache.ClassCache | None = None

# pandas 3 makes PySpark print a FutureWarning at import; it is not the user's concern.
warnings.filterwarnings("ignore", message=".*PySpark does not yet fully support pandas.*")


def _log4j_file() -> Path:
    path = Path(tempfile.gettempdir()) / "m2mc-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return path


def is_local(master: str) -> bool:
    return master.startswith("local")


def build_conf(master: str | None = None, app_name: str = "m2mc-pipeline",
               conf: Mapping[str, str] | None = None, quick: bool = False) -> SparkConf:
    """The Spark configuration of a pipeline session (before any JVM starts).

    ``quick``: the input is small (load.QUICK_EVENTS); the driver's JVM is then
    tuned for start-up and latency (QUICK_JVM_OPTIONS; QUICK_HEAP_OPTIONS when the
    driver has 2 GiB or more; QUICK_PAGE_SIZE). Options given in ``conf`` win.
    """
    master = master or os.environ.get("M2MC_SPARK_MASTER") or DEFAULT_MASTER
    log4j = _log4j_file()
    c = SparkConf()
    c.setMaster(master).setAppName(app_name)
    c.set("spark.ui.enabled", "false")
    c.set("spark.ui.showConsoleProgress", "false")
    java = f"-Dlog4j2.configurationFile=file:{log4j}"
    if quick:  # the driver's JVM (all of Spark when embedded); a cluster's executors keep theirs
        java += " " + QUICK_JVM_OPTIONS
    c.set("spark.driver.extraJavaOptions", java)
    c.set("spark.sql.session.timeZone", "UTC")
    c.set("spark.sql.adaptive.enabled", "true")
    # Spark keeps the classes it generates for a query plan in a cache of 100 by
    # default; one analyze generates about 200, so a second analyze in the same JVM
    # (a sweep, the demo, a bench after its warm-up) would compile them all again,
    # and the JIT would compile the new classes again too. Measured: the JVM's CPU
    # time for load + checks of 1M events went from about 28 s to 17 s.
    c.set("spark.sql.codegen.cache.maxEntries", "2000")
    if is_local(master):
        # Embedded: bind to loopback only, and size shuffles for one machine.
        c.set("spark.driver.host", "127.0.0.1")
        c.set("spark.driver.bindAddress", "127.0.0.1")
        c.set("spark.driver.memory",
              os.environ.get("M2MC_SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY))
        cores = os.cpu_count() or 2
        c.set("spark.sql.shuffle.partitions", str(max(4, 2 * cores)))
        c.set("spark.default.parallelism", str(max(2, cores)))
    for key, value in (conf or {}).items():
        c.set(key, value)
    if quick:
        given = conf or {}
        memory = _bytes(c.get("spark.driver.memory") or "1g")
        if "spark.driver.extraJavaOptions" not in given and memory >= _QUICK_HEAP_FROM:
            c.set("spark.driver.extraJavaOptions", f"{java} {QUICK_HEAP_OPTIONS}")
        if "spark.buffer.pageSize" not in given:
            c.set("spark.buffer.pageSize", QUICK_PAGE_SIZE)
    return c


def _bytes(size: str) -> int:
    """A JVM memory size (``4g``, ``4096m``, ``512k``, bytes) in bytes; 0 if unreadable."""
    text = size.strip().lower().removesuffix("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(text[-1:], 1)
    digits = text[:-1] if scale != 1 else text
    return int(digits) * scale if digits.isdigit() else 0


def get_session(master: str | None = None, *, app_name: str = "m2mc-pipeline",
                conf: Mapping[str, str] | None = None,
                log_path: str | os.PathLike[str] | None = None,
                quick: bool = False, ends_jvm: bool = False) -> SparkSession:
    """Return the active SparkSession, or start a quiet one on ``master``.

    An active session (a test fixture, ``spark-submit``, the caller's own) is
    reused as is. Otherwise the JVM is launched with its output sent to
    ``log_path`` (default: a file in the temp directory), so the terminal only
    shows the pipeline's own progress. ``quick``: see :func:`build_conf`.
    A JVM started here maps the class-data archive (classcache.py) if there is
    one; ``ends_jvm``: the caller will :func:`stop_session` and needs the JVM no
    more (the m2mc commands), so this JVM may write the archive at its end.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    spark_conf = build_conf(master, app_name, conf, quick)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Under spark-submit: the JVM exists and spark-submit's --master and --conf rule;
        # only what the caller asked for explicitly is added.
        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        return spark
    if is_local(spark_conf.get("spark.master") or DEFAULT_MASTER):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Embedded workers run this interpreter, so they import what the driver imports.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    gateway = None
    if SparkContext._gateway is None:  # type: ignore[attr-defined]
        global _class_cache
        _class_cache = classcache.plan(Path(_find_spark_home()), may_write=ends_jvm)
        if _class_cache is not None:
            java = spark_conf.get("spark.driver.extraJavaOptions") or ""
            spark_conf.set("spark.driver.extraJavaOptions",
                           f"{java} {_class_cache.options}".strip())
        log = (Path(log_path) if log_path
               else Path(tempfile.gettempdir()) / f"m2mc-spark-{os.getpid()}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as sink:
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                spark_conf, popen_kwargs={"stdout": sink, "stderr": sink})
    # A JVM left by a stopped session is reused (its launch options stay as they were).
    sc = SparkContext(conf=spark_conf, gateway=gateway)
    sc.setLogLevel("WARN")
    return SparkSession.builder.getOrCreate()


def small_frame(spark: SparkSession, rows: Sequence[tuple[Any, ...]], schema: StructType | str
                ) -> DataFrame:
    """A DataFrame from a few driver-side rows (metadata, never events)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pandas 3 notice, see above
        return spark.createDataFrame(list(rows), schema)


def end_with_process(spark: SparkSession) -> None:
    """For a process about to exit (the m2mc commands): the JVM ends with it (it exits
    when this process's end closes its stdin, and stops Spark on its way out), so no
    graceful stop is waited for (measured: 0.75 s of a 15 s analyze); unless the JVM
    writes the class-data archive, which needs the clean end of :func:`stop_session`."""
    if _class_cache is not None and _class_cache.writing is not None:
        stop_session(spark)


def stop_session(spark: SparkSession) -> None:
    """Stop the session; the JVM stays up and a later get_session() reuses it, unless
    it is writing the class-data archive: then it ends here (a later get_session()
    starts another)."""
    global _class_cache
    spark.stop()
    cache, _class_cache = _class_cache, None
    if cache is not None and cache.writing is not None:
        classcache.finish(cache, SparkContext._gateway)  # type: ignore[attr-defined]
        SparkContext._gateway = None  # type: ignore[attr-defined]
        SparkContext._jvm = None  # type: ignore[attr-defined]
