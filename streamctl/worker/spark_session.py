"""The SparkSession every process of streamctl builds (agents, tests, benchmarks).

Spark starts Python workers for Python UDFs and ``foreachBatch`` helpers with the interpreter
PySpark's driver names: ``PYSPARK_PYTHON`` from the environment, else whatever ``python3`` is
first on PATH (PySpark ignores ``spark.pyspark.python`` for this). That interpreter usually
lacks this environment's packages, so the first UDF fails with ``No module named 'streamctl'``.
The session here pins both to the running interpreter unless the user set ``PYSPARK_PYTHON``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BASE_CONFIG: Mapping[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.session.timeZone": "UTC",
    # A stop waits for the running batch at most this long (ms) instead of forever, so a stop
    # action ends (failed, and retried) before its activity timeout.
    "spark.sql.streaming.stopTimeout": "60000",
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
    # An agent runs for weeks and starts thousands of short queries: keep Spark's status
    # store (what its UI shows) to the recent ones instead of a thousand jobs, stages and
    # executions, which fill a default 1 GiB driver heap.
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    "spark.sql.ui.retainedExecutions": "100",
    "spark.sql.streaming.ui.retainedQueries": "20",
    "spark.sql.streaming.ui.retainedProgressUpdates": "20",
}


class JavaMissing(RuntimeError):
    """No Java runtime for Spark on this machine."""


def require_java() -> None:
    """Spark runs on the system JDK; fail with what to install when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java"):
        return
    raise JavaMissing(
        "Spark needs a Java runtime (JDK 17 or 21) and none was found on PATH or in JAVA_HOME: "
        "install one, e.g. 'apt-get install openjdk-17-jre-headless', or set JAVA_HOME"
    )


def build_spark_session(
    master: str,
    app_name: str,
    warehouse: Path,
    config: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session on ``master`` with the base configuration, then ``config`` on top."""
    require_java()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**BASE_CONFIG, "spark.sql.warehouse.dir": str(warehouse), **(config or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
