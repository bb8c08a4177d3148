"""A Spark standalone cluster on 127.0.0.1 for tests: one master, one worker.

Started with the ``bin/spark-class`` that pip's PySpark ships (it has no
``sbin/start-master.sh``), exactly as docs/spark-cluster.md tells a user:

    SPARK_LOCAL_IP=127.0.0.1 $SPARK_HOME/bin/spark-class \\
        org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077
    SPARK_LOCAL_IP=127.0.0.1 $SPARK_HOME/bin/spark-class \\
        org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077 --host 127.0.0.1

Ports are 0 (the kernel picks free ones; the master's is read from its log), the web
UIs listen on 127.0.0.1 only (SPARK_LOCAL_IP) on free ports too. The processes get
an environment without PYTHONPATH or PYSPARK_PYTHON, so nothing of the test's own
Python (where m2mc is importable) leaks to the executors. Each runs in its own
process group (the worker's executors and their Python workers with it), and
:func:`standalone` always ends both groups, even when the test fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
_MASTER_URL = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
_REGISTERED = "Successfully registered with master"
# Variables of the test's own Python or Spark set-up that must not reach the cluster.
_DROP = ("PYTHONPATH", "PYTHONHOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV",
         "SPARK_CONF_DIR", "SPARK_LOCAL_IP", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")


class ClusterUnavailable(Exception):
    """Java or pip's spark-class is missing: the caller skips with this reason."""


@dataclass(frozen=True, slots=True)
class Cluster:
    master_url: str
    spark_home: Path
    env: dict[str, str]  # a clean environment for drivers too (plus SPARK_LOCAL_IP)
    logs: Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def clean_env(home: Path, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOCAL_DIRS=str(work / "local"), SPARK_LOG_DIR=str(work / "logs"),
               SPARK_PID_DIR=str(work / "pids"),
               # The master's REST submission server would take the fixed port 6066.
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    return env


def _wait_for(log: Path, proc: subprocess.Popen[bytes], pattern: re.Pattern[str] | str,
              what: str, deadline_s: float) -> str:
    """Poll ``log`` for ``pattern`` (a generous deadline: CI's 2 cores may be busy)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        text = log.read_text(errors="replace") if log.exists() else ""
        hit = (pattern.search(text) if isinstance(pattern, re.Pattern)
               else (pattern if pattern in text else None))
        if hit is not None:
            return hit.group(1) if isinstance(hit, re.Match) else hit
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"{what}: no {pattern!r} in {deadline_s:.0f}s:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the process group this helper started (the JVM and all it spawned)."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    else:  # the JVM is gone; executors it started may not be
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def standalone(work: Path, cores: int = 2, memory: str = "1g",
               deadline_s: float = 180.0) -> Iterator[Cluster]:
    """A master and a worker on 127.0.0.1; both stopped on exit, whatever happened."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ClusterUnavailable("no Java (java on PATH or JAVA_HOME): Spark cannot start")
    home = spark_home()
    spark_class = home / "bin" / "spark-class"
    if not os.access(spark_class, os.X_OK):
        raise ClusterUnavailable(f"{spark_class} is missing (PySpark without its launcher)")
    logs = work / "logs"
    for d in ("logs", "local", "worker", "pids"):
        (work / d).mkdir(parents=True, exist_ok=True)
    env = clean_env(home, work)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master_log = logs / "master.log"
        with open(master_log, "wb") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), MASTER, "--host", "127.0.0.1", "--port", "0",
                 "--webui-port", "0"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True))
        url = _wait_for(master_log, procs[0], _MASTER_URL, "the Spark master", deadline_s)
        worker_log = logs / "worker.log"
        with open(worker_log, "wb") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), WORKER, url, "--host", "127.0.0.1", "--port", "0",
                 "--webui-port", "0", "--cores", str(cores), "--memory", memory,
                 "--work-dir", str(work / "worker")],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True))
        _wait_for(worker_log, procs[1], _REGISTERED, "the Spark worker", deadline_s)
        yield Cluster(master_url=url, spark_home=home, env=env, logs=logs)
    finally:
        for proc in reversed(procs):
            _stop(proc)
