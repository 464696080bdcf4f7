"""The PostgreSQL sink on a Spark Connect session (issue 16): its ``foreachBatch`` writer runs
in the Connect server's Python worker, whose session has no SparkContext, so the stream id of
its batch markers comes from the checkpoint's ``metadata`` (Spark's query id) instead.

Fails on f29f918 (the writer called ``batch.sparkSession.sparkContext``: the query ends with
``JVM_ATTRIBUTE_NOT_SUPPORTED``); passes now."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_spark_cluster import connect_server  # noqa: F401  (the fixture)

from streamctl.catalog.urls import libpq_url
from streamctl.spark.sink_writers import MARKER_TABLE, start_sink
from streamctl.spark.source_readers import read_source
from streamctl.spark.specs import SinkSpec, SourceSpec

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.postgres]

SCHEMA = [
    {"name": "id", "type": "UINT64", "nullable": False},
    {"name": "s", "type": "VARSIZED", "nullable": False},
]


@pytest.fixture(autouse=True)
def python_for_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server runs ``foreachBatch`` in ``$PYSPARK_PYTHON`` (else whatever ``python3`` is
    on PATH, without this environment's packages): this interpreter, set before it starts."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)


def pg_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(libpq_url(url)) as connection:
        return list(connection.execute(query).fetchall())


def test_postgres_sink_writes_exactly_once_from_spark_connect(
    connect_server: str,  # noqa: F811
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark.sql import SparkSession

    # A Connect session marks this process (SPARK_CONNECT_MODE_ENABLED); agents that later
    # tests start from it must not inherit the mark.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "")
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")

    session = SparkSession.builder.remote(connect_server).create()
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    source = SourceSpec(1, "FILE", {"file_path": str(incoming)}, SCHEMA)
    sink = SinkSpec("pg", "POSTGRESQL", {"url": pg_url, "table": "results"}, SCHEMA)
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        query = start_sink(
            read_source(session, source, tmp_path / "staging"),
            sink,
            query_name="pgq",
            checkpoint_dir=str(checkpoint),
            output_mode="append",
            available_now=True,
        )
        assert query.awaitTermination(120)
        assert query.exception() is None

    try:
        (incoming / "a.csv").write_text("1,a\n2,b\n")
        run()
        (incoming / "b.csv").write_text("3,c\n")
        run()  # a second run of the same checkpoint: the same stream, the next batch
    finally:
        session.stop()

    assert pg_rows(pg_url, "SELECT id, s FROM results ORDER BY id") == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    stream = json.loads((checkpoint / "metadata").read_text())["id"]
    markers = pg_rows(
        pg_url, f"SELECT stream_id, batch_id, row_count FROM {MARKER_TABLE} ORDER BY batch_id"
    )
    assert markers == [(stream, 0, 2), (stream, 1, 1)]
