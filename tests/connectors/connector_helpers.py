"""Helpers shared by the connector tests (Spark ones use the session-scoped ``spark`` fixture)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Final

from conformance import suite_testdata

from streamctl.spark.sink_writers import start_sink
from streamctl.spark.source_readers import read_source
from streamctl.spark.specs import SinkSpec, SourceSpec

TESTDATA = suite_testdata()
"""The suite's test data (:mod:`conformance`): a test reading it is marked ``needs_suite``."""
QUERY_TIMEOUT_S = 120
_ids = itertools.count(1)


def columns(*declarations: str) -> list[dict[str, Any]]:
    """``"id UINT64"`` is NOT NULL, ``"v INT32?"`` nullable."""
    result = []
    for declaration in declarations:
        name, type_name = declaration.split()
        nullable = type_name.endswith("?")
        result.append({"name": name, "type": type_name.rstrip("?"), "nullable": nullable})
    return result


def source(source_type: str, config: dict[str, Any], *declarations: str) -> SourceSpec:
    return SourceSpec(next(_ids), source_type, config, columns(*declarations))


def file_sink(directory: Path, *declarations: str, **config: Any) -> SinkSpec:
    return SinkSpec("out", "FILE", {"file_path": str(directory), **config}, columns(*declarations))


def run_bounded(
    spark: Any,
    source_spec: SourceSpec,
    sink_spec: SinkSpec,
    work: Path,
    *,
    query_name: str = "q",
    output_mode: str = "append",
) -> Any:
    """Read the source, write the sink with availableNow, wait until the query finishes."""
    frame = read_source(spark, source_spec, work / f"staging-{query_name}")
    query = start_sink(
        frame,
        sink_spec,
        query_name=query_name,
        checkpoint_dir=str(work / f"checkpoint-{query_name}"),
        output_mode=output_mode,
        available_now=True,
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish in time"
    return query


def spark_examples(count: int) -> Any:
    """Hypothesis settings of a property that runs Spark queries: ``count`` examples (each is
    a few queries), no deadline, no shrinking (a shrink is a query a step)."""
    from hypothesis import HealthCheck, Phase, settings

    return settings(
        max_examples=count,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


ANSI_ON: Final = {"spark.sql.ansi.enabled": "true"}
"""Spark's default, the settings a source read alone (``read_source``) is analysed with; the
planner analyses under :data:`streamctl.spark.translate.SPARK_CONF` (ANSI off)."""


def failure_message(error: Exception) -> str:
    """The message a query failed with: a connector's own (``raise_error``'s
    ``errorMessage``), else Spark's whole error."""
    parameters = getattr(error, "getMessageParameters", lambda: None)() or {}
    return str(parameters.get("errorMessage", error))


def same_value(a: Any, b: Any) -> bool:
    """The same value of the same type, written the same (NaN is NaN; 0.0 is not -0.0)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b and type(a) is type(b) and repr(a) == repr(b))


def same_outcome(a: list[tuple[Any, ...]] | str, b: list[tuple[Any, ...]] | str) -> bool:
    """Two queries' outcomes agree: the same failure message, or rows of the same values."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return len(a) == len(b) and all(
        len(x) == len(y) and all(same_value(u, v) for u, v in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )
