"""Sinks as Spark streaming queries (imports pyspark).

Protocol: an agent starting a query calls :func:`start_sink` with the query's result
DataFrame, the sink spec, the query's stable name and its checkpoint directory; it gets the
running ``StreamingQuery``. The DataFrame's columns are matched to the sink schema by
position and cast to the sink's Spark types. Tests read results back with
:func:`read_file_sink` (Parquet too); the readers that need no Spark, and where each sink
writes, are :mod:`streamctl.sink_files` (the systest runner uses them).

Every sink rests on Spark's micro-batch protocol: a batch's offsets are logged in the
checkpoint before it runs, its output is written, then the batch is marked committed; after a
crash the last uncommitted batch runs again *with the same batch id and the same data*. A sink
is exactly once when writing a batch twice has the effect of writing it once:

* ``FILE`` (append mode): Spark's file sink. Files of a batch become visible by being listed
  in the sink's metadata log (``_spark_metadata``), committed once per batch id; files of
  failed attempts are never listed, and readers read only listed files. Exactly once. CSV is
  NebulaStream's text (:mod:`streamctl.nes_text`: no header, ``,``, ``NULL``, floats as
  ``153.0``/``-1.826087``; strings in double quotes with ``"`` doubled when the sink quotes
  strings); JSON one object per line as NES writes it (:func:`nes_json_line`); Parquet is
  Spark's. Each query writes into
  ``<sink root>/<query name>`` (:func:`~streamctl.sink_files.sink_root`), since a Spark file
  sink owns its directory.
* ``FILE`` (complete mode): each batch is the whole result; it is written to
  ``_snapshots/batch-<id>`` and then ``_snapshots/LATEST`` is atomically switched to it.
  Rewriting a batch rewrites the same snapshot. Exactly once. (No update mode.)
* ``CHECKSUM``: NES's two numbers (tuples, byte sum of the NES CSV text mod 2**64) of each
  batch are stored atomically in a file named by the batch id (complete mode: ``latest.json``,
  replaced), so a replayed batch overwrites its own result;
  :func:`~streamctl.sink_files.read_checksum` sums them.
  Exactly once. Directory: ``<file_path>/<query name>``, or ``<checkpoint>/checksum``.
  (No update mode: NES checksums a stream of rows, not of row updates.)
* ``POSTGRESQL``: each batch is written on the driver in one PostgreSQL transaction together
  with a marker row ``(query, stream id, batch id)`` in ``streamctl_sink_batches``; a batch
  whose marker exists is skipped. The stream id is Spark's query id, kept in the checkpoint
  (``<checkpoint>/metadata``, read through the batch's own session, so the writer works on
  Spark Connect sessions, which have no SparkContext), so a query started afresh (new
  checkpoint) is not mistaken for a replay. Exactly once. Complete mode replaces the table's
  rows in that transaction.
* ``PRINT``: rows to the agent's stdout (``[query] row``); a replayed batch prints again: at
  least once. ``VOID``: Spark's ``noop`` sink.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from streamctl.catalog.urls import libpq_url
from streamctl.nes_text import Checksum, line_byte_sum, plain_value
from streamctl.nes_types import FLOAT_TYPES, STRING_TYPES
from streamctl.sink_files import (
    LATEST,
    SNAPSHOTS,
    checksum_directory,
    committed_files,
    file_sink_directory,
    read_file_sink_rows,
)
from streamctl.spark import sql_text as S
from streamctl.spark.float_text import with_float_texts
from streamctl.spark.spark_types import spark_schema, spark_type_ddl
from streamctl.spark.specs import ConnectorError, SinkSpec
from streamctl.spark.sql_text import Sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = [
    "MARKER_TABLE",
    "BatchWriter",
    "ChecksumWriter",
    "PostgresBatchWriter",
    "PrintWriter",
    "SnapshotWriter",
    "batch_writer",
    "nes_csv_line",
    "nes_json_line",
    "nes_text_lines",
    "postgres_connect_args",
    "read_file_sink",
    "start_batch_writer",
    "start_sink",
]

log = logging.getLogger(__name__)

MARKER_TABLE: Final = "streamctl_sink_batches"
"""PostgreSQL table of committed batches: one row per (query, stream id, batch id)."""

BatchWriter = Callable[["DataFrame", int], None]
"""A ``foreachBatch`` function: writes one micro-batch, idempotently by batch id."""

_OUTPUT_MODES: Final = ("append", "complete", "update")


# --- entry point -----------------------------------------------------------------------------


def start_sink(
    df: DataFrame,
    spec: SinkSpec,
    *,
    query_name: str,
    checkpoint_dir: str,
    output_mode: str,
    available_now: bool,
) -> StreamingQuery:
    """Start the streaming query writing ``df`` into the sink (see the module docstring).

    ``available_now`` runs it with ``trigger(availableNow=True)`` (bounded input: the query
    stops after processing everything); otherwise micro-batches run as data arrives.
    """
    if output_mode not in _OUTPUT_MODES:
        raise ConnectorError(f"output mode {output_mode!r}; expected one of {_OUTPUT_MODES}")
    frame = _conform(df, spec)
    if spec.type == "VOID":
        writer = frame.writeStream.format("noop")
        return _start(writer, query_name, checkpoint_dir, output_mode, available_now)
    if spec.type == "FILE" and output_mode == "append":
        return _start_file_sink(frame, spec, query_name, checkpoint_dir, available_now)
    write = batch_writer(
        spec, query_name=query_name, checkpoint_dir=checkpoint_dir, output_mode=output_mode
    )
    return start_batch_writer(
        frame,
        write,
        query_name=query_name,
        checkpoint_dir=checkpoint_dir,
        output_mode=output_mode,
        available_now=available_now,
    )


def batch_writer(
    spec: SinkSpec, *, query_name: str, checkpoint_dir: str, output_mode: str
) -> BatchWriter:
    """The ``foreachBatch`` writer of a sink written batch by batch."""
    if spec.type == "FILE":
        if output_mode != "complete":
            raise ConnectorError("FILE sinks support the append and complete output modes")
        return SnapshotWriter(spec, file_sink_directory(spec, query_name))
    if spec.type == "CHECKSUM":
        if output_mode == "update":
            raise ConnectorError("CHECKSUM sinks support the append and complete output modes")
        directory = checksum_directory(spec, query_name, checkpoint_dir)
        return ChecksumWriter(spec, directory, complete=output_mode == "complete")
    if spec.type == "POSTGRESQL":
        if output_mode == "update":
            raise ConnectorError("POSTGRESQL sinks support the append and complete output modes")
        return PostgresBatchWriter(
            spec, query_name, complete=output_mode == "complete", checkpoint_dir=checkpoint_dir
        )
    if spec.type == "PRINT":
        return PrintWriter(spec, query_name)
    raise ConnectorError(f"{spec.type} sinks are not written batch by batch")


def start_batch_writer(
    df: DataFrame,
    write: BatchWriter,
    *,
    query_name: str,
    checkpoint_dir: str,
    output_mode: str,
    available_now: bool,
) -> StreamingQuery:
    """Start a streaming query handing each micro-batch to ``write`` (``foreachBatch``)."""
    if isinstance(write, PostgresBatchWriter) and write.checkpoint_dir is None:
        write = dataclasses.replace(write, checkpoint_dir=checkpoint_dir)  # its stream id
    writer = df.writeStream.foreachBatch(write)
    return _start(writer, query_name, checkpoint_dir, output_mode, available_now)


def _start(
    writer: Any, query_name: str, checkpoint_dir: str, output_mode: str, available_now: bool
) -> StreamingQuery:
    writer = (
        writer.queryName(query_name)
        .option("checkpointLocation", checkpoint_dir)
        .outputMode(output_mode)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    query: StreamingQuery = writer.start()
    return query


def _conform(df: DataFrame, spec: SinkSpec) -> DataFrame:
    """The result's columns, by position, named and typed as the sink schema."""
    if len(df.columns) != len(spec.schema):
        raise ConnectorError(
            f"sink {spec.name!r} has {len(spec.schema)} columns, the query writes "
            f"{len(df.columns)}: {df.columns}"
        )
    return S.project(
        df,
        [
            S.col(source).cast(spark_type_ddl(column["type"])).alias(column["name"])
            for source, column in zip(df.columns, spec.schema, strict=True)
        ],
    )


# --- NebulaStream's CSV text in Spark --------------------------------------------------------
#
# Built as Spark SQL text (streamctl.spark.sql_text): a projection costs a call into the JVM
# per column, not per node.


_FLOAT_TEXT: Final = "nes#float_text#"
"""Prefix of the staged float text columns (:func:`streamctl.spark.float_text.with_float_texts`)."""
_TEXT: Final = "nes#text#"
"""Prefix of the other columns' texts (:func:`nes_text_lines`)."""


def nes_csv_line(
    spec: SinkSpec, texts: Mapping[str, str], *, delimiter: str = ",", quote_strings: bool = False
) -> Sql:
    """A string expression: each row as NES's CSV formatter writes it (no newline), from the
    columns ``texts[name]``, one for every column of the sink, that hold each column's text
    (:func:`nes_text_lines` adds them); a string's text is unquoted, and quoted here when
    ``quote_strings``."""
    fields: list[Sql] = []
    for column in spec.schema:
        text: Sql = S.col(texts[column["name"]])
        if column["type"] in STRING_TYPES and quote_strings:
            # RFC 4180: a quote inside is doubled, so the field reads back (also by our parser)
            text = S.call("concat", '"', S.call("regexp_replace", text, '"', '""'), '"')
        fields.append(S.call("coalesce", text, "NULL"))
    return S.call("concat_ws", delimiter, *fields)


def _value_text(value: Sql, nes_type: str) -> Sql:
    """The CSV text of a value that is not a float, NULL where it is NULL: integers, booleans
    and strings are formatted by Spark. Floats are not: NES rounds like C's ``printf`` and
    Java's formatters round differently (:mod:`streamctl.spark.float_text`)."""
    if nes_type == "BOOLEAN":
        return S.when(value, "true").when(~value, "false")
    return value.cast("STRING")


def _json_string(text: Sql) -> Sql:
    """``text`` as a JSON string literal (quoted and escaped by Spark's JSON writer)."""
    return S.call("regexp_extract", S.call("to_json", S.call("array", text)), r"(?s)^\[(.*)\]$", 1)


_NON_FINITE_TEXTS: Final = ("nan", "inf", "-inf")
"""The float texts that are no JSON number (:mod:`streamctl.spark.float_text`)."""


def nes_json_line(spec: SinkSpec, texts: Mapping[str, str]) -> Sql:
    """A string expression: each row as one JSON object, keys the sink's column names in
    order, from the columns ``texts[name]``, one for every column of the sink, that hold each
    column's CSV text (:func:`nes_text_lines` adds them).

    nes-docs/null_handling.md, "Output Formatting": "NULL values are rendered as the string
    `NULL` in both CSV and JSON output", with the example ``{"ts": 1, "temperature": "NULL",
    ...}`` / ``{"ts": 2, "temperature": "25", ...}`` for ``ts UINT64 NOT NULL, temperature
    INT32``. So a nullable column's value is a JSON string holding its CSV text (``"25"``,
    ``"1.5"``, ``"true"``, ``"NULL"`` for NULL), a NOT NULL column's value is a JSON number,
    boolean or string (a float NaN or infinity, which JSON numbers cannot be, as a string).
    Floats are formatted as in CSV (six decimals at most, :func:`streamctl.nes_text.format_float`).
    """
    members: list[Sql] = []
    for column in spec.schema:
        text: Sql = S.col(texts[column["name"]])
        nes_type = column["type"]
        literal: Sql
        if column["nullable"] or nes_type in STRING_TYPES:
            literal = _json_string(S.call("coalesce", text, "NULL"))
        elif nes_type in FLOAT_TYPES:
            # the non-finite texts need no escaping inside quotes
            quoted = S.call("concat", '"', text, '"')
            # NULL (a NOT NULL column holds none through the planner: sink_checks) as JSON's
            # null, as before
            number = S.call("coalesce", text, "null")
            literal = S.when(text.isin(*_NON_FINITE_TEXTS), quoted).otherwise(number)
        else:
            literal = text
        members.append(S.lit(json.dumps(column["name"]) + ":"))
        members.append(literal)
        members.append(S.lit(","))
    return S.call("concat", "{", *members[:-1], "}")


def nes_text_lines(df: DataFrame, spec: SinkSpec) -> DataFrame:
    """One string column ``value`` with each row in the sink's text format (its columns are
    the sink's, :func:`_conform`).

    The columns that are no floats become texts first, in the projection before the floats'
    steps: the last of those steps is not code-generated (``reflect``) and so ends Spark's
    generated stage, and the row handed across then holds those texts, the float columns and
    their steps' values, and no decimals. Handed across as itself, a ``UINT64`` (a
    ``DECIMAL(20,0)``) went through a ``BigInteger`` per row both ways: a fifth of a
    filter/project query's time (Java Flight Recorder)."""
    floats = [column["name"] for column in spec.schema if column["type"] in FLOAT_TYPES]
    others = [column for column in spec.schema if column["type"] not in FLOAT_TYPES]
    texts = {column["name"]: f"{_TEXT}{index}" for index, column in enumerate(others)}
    # one query: Spark parses and analyses the formatting's projections once (S.Relation)
    texts_of = S.project(
        S.Relation(df),
        [
            *(S.col(name) for name in floats),
            *(
                _value_text(S.col(column["name"]), column["type"]).alias(texts[column["name"]])
                for column in others
            ),
        ],
    )
    formatted, float_texts = with_float_texts(texts_of, floats, _FLOAT_TEXT)
    texts.update(zip(floats, float_texts, strict=True))
    if spec.config.get("format", "CSV") == "JSON":
        line = nes_json_line(spec, texts)
    else:
        line = nes_csv_line(
            spec,
            texts,
            delimiter=spec.config.get("field_delimiter", ","),
            quote_strings=bool(spec.config.get("quote_strings", False)),
        )
    return S.project(formatted, [line.alias("value")]).frame()


# --- FILE ------------------------------------------------------------------------------------


def _start_file_sink(
    frame: DataFrame, spec: SinkSpec, query_name: str, checkpoint_dir: str, available_now: bool
) -> StreamingQuery:
    directory = str(file_sink_directory(spec, query_name))
    if spec.config["format"] in ("CSV", "JSON"):
        writer = nes_text_lines(frame, spec).writeStream.format("text")
    else:
        writer = frame.writeStream.format(spec.config["format"].lower())
    writer = writer.option("path", directory)
    return _start(writer, query_name, checkpoint_dir, "append", available_now)


def _write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (readers see the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass
class SnapshotWriter:
    """FILE sink in complete mode: each batch's full result as a snapshot, then switched to."""

    spec: SinkSpec
    directory: Path

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        snapshots = self.directory / SNAPSHOTS
        target = snapshots / f"batch-{batch_id:020d}"
        if self.spec.config["format"] in ("CSV", "JSON"):
            nes_text_lines(batch, self.spec).write.mode("overwrite").text(str(target))
        else:
            writer = batch.write.mode("overwrite").format(self.spec.config["format"].lower())
            writer.save(str(target))
        _write_atomically(snapshots / LATEST, str(batch_id))
        for old in snapshots.glob("batch-*"):
            if old.name < target.name:
                shutil.rmtree(old, ignore_errors=True)


def read_file_sink(
    session: SparkSession | None, spec: SinkSpec, query_name: str | None = None
) -> list[tuple[Any, ...]]:
    """The committed rows of a FILE sink as tuples of Python values (NULL is None).

    Only files of committed batches are read (the metadata log, or the latest snapshot).
    CSV and JSON need no Spark session (:func:`streamctl.sink_files.read_file_sink_rows`);
    Parquet does.
    """
    if spec.type != "FILE":
        raise ConnectorError(f"{spec.describe()} is not a FILE sink")
    if spec.config["format"] == "PARQUET":
        if session is None:
            raise ConnectorError("reading a Parquet FILE sink needs a Spark session")
        files = committed_files(spec, query_name)
        if not files:
            return []
        frame = session.read.schema(spark_schema(spec.schema)).parquet(*(str(f) for f in files))
        return [tuple(plain_value(v) for v in row) for row in frame.collect()]
    return read_file_sink_rows(spec, query_name)


# --- CHECKSUM --------------------------------------------------------------------------------


@dataclass
class ChecksumWriter:
    """CHECKSUM sink: NES's checksum of each batch, stored under the batch id."""

    spec: SinkSpec
    directory: Path
    complete: bool = False

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType

        byte_sum = F.udf(line_byte_sum, LongType(), useArrow=False)
        lines = nes_text_lines(batch, self.spec)
        totals = lines.agg(F.count(F.lit(1)), F.sum(byte_sum(F.col("value")))).first()
        assert totals is not None
        result = Checksum(int(totals[0]), int(totals[1] or 0) % 2**64)
        content = json.dumps(
            {"batch": batch_id, "tuples": result.tuples, "checksum": result.checksum}
        )
        name = "latest.json" if self.complete else f"batch-{batch_id:020d}.json"
        _write_atomically(self.directory / name, content)


# --- PRINT -----------------------------------------------------------------------------------


@dataclass
class PrintWriter:
    """PRINT sink: each row as a line on the agent's stdout, prefixed by the query name."""

    spec: SinkSpec
    query_name: str
    out: Any = field(default=None, repr=False)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        out = self.out or sys.stdout
        count = 0
        for row in nes_text_lines(batch, self.spec).toLocalIterator():
            out.write(f"[{self.query_name}] {row[0]}\n")
            count += 1
        out.flush()
        log.debug("query %s printed batch %s: %s rows", self.query_name, batch_id, count)


# --- POSTGRESQL ------------------------------------------------------------------------------

_POSTGRES_TYPES: Final[Mapping[str, str]] = {
    "INT8": "smallint",
    "INT16": "smallint",
    "INT32": "integer",
    "INT64": "bigint",
    "UINT8": "smallint",
    "UINT16": "integer",
    "UINT32": "bigint",
    "UINT64": "numeric(20,0)",
    "FLOAT32": "real",
    "FLOAT64": "double precision",
    "BOOLEAN": "boolean",
    "CHAR": "character(1)",
    "VARSIZED": "text",
}


def postgres_connect_args(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(conninfo, keyword overrides)`` for ``psycopg.connect`` from a canonical config."""
    keywords = {
        key: config[key]
        for key in ("host", "port", "dbname", "user", "password")
        if config[key] is not None
    }
    return libpq_url(config["url"] or ""), keywords


@dataclass
class PostgresBatchWriter:
    """POSTGRESQL sink: a batch and its marker row in one transaction; known batches skipped.

    ``after_commit`` (tests) is called with the batch id after the transaction committed and
    before Spark commits the batch -- where a crash makes Spark replay a written batch.
    ``checkpoint_dir`` is the query's: its ``metadata`` names the stream (without one, every
    stream of the query is one).
    """

    spec: SinkSpec
    query_name: str
    complete: bool = False
    after_commit: Callable[[int], None] | None = None
    checkpoint_dir: str | None = None
    _prepared: bool = field(default=False, repr=False)
    _stream_id: str | None = field(default=None, repr=False)

    def _stream(self, batch: DataFrame) -> str:
        """Spark's query id, from the checkpoint's ``metadata`` file (``{"id": ...}``, written
        when the query first started): one per checkpoint, whatever the run. Read with the
        batch's session: ``foreachBatch`` on Spark Connect has no SparkContext whose local
        properties would name it."""
        if self._stream_id is None:
            if self.checkpoint_dir is None:
                self._stream_id = ""
            else:
                path = f"{self.checkpoint_dir.rstrip('/')}/metadata"
                text = "".join(row.value for row in batch.sparkSession.read.text(path).collect())
                self._stream_id = str(json.loads(text)["id"])
        return self._stream_id

    def _table(self) -> Any:
        from psycopg import sql

        return sql.Identifier(*str(self.spec.config["table"]).split("."))

    def _marker_table(self) -> Any:
        from psycopg import sql

        parts = str(self.spec.config["table"]).split(".")
        return sql.Identifier(*parts[:-1], MARKER_TABLE)

    def _prepare(self, connection: Any) -> None:
        from psycopg import sql

        columns = sql.SQL(", ").join(
            sql.SQL("{} {}").format(
                sql.Identifier(column["name"]),
                sql.SQL(
                    _POSTGRES_TYPES[column["type"]] + ("" if column["nullable"] else " NOT NULL")
                ),
            )
            for column in self.spec.schema
        )
        with connection.transaction():
            if self.spec.config["create_table"]:
                connection.execute(
                    sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(self._table(), columns)
                )
            connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (query text NOT NULL, stream_id text NOT NULL,"
                    " batch_id bigint NOT NULL, sink_table text NOT NULL, row_count bigint,"
                    " committed_at timestamptz NOT NULL DEFAULT now(),"
                    " PRIMARY KEY (query, stream_id, batch_id))"
                ).format(self._marker_table())
            )
        self._prepared = True

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        import psycopg
        from psycopg import sql

        stream_id = self._stream(batch)
        conninfo, keywords = postgres_connect_args(self.spec.config)
        names = sql.SQL(", ").join(sql.Identifier(c["name"]) for c in self.spec.schema)
        with psycopg.connect(conninfo, **keywords) as connection:
            if not self._prepared:
                self._prepare(connection)
            with connection.transaction():
                marker = connection.execute(
                    sql.SQL(
                        "INSERT INTO {} (query, stream_id, batch_id, sink_table) VALUES"
                        " (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
                    ).format(self._marker_table()),
                    (self.query_name, stream_id, batch_id, self.spec.config["table"]),
                )
                if marker.rowcount == 0:
                    log.info(
                        "query %s: batch %s already in PostgreSQL, skipped",
                        self.query_name,
                        batch_id,
                    )
                    return
                if self.complete:
                    connection.execute(sql.SQL("DELETE FROM {}").format(self._table()))
                rows = 0
                with connection.cursor().copy(
                    sql.SQL("COPY {} ({}) FROM STDIN").format(self._table(), names)
                ) as copy:
                    for row in batch.toLocalIterator():
                        copy.write_row(tuple(row))
                        rows += 1
                connection.execute(
                    sql.SQL(
                        "UPDATE {} SET row_count = %s WHERE query = %s AND stream_id = %s"
                        " AND batch_id = %s"
                    ).format(self._marker_table()),
                    (rows, self.query_name, stream_id, batch_id),
                )
        if self.after_commit is not None:
            self.after_commit(batch_id)
