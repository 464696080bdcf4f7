"""Sources on Spark: NES parsing rules, bounded files and generators, growing directories."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance import needs_suite
from connector_helpers import TESTDATA, file_sink, run_bounded, source
from pyspark.errors import StreamingQueryException

from streamctl.sink_files import read_file_sink_lines
from streamctl.spark.sink_writers import read_file_sink, start_sink
from streamctl.spark.source_readers import (
    KAFKA_JARS_ENV,
    is_bounded,
    kafka_jars_conf,
    read_source,
)
from streamctl.spark.specs import ConnectorError

pytestmark = pytest.mark.spark

STREAM8 = [(1, 1, 12), (1, 2, 23), (1, 3, 34), (1, 4, 45), (1, 5, 56)]


def test_schema_is_the_logical_sources(spark: Any, tmp_path: Path) -> None:
    spec = source(
        "INLINE", {"data": ""}, "a UINT8", "b UINT64", "c FLOAT32?", "d TEXT", "e BOOLEAN"
    )
    frame = read_source(spark, spec, tmp_path)
    assert frame.isStreaming
    assert frame.schema.simpleString() == (
        "struct<a:smallint,b:decimal(20,0),c:float,d:string,e:boolean>"
    )


def test_csv_parsing_follows_nes(spark: Any, tmp_path: Path) -> None:
    # guide3/guide4: numbers are trimmed, text is not; empty fields are NULL when nullable
    # (null_handling.md; malformed ones fail the query: tests/connectors/test_formats_*.py).
    data = '0.2, 100, pending,1,true\n-0.7,  50,"a,b",,FALSE\n1e1,0,x,,1\n'
    spec = source(
        "INLINE",
        {"data": data},
        "speed FLOAT64",
        "altitude UINT16",
        "status VARSIZED",
        "small UINT8?",
        "flag BOOLEAN",
    )
    sink = file_sink(
        tmp_path / "out", "s FLOAT64", "a UINT16", "t VARSIZED", "u UINT8?", "f BOOLEAN"
    )
    run_bounded(spark, spec, sink, tmp_path)
    assert sorted(read_file_sink(None, sink)) == [
        (-0.7, 50, "a,b", None, False),
        (0.2, 100, " pending", 1, True),
        (10.0, 0, "x", None, True),
    ]


def test_a_bad_value_in_a_not_null_column_fails_the_query(spark: Any, tmp_path: Path) -> None:
    spec = source("INLINE", {"data": "1,2\nx,3\n"}, "a UINT64", "b INT8")
    with pytest.raises(StreamingQueryException, match=r"column 'a' .*'x'"):
        run_bounded(spark, spec, file_sink(tmp_path / "out", "a UINT64", "b INT8"), tmp_path)
    spec = source("INLINE", {"data": "1,2,3\n"}, "a UINT64", "b INT8")
    with pytest.raises(StreamingQueryException, match="expected 2 fields"):
        run_bounded(
            spark, spec, file_sink(tmp_path / "o2", "a UINT64", "b INT8"), tmp_path, query_name="q2"
        )


@needs_suite
def test_file_source_with_pipe_delimiter_and_json(spark: Any, tmp_path: Path) -> None:
    pipe = source(
        "FILE",
        {"file_path": str(TESTDATA / "small/stream8_pipe.csv"), "PARSER.FIELD_DELIMITER": "|"},
        "id UINT64",
        "value UINT64",
        "timestamp UINT64",
    )
    assert is_bounded(pipe)
    sink = file_sink(tmp_path / "pipe", "id UINT64", "value UINT64", "timestamp UINT64")
    run_bounded(spark, pipe, sink, tmp_path, query_name="pipe")
    assert sorted(read_file_sink(None, sink)) == STREAM8

    json_spec = source(
        "INLINE",
        {"data": '{"a": 1, "b": "x"}\n{"b": null}\n', "format": "JSON"},
        "a UINT8?",
        "b VARSIZED?",
    )
    json_sink = file_sink(tmp_path / "json", "a UINT8?", "b VARSIZED?", format="JSON")
    run_bounded(spark, json_spec, json_sink, tmp_path, query_name="json")
    assert sorted(read_file_sink(None, json_sink), key=str) == [(1, "x"), (None, None)]


def test_parquet_file_source(spark: Any, tmp_path: Path) -> None:
    spark.createDataFrame([(1, 2.5), (2, None)], "id BIGINT, v DOUBLE").coalesce(1).write.parquet(
        str(tmp_path / "pq")
    )
    spec = source(
        "FILE", {"file_path": str(tmp_path / "pq"), "format": "PARQUET"}, "id INT64", "v FLOAT64?"
    )
    assert not is_bounded(spec)  # a directory
    sink = file_sink(tmp_path / "out", "id INT64", "v FLOAT64?", format="PARQUET")
    run_bounded(spark, spec, sink, tmp_path)
    assert sorted(read_file_sink(spark, sink), key=str) == [(1, 2.5), (2, None)]


@needs_suite
def test_single_file_is_read_once_across_restarts(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "in [1].csv"  # glob characters in the name are taken literally
    shutil.copy(TESTDATA / "small/stream8.csv", data)
    spec = source("FILE", {"file_path": str(data)}, "id UINT64", "value UINT64", "timestamp UINT64")
    sink = file_sink(tmp_path / "out", "id UINT64", "value UINT64", "timestamp UINT64")
    first = run_bounded(spark, spec, sink, tmp_path)
    second = run_bounded(spark, spec, sink, tmp_path)  # same checkpoint: nothing new
    assert first.lastProgress is not None
    assert second.lastProgress is None or second.lastProgress["numInputRows"] == 0
    assert sorted(read_file_sink(None, sink)) == STREAM8


def test_growing_directory_is_exactly_once_across_a_restart(spark: Any, tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    spec = source("FILE", {"file_path": str(incoming)}, "id INT64")
    assert not is_bounded(spec)
    sink = file_sink(tmp_path / "out", "id INT64")

    def drop(name: str, ids: range) -> None:
        temporary = tmp_path / f".{name}"
        temporary.write_text("".join(f"{i}\n" for i in ids))
        temporary.rename(incoming / name)  # files must appear atomically

    def start() -> Any:
        return start_sink(
            read_source(spark, spec, tmp_path / "staging"),
            sink,
            query_name="grow",
            checkpoint_dir=str(tmp_path / "checkpoint"),
            output_mode="append",
            available_now=False,
        )

    drop("a.csv", range(0, 10))
    query = start()
    query.processAllAvailable()
    drop("b.csv", range(10, 20))
    query.processAllAvailable()
    query.stop()
    drop("c.csv", range(20, 30))  # arrives while the query is down
    query = start()
    query.processAllAvailable()
    drop("d.csv", range(30, 40))
    query.processAllAvailable()
    query.stop()
    assert sorted(read_file_sink(None, sink)) == [(i,) for i in range(40)]


def test_bounded_generator_emits_nes_rows(spark: Any, tmp_path: Path) -> None:
    spec = source(
        "GENERATOR",
        {
            "`SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES": "ALL",
            "`SOURCE`.SEED": 1,
            "`SOURCE`.GENERATOR_SCHEMA": "SEQUENCE UINT64 0 10 1, SEQUENCE FLOAT32 0 5 1",
        },
        "id UINT64",
        "field2 FLOAT32",
    )
    assert is_bounded(spec)
    sink = file_sink(tmp_path / "out", "id UINT64", "field2 FLOAT32")
    run_bounded(spark, spec, sink, tmp_path)
    assert sorted(read_file_sink(None, sink)) == [(i, float(min(i, 5))) for i in range(10)]
    assert sorted(read_file_sink_lines(sink))[:2] == ["0,0.0", "1,1.0"]


def test_unbounded_generator_is_rate_driven(spark: Any, tmp_path: Path) -> None:
    spec = source(
        "GENERATOR",
        {
            "generator_schema": "SEQUENCE INT64 0 5 1, RANDOMSTR 2 2",
            "stop_when": "NONE",
            "rate_config": "emit_rate 50",
        },
        "id INT64",
        "word VARSIZED",
    )
    assert not is_bounded(spec)
    sink = file_sink(tmp_path / "out", "id INT64", "word VARSIZED")
    query = start_sink(
        read_source(spark, spec, tmp_path / "staging"),
        sink,
        query_name="gen",
        checkpoint_dir=str(tmp_path / "checkpoint"),
        output_mode="append",
        available_now=False,
    )
    try:
        for _ in range(60):
            query.awaitTermination(1)
            if len(read_file_sink(None, sink)) >= 10:
                break
    finally:
        query.stop()
    rows = read_file_sink(None, sink)
    assert len(rows) >= 10
    assert {row[0] for row in rows} <= set(range(6))
    assert all(len(row[1]) == 2 for row in rows)


@pytest.fixture
def line_server() -> Iterator[tuple[int, threading.Event]]:
    """A TCP server on a free port sending three CSV lines to each client, then idling."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            with client:
                client.sendall(b"1|a\n2|b\n3|c\n")
                stop.wait(30)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], stop
    stop.set()
    thread.join(5)
    server.close()


def test_tcp_source_reads_lines(
    spark: Any, tmp_path: Path, line_server: tuple[int, threading.Event]
) -> None:
    port, _ = line_server
    spec = source(
        "TCP",
        {"SOCKET_HOST": "127.0.0.1", "SOCKET_PORT": port, "field_delimiter": "|"},
        "id INT32",
        "s TEXT",
    )
    assert not is_bounded(spec)
    sink = file_sink(tmp_path / "out", "id INT32", "s VARSIZED")
    query = start_sink(
        read_source(spark, spec, tmp_path / "staging"),
        sink,
        query_name="tcp",
        checkpoint_dir=str(tmp_path / "checkpoint"),
        output_mode="append",
        available_now=False,
    )
    try:
        for _ in range(60):
            query.awaitTermination(1)
            if len(read_file_sink(None, sink)) >= 3:
                break
    finally:
        query.stop()
    assert sorted(read_file_sink(None, sink)) == [(1, "a"), (2, "b"), (3, "c")]


def test_kafka_without_its_jar_names_the_setting(spark: Any, tmp_path: Path) -> None:
    spec = source("KAFKA", {"bootstrap_servers": "127.0.0.1:9", "topic": "t"}, "id INT64")
    with pytest.raises(ConnectorError, match=KAFKA_JARS_ENV):
        read_source(spark, spec, tmp_path)
    assert kafka_jars_conf({}) == {}
    with pytest.raises(ConnectorError, match="do not exist"):
        kafka_jars_conf({KAFKA_JARS_ENV: str(tmp_path / "missing.jar")})


def test_missing_file_is_a_connector_error(spark: Any, tmp_path: Path) -> None:
    spec = source("FILE", {"file_path": str(tmp_path / "nope.csv")}, "id INT64")
    with pytest.raises(ConnectorError, match=r"nope\.csv"):
        read_source(spark, spec, tmp_path)
