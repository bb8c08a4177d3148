"""Small traces: the quick profile (JVM options, no code generation) is chosen from the
input before Spark starts and undone for a large input in the same session; the
class-data archive is used when present, written only by a run that ends its JVM,
and kept only once complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from m2mc_pipeline import classcache
from m2mc_pipeline.load import QUICK_EVENTS, _size_shuffles, check_inputs, load
from m2mc_pipeline.session import (
    QUICK_HEAP_OPTIONS,
    QUICK_JVM_OPTIONS,
    QUICK_PAGE_SIZE,
    build_conf,
)


def test_the_estimate_reads_parquet_footers_and_jsonl_sizes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    pq.write_table(pa.table({"run": ["r"] * 700, "t": [0.0] * 700}), tmp_path / "a" / "n0.parquet")
    (tmp_path / "a" / "n1.jsonl").write_text("x" * 10_000)
    assert check_inputs([tmp_path / "a"]) == 700 + 10_000 // 100
    assert check_inputs([tmp_path / "a", "hdfs:///traces"]) is None  # size unknown


def test_quick_jvm_options_only_for_small_inputs() -> None:
    quick = build_conf("local[2]", quick=True).get("spark.driver.extraJavaOptions") or ""
    plain = build_conf("local[2]").get("spark.driver.extraJavaOptions") or ""
    assert QUICK_JVM_OPTIONS in quick and QUICK_JVM_OPTIONS not in plain


@pytest.mark.spark
def test_code_generation_is_off_for_a_small_trace_and_back_for_a_large_one(
        spark: Any, make_trace: Any, tmp_path: Path) -> None:
    trace = make_trace("small").join(0.0, "g", "sb", "A", "B").send("A", 1.0, "g", "A:1")
    loaded = load(spark, [trace.write(tmp_path / "small")])
    assert loaded.events_estimate is not None and loaded.events_estimate <= QUICK_EVENTS
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    loaded.events.unpersist()
    _size_shuffles(spark, 1 << 30, 10 * QUICK_EVENTS)
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"


def test_the_class_archive_is_used_when_present_and_written_only_when_allowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "a.jar").write_bytes(b"jar")
    monkeypatch.setenv("M2MC_CACHE_DIR", str(tmp_path / "cache"))
    if classcache.archive_name(home) is None:
        pytest.skip("no java on PATH or JAVA_HOME")
    assert classcache.plan(home, may_write=False) is None
    writing = classcache.plan(home, may_write=True)
    assert writing is not None and writing.writing is not None
    assert f"-XX:ArchiveClassesAtExit={writing.writing}" in writing.options
    writing.archive.write_bytes(b"archive")
    using = classcache.plan(home, may_write=True)
    assert using is not None and using.writing is None
    assert using.options == f"-XX:SharedArchiveFile={using.archive}"
    (home / "jars" / "b.jar").write_bytes(b"another jar")  # another Spark: another archive
    assert classcache.plan(home, may_write=False) is None
    monkeypatch.setenv("M2MC_SPARK_CLASS_CACHE", "0")
    assert classcache.plan(home, may_write=True) is None


class _Gateway:
    """Stands in for py4j's gateway: ``proc`` writes its 'archive' when stdin closes."""

    def __init__(self, target: Path, status: int) -> None:
        code = (f"import sys; sys.stdin.read(); open({str(target)!r}, 'wb').write(b'jsa'); "
                f"sys.exit({status})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)

    def shutdown(self) -> None:
        return None


@pytest.mark.parametrize("status", [0, 1])
def test_the_archive_is_kept_only_when_the_jvm_finished_writing_it(tmp_path: Path,
                                                                   status: int) -> None:
    cache = classcache.ClassCache("-XX:ArchiveClassesAtExit=x", tmp_path / "spark.jsa",
                                  tmp_path / "spark.jsa.1.tmp")
    assert cache.writing is not None
    gateway = _Gateway(cache.writing, status)
    assert not cache.archive.exists()  # while the JVM runs, no archive to map
    classcache.finish(cache, gateway)
    assert gateway.proc.returncode == status
    assert cache.archive.exists() == (status == 0)
    assert not cache.writing.exists()
    if status == 0:
        assert cache.archive.read_bytes() == b"jsa"


def test_the_quick_profile_sizes_the_heap_and_memory_pages_unless_told_otherwise() -> None:
    quick = build_conf("local[2]", quick=True)
    assert QUICK_HEAP_OPTIONS in (quick.get("spark.driver.extraJavaOptions") or "")
    assert quick.get("spark.buffer.pageSize") == QUICK_PAGE_SIZE
    plain = build_conf("local[2]")
    assert QUICK_HEAP_OPTIONS not in (plain.get("spark.driver.extraJavaOptions") or "")
    assert plain.get("spark.buffer.pageSize") is None
    # A heap of 1 GiB at the start would not fit a 1 GiB driver: the JVM would not start.
    small = build_conf("local[2]", quick=True, conf={"spark.driver.memory": "1g"})
    java = small.get("spark.driver.extraJavaOptions") or ""
    assert QUICK_JVM_OPTIONS in java and QUICK_HEAP_OPTIONS not in java
    mine = build_conf("local[2]", quick=True, conf={"spark.driver.extraJavaOptions": "-Dx=1",
                                                    "spark.buffer.pageSize": "16m"})
    assert mine.get("spark.driver.extraJavaOptions") == "-Dx=1"
    assert mine.get("spark.buffer.pageSize") == "16m"
