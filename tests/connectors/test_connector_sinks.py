"""Sinks on Spark: NES text, exactly once across restarts and replays, the checksum, PostgreSQL.

A replay is forced the way a crash causes it: the sink's write of a batch happened but
Spark's commit of the batch did not (the batch's commit file is removed, or the writer fails
after its transaction), so the restarted query runs the batch again with the same id.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from conformance import needs_suite
from connector_helpers import TESTDATA, columns, file_sink, run_bounded, source
from pyspark.errors import StreamingQueryException

from streamctl.catalog.urls import libpq_url
from streamctl.sink_files import checksum_directory, read_checksum, read_file_sink_lines
from streamctl.spark.sink_writers import (
    MARKER_TABLE,
    PostgresBatchWriter,
    PrintWriter,
    batch_writer,
    read_file_sink,
    start_batch_writer,
    start_sink,
)
from streamctl.spark.source_readers import read_source
from streamctl.spark.specs import ConnectorError, SinkSpec

pytestmark = pytest.mark.spark

STREAM8 = {"file_path": str(TESTDATA / "small/stream8.csv"), "PARSER.TYPE": "CSV"}
STREAM8_COLUMNS = ("id UINT64", "value UINT64", "timestamp UINT64")


def forget_last_commit(checkpoint: Path) -> int:
    """Make Spark believe the last batch never committed; returns its id."""
    commits = [int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    last = max(commits)
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_file_sink_writes_nes_text(spark: Any, tmp_path: Path) -> None:
    data = "1,3.141,true,x,\n2,153,false,,7\n3,-1.82608695,true,a b,\n"
    spec = source(
        "INLINE", {"data": data}, "id INT8", "f FLOAT64", "b BOOLEAN", "t TEXT?", "n INT32?"
    )
    sink = file_sink(tmp_path / "out", "id INT8", "f FLOAT64", "b BOOLEAN", "t TEXT?", "n INT32?")
    run_bounded(spark, spec, sink, tmp_path)
    assert sorted(read_file_sink_lines(sink)) == [
        "1,3.141,true,x,NULL",
        "2,153.0,false,NULL,7",
        "3,-1.826087,true,a b,NULL",
    ]
    assert sorted(read_file_sink(None, sink, "q")) == [
        (1, 3.141, True, "x", None),
        (2, 153.0, False, None, 7),
        (3, -1.826087, True, "a b", None),
    ]
    quoted = file_sink(
        tmp_path / "quoted", "id INT8", "f FLOAT64", "b BOOLEAN", "t TEXT?", "n INT32?"
    )
    quoted = SinkSpec(quoted.name, "FILE", {**quoted.config, "quote_strings": True}, quoted.schema)
    run_bounded(spark, spec, quoted, tmp_path, query_name="quoted")
    assert '3,-1.826087,true,"a b",NULL' in read_file_sink_lines(quoted)


@needs_suite
def test_file_sink_is_exactly_once_when_a_written_batch_is_replayed(
    spark: Any, tmp_path: Path
) -> None:
    sink = file_sink(tmp_path / "out", *STREAM8_COLUMNS)
    spec = source("FILE", STREAM8, *STREAM8_COLUMNS)
    run_bounded(spark, spec, sink, tmp_path)
    forget_last_commit(tmp_path / "checkpoint-q")
    run_bounded(spark, spec, sink, tmp_path)  # replays the batch: the sink log already has it
    assert len(read_file_sink(None, sink)) == 5


def test_file_sink_complete_mode_keeps_the_latest_result(spark: Any, tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    spec = source("FILE", {"file_path": str(incoming)}, "k TEXT", "v INT64")
    sink = file_sink(tmp_path / "out", "k TEXT", "total INT64")

    def run() -> None:
        frame = read_source(spark, spec, tmp_path / "staging")
        totals = frame.groupBy("k").sum("v")
        query = start_sink(
            totals,
            sink,
            query_name="agg",
            checkpoint_dir=str(tmp_path / "checkpoint"),
            output_mode="complete",
            available_now=True,
        )
        assert query.awaitTermination(120)

    (incoming / "a.csv").write_text("x,1\ny,2\n")
    run()
    assert sorted(read_file_sink(None, sink)) == [("x", 1), ("y", 2)]
    (incoming / "b.csv").write_text("x,10\n")
    run()
    assert sorted(read_file_sink(None, sink)) == [("x", 11), ("y", 2)]
    with pytest.raises(ConnectorError, match="append and complete"):
        batch_writer(sink, query_name="agg", checkpoint_dir="c", output_mode="update")


@needs_suite
def test_checksum_sink_matches_nes(spark: Any, tmp_path: Path) -> None:
    sink = SinkSpec("cs", "CHECKSUM", {}, columns(*STREAM8_COLUMNS))
    run_bounded(spark, source("FILE", STREAM8, *STREAM8_COLUMNS), sink, tmp_path)
    directory = checksum_directory(sink, "q", str(tmp_path / "checkpoint-q"))
    assert read_checksum(directory).line() == "5 1505"


def test_generator_checksum_of_the_suite(spark: Any, tmp_path: Path) -> None:
    spec = source(
        "GENERATOR",
        {
            "stop_when": "ALL",
            "seed": 1,
            "generator_schema": "SEQUENCE UINT64 0 100 1, SEQUENCE UINT64 0 200 1",
        },
        "id UINT64",
        "field2 UINT64",
    )
    sink = SinkSpec("cs", "CHECKSUM", {"file_path": str(tmp_path / "sums")}, spec.schema)
    run_bounded(spark, spec, sink, tmp_path)
    assert read_checksum(checksum_directory(sink, "q", "unused")).line() == "200 60740"


@needs_suite
def test_checksum_is_exactly_once_across_restarts_and_replays(spark: Any, tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    spec = source("FILE", {"file_path": str(incoming)}, *STREAM8_COLUMNS)
    sink = SinkSpec("cs", "CHECKSUM", {}, columns(*STREAM8_COLUMNS))
    lines = (TESTDATA / "small/stream8.csv").read_text().splitlines()
    (incoming / "a.csv").write_text("\n".join(lines[:2]) + "\n")
    run_bounded(spark, spec, sink, tmp_path)
    (incoming / "b.csv").write_text("\n".join(lines[2:]) + "\n")
    run_bounded(spark, spec, sink, tmp_path)
    forget_last_commit(tmp_path / "checkpoint-q")
    run_bounded(spark, spec, sink, tmp_path)  # batch 1 again: its result is replaced
    directory = checksum_directory(sink, "q", str(tmp_path / "checkpoint-q"))
    assert read_checksum(directory).line() == "5 1505"


@needs_suite
def test_print_and_void_sinks(spark: Any, tmp_path: Path) -> None:
    spec = source("FILE", STREAM8, *STREAM8_COLUMNS)
    printed = io.StringIO()
    writer = PrintWriter(SinkSpec("p", "PRINT", {}, columns(*STREAM8_COLUMNS)), "show", printed)
    query = start_batch_writer(
        read_source(spark, spec, tmp_path / "staging"),
        writer,
        query_name="show",
        checkpoint_dir=str(tmp_path / "print-checkpoint"),
        output_mode="append",
        available_now=True,
    )
    assert query.awaitTermination(120)
    assert sorted(printed.getvalue().splitlines())[0] == "[show] 1,1,12"
    void = SinkSpec("v", "VOID", {}, columns(*STREAM8_COLUMNS))
    query = run_bounded(spark, spec, void, tmp_path, query_name="void")
    assert query.exception() is None


@needs_suite
def test_result_and_sink_schema_must_have_the_same_width(spark: Any, tmp_path: Path) -> None:
    frame = read_source(spark, source("FILE", STREAM8, *STREAM8_COLUMNS), tmp_path)
    with pytest.raises(ConnectorError, match="2 columns"):
        start_sink(
            frame,
            file_sink(tmp_path / "out", "a UINT64", "b UINT64"),
            query_name="w",
            checkpoint_dir=str(tmp_path / "c"),
            output_mode="append",
            available_now=True,
        )


# --- PostgreSQL ------------------------------------------------------------------------------


class FailOnceAfterCommit:
    """Crash the query once, after the PostgreSQL transaction of a batch committed."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, batch_id: int) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError(f"crash after committing batch {batch_id}")


def pg_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(libpq_url(url)) as connection:
        return list(connection.execute(query).fetchall())


@pytest.mark.postgres
def test_postgres_sink_is_exactly_once_across_restarts_and_crashes(
    spark: Any, tmp_path: Path, pg_url: str
) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    spec = source("FILE", {"file_path": str(incoming)}, "id UINT64", "v FLOAT32?", "s TEXT")
    sink = SinkSpec(
        "pg",
        "POSTGRESQL",
        {"url": pg_url, "table": "results"},
        columns("id UINT64", "v FLOAT32?", "s TEXT"),
    )

    def run(writer: Any) -> None:
        query = start_batch_writer(
            read_source(spark, spec, tmp_path / "staging"),
            writer,
            query_name="pgq",
            checkpoint_dir=str(tmp_path / "checkpoint"),
            output_mode="append",
            available_now=True,
        )
        assert query.awaitTermination(120)

    (incoming / "a.csv").write_text("1,0.5,a\n2,,b\n")
    run(PostgresBatchWriter(sink, "pgq"))
    (incoming / "b.csv").write_text("18446744073709551615,1.25,c\n")
    crash = FailOnceAfterCommit()
    with pytest.raises(StreamingQueryException, match="crash after committing batch 1"):
        run(PostgresBatchWriter(sink, "pgq", after_commit=crash))
    run(PostgresBatchWriter(sink, "pgq"))  # Spark replays batch 1: its marker skips it
    (incoming / "c.csv").write_text("4,2.0,d\n")
    query = start_sink(
        read_source(spark, spec, tmp_path / "staging"),
        sink,
        query_name="pgq",
        checkpoint_dir=str(tmp_path / "checkpoint"),
        output_mode="append",
        available_now=True,
    )
    assert query.awaitTermination(120)

    assert pg_rows(pg_url, "SELECT id, v, s FROM results ORDER BY id") == [
        (1, 0.5, "a"),
        (2, None, "b"),
        (4, 2.0, "d"),
        (18446744073709551615, 1.25, "c"),
    ]
    markers = pg_rows(pg_url, f"SELECT batch_id, row_count FROM {MARKER_TABLE} ORDER BY batch_id")
    assert markers == [(0, 2), (1, 1), (2, 1)]


@pytest.mark.postgres
def test_postgres_sink_complete_mode_replaces_the_table(
    spark: Any, tmp_path: Path, pg_url: str
) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    spec = source("FILE", {"file_path": str(incoming)}, "k TEXT", "v INT64")
    sink = SinkSpec(
        "pg", "POSTGRESQL", {"url": pg_url, "table": "public.totals"}, columns("k TEXT", "t INT64")
    )

    def run() -> None:
        totals = read_source(spark, spec, tmp_path / "staging").groupBy("k").sum("v")
        query = start_sink(
            totals,
            sink,
            query_name="tot",
            checkpoint_dir=str(tmp_path / "checkpoint"),
            output_mode="complete",
            available_now=True,
        )
        assert query.awaitTermination(120)

    (incoming / "a.csv").write_text("x,1\ny,2\n")
    run()
    (incoming / "b.csv").write_text("x,5\n")
    run()
    assert pg_rows(pg_url, "SELECT k, t FROM totals ORDER BY k") == [("x", 6), ("y", 2)]
