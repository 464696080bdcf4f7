"""Which kind of SparkSession a plan is compiled against: classic (a driver JVM in reach of
py4j) or Spark Connect (``sc://``, a gRPC client). Some translations differ between them (a
JVM function needs py4j; Spark Connect ships SQL text instead)."""

from __future__ import annotations

from typing import Any


def is_connect(session: Any) -> bool:
    """Whether ``session`` is a Spark Connect session (``sc://``), not a classic one."""
    return type(session).__module__.startswith("pyspark.sql.connect")
