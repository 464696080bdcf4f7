"""Developer harness: run NebulaStream systest queries through parser -> binder -> translate on a
local Spark session with ``trigger(availableNow=True)`` and compare with the expected rows.

Each query ends as ``passed``, ``failed`` (with the difference) or ``unsupported`` (with the
reason: a ``NOT_SUPPORTED`` planner error, or a source/sink type this harness does not provide).

Sources are read by a tiny CSV reader of its own (``ATTACH INLINE`` rows and ``ATTACH FILE``
files as text lines split at ``PARSER.FIELD_DELIMITER``, each field converted with the NES
type's Spark cast; an empty field is NULL, except in a ``NOT NULL`` text column). Results are
collected with Spark's memory sink. Rows compare as a multiset; numbers with a relative
tolerance of 1e-5.

Run as a script for the per-folder summary::

    python tests/planner/conformance_harness.py guide operator [function datatype ...]
"""

from __future__ import annotations

import itertools
import re
import shutil
import sys
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.systest_files import (
    TESTDATA,
    Query,
    Statement,
    SystestFile,
    read_systest,
    suite_files,
)
from streamctl.client.systest_compare import compare_rows, split_expected_row
from streamctl.planner import ast
from streamctl.planner.binder import BoundQuery, MemoryCatalog, SinkInfo, bind_query
from streamctl.planner.errors import NOT_SUPPORTED, PlannerError
from streamctl.planner.parser import parse_query, parse_statements
from streamctl.worker.spark_session import build_spark_session

_counter = itertools.count()


@dataclass
class Outcome:
    file: str
    index: int
    line: int
    status: str  # passed | failed | unsupported
    detail: str = ""

    @property
    def folder(self) -> str:
        return self.file.split("/")[0]


@dataclass
class PhysicalSource:
    source_type: str
    delimiter: str
    rows: list[str] | None
    file: str | None


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool


class Unsupported(Exception):
    """The harness cannot run this query (and says why)."""


class _FileState:
    """The catalog and the physical sources a file's DDL statements built so far."""

    def __init__(self) -> None:
        self.sources: dict[str, list[Column]] = {}
        self.physical: dict[str, list[PhysicalSource]] = {}
        self.sinks: dict[str, SinkInfo] = {}

    def apply(self, block: Statement) -> None:
        for statement in parse_statements(block.text):
            if isinstance(statement, ast.CreateLogicalSource):
                self.sources[statement.name.casefold()] = [
                    Column(c.catalog_name, c.type, c.nullable) for c in statement.columns
                ]
            elif isinstance(statement, ast.CreatePhysicalSource):
                config = ast.options_to_config(statement.options)
                delimiter = next(
                    (str(v) for k, v in config.items() if k.endswith("FIELD_DELIMITER")), ","
                )
                self.physical.setdefault(statement.logical_source.casefold(), []).append(
                    PhysicalSource(
                        statement.source_type, delimiter, block.inline_rows, block.attached_file
                    )
                )
            elif isinstance(statement, ast.CreateSink):
                self.sinks[statement.name.casefold()] = SinkInfo(
                    statement.name,
                    tuple(Column(c.catalog_name, c.type, c.nullable) for c in statement.columns),
                    statement.sink_type,
                    ast.options_to_config(statement.options),
                )

    def catalog(self) -> MemoryCatalog:
        return MemoryCatalog(
            {name: columns for name, columns in self.sources.items()}, list(self.sinks.values())
        )


class Harness:
    def __init__(self, spark: Any, work_root: Path) -> None:
        self.spark = spark
        self.work_root = work_root

    # -- sources

    def _csv_stream(self, directory: Path, columns: list[Column], delimiter: str) -> Any:
        from pyspark.sql import functions as F

        from streamctl.planner.types import spark_type

        lines = self.spark.readStream.format("text").load(str(directory))
        parts = F.split(F.col("value"), re.escape(delimiter), -1)
        fields = []
        for index, column in enumerate(columns):
            text = parts.getItem(index)
            if column.type in ("VARSIZED", "CHAR", "TEXT"):
                # NebulaStream reads an empty field as NULL in nullable columns only.
                value = F.when((text == "") & F.lit(column.nullable), F.lit(None)).otherwise(text)
            else:
                text = F.trim(text)
                value = (
                    F.when(text == "", F.lit(None)).otherwise(text).cast(spark_type(column.type))
                )
            fields.append(value.alias(column.name))
        return lines.filter(F.col("value") != "").select(*fields)

    def _stage(self, physical: PhysicalSource) -> Path:
        directory = self.work_root / f"src{next(_counter)}"
        directory.mkdir(parents=True)
        if physical.rows is not None:
            (directory / "data.csv").write_text("".join(row + "\n" for row in physical.rows))
        elif physical.file is not None:
            shutil.copy(TESTDATA / physical.file, directory / "data.csv")
        else:
            (directory / "data.csv").write_text("")
        return directory

    def reader(self, state: _FileState) -> Any:
        def read_source(name: str) -> Any:
            columns = state.sources[name.casefold()]
            physicals = state.physical.get(name.casefold(), [])
            if not physicals:
                physicals = [PhysicalSource("FILE", ",", [], None)]
            frames = []
            for physical in physicals:
                if physical.source_type != "FILE":
                    raise Unsupported(f"source type {physical.source_type} is not in the harness")
                frames.append(self._csv_stream(self._stage(physical), columns, physical.delimiter))
            frame = frames[0]
            for other in frames[1:]:
                frame = frame.unionByName(other)
            return frame

        return read_source

    def read_inline(self, scan: Any) -> Any:
        config = scan.config_dict()
        if scan.source_type != "FILE":
            raise Unsupported(f"inline source type {scan.source_type} is not in the harness")
        path = next((str(v) for k, v in config.items() if k.endswith("FILE_PATH")), None)
        if path is None:
            raise Unsupported("inline File source without FILE_PATH")
        delimiter = next((str(v) for k, v in config.items() if k.endswith("FIELD_DELIMITER")), ",")
        physical = PhysicalSource("FILE", delimiter, None, path)
        columns = [Column(f.name, f.type, f.nullable) for f in scan.fields]
        stream = self._csv_stream(self._stage(physical), columns, delimiter)
        from pyspark.sql import functions as F

        return stream.select(
            *(
                F.col(f"`{f.name}`").alias(name)
                for f, name in zip(scan.fields, scan.source_columns, strict=True)
            )
        )

    # -- running

    def run_query(self, text: str, state: _FileState) -> tuple[BoundQuery, list[tuple[Any, ...]]]:
        from streamctl.planner.translate import build

        bound = bind_query(parse_query(text), state.catalog())
        sink_type = (
            bound.inline_sink.sink_type
            if bound.inline_sink is not None
            else state.sinks[bound.sink_name.casefold()].type  # type: ignore[union-attr]
        ).upper()
        if sink_type not in ("FILE", "PRINT", "VOID", "CHECKSUM"):
            raise Unsupported(f"sink type {sink_type} is not in the harness")
        work_dir = self.work_root / f"q{next(_counter)}"
        translated = build(
            bound.plan,
            self.spark,
            self.reader(state),
            bounded=True,
            work_dir=work_dir,
            read_inline=self.read_inline,
        )
        name = f"harness_{next(_counter)}"
        query = (
            translated.dataframe.writeStream.format("memory")
            .queryName(name)
            .outputMode(translated.output_mode)
            .option("checkpointLocation", str(work_dir / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(300)
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
        finally:
            if query.isActive:
                query.stop()
        rows = [tuple(row) for row in self.spark.sql(f"SELECT * FROM {name}").collect()]
        self.spark.sql(f"DROP VIEW IF EXISTS {name}")
        if _is_checksum(bound, state):
            rows = [_checksum(bound, rows)]
        return bound, rows

    def run_file(self, systest: SystestFile) -> list[Outcome]:
        state = _FileState()
        outcomes = []
        for block in systest.blocks:
            if isinstance(block, Statement):
                state.apply(block)
                continue
            outcomes.append(self.run_block(systest, block, state))
        return outcomes

    def run_block(self, systest: SystestFile, query: Query, state: _FileState) -> Outcome:
        def outcome(status: str, detail: str = "") -> Outcome:
            return Outcome(systest.name, query.index, query.line, status, detail)

        try:
            bound, rows = self.run_query(query.text, state)
        except Unsupported as reason:
            return outcome("unsupported", str(reason))
        except PlannerError as error:
            if error.code == NOT_SUPPORTED:
                return outcome("unsupported", error.message)
            if query.expected_error is not None:
                if error.nes_code == query.expected_error:
                    return outcome("passed")
                return outcome(
                    "failed",
                    f"expected error {query.expected_error}, got {error.nes_code}: {error.message}",
                )
            return outcome("failed", f"{error.code}: {error.message}")
        except Exception as error:  # a runtime failure
            if query.expected_error is not None and query.expected_error >= 3000:
                return outcome("passed")
            return outcome("failed", f"runtime error: {_first_line(error)}")
        if query.expected_error is not None:
            if query.expected_error // 100 == 23:
                return outcome(
                    "unsupported",
                    f"expects placement error {query.expected_error} (the coordinator's job)",
                )
            return outcome("failed", f"expected error {query.expected_error}, got {len(rows)} rows")
        types = [column.type for column in bound.output_schema]
        if _is_checksum(bound, state):
            types = ["UINT64", "UINT64"]
        if query.differential is not None:
            try:
                _, other = self.run_query(query.differential, state)
            except Exception as error:
                return outcome("failed", f"differential query failed: {_first_line(error)}")
            expected = [[_text(v, t) for v, t in zip(row, types, strict=False)] for row in other]
        else:
            expected = [split_expected_row(row, len(types)) for row in query.expected_rows or []]
        actual = [[_text(v, t) for v, t in zip(row, types, strict=False)] for row in rows]
        problem = compare_rows(expected, actual, types)
        return outcome("failed", problem) if problem else outcome("passed")


def _is_checksum(bound: BoundQuery, state: _FileState) -> bool:
    if bound.inline_sink is not None:
        return bound.inline_sink.sink_type.upper() == "CHECKSUM"
    return state.sinks[bound.sink_name.casefold()].type.upper() == "CHECKSUM"  # type: ignore[union-attr]


def _checksum(bound: BoundQuery, rows: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    from streamctl.planner.connectors.nes_text import Checksum, format_row, plain_value

    types = [column.type for column in bound.output_schema]
    checksum = Checksum.of_lines(format_row(types, [plain_value(v) for v in row]) for row in rows)
    return (checksum.tuples, checksum.checksum)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


def _text(value: Any, type_name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return str(int(value))
    return str(value)


def make_session(warehouse: Path) -> Any:
    return build_spark_session(
        "local[2]",
        "streamctl-conformance",
        warehouse,
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.bindAddress": "127.0.0.1",
        },
    )


def main(folders: list[str]) -> int:
    work_root = Path(tempfile.mkdtemp(prefix="streamctl-conformance-"))
    spark = make_session(work_root / "warehouse")
    harness = Harness(spark, work_root)
    outcomes: list[Outcome] = []
    try:
        for path in suite_files(*folders):
            systest = read_systest(path)
            try:
                file_outcomes = harness.run_file(systest)
            except Exception:
                traceback.print_exc()
                continue
            for result in file_outcomes:
                mark = {"passed": ".", "failed": "F", "unsupported": "u"}[result.status]
                print(
                    mark,
                    result.file,
                    f"#{result.index}",
                    f"line {result.line}",
                    result.detail,
                    flush=True,
                )
            outcomes.extend(file_outcomes)
    finally:
        spark.stop()
        shutil.rmtree(work_root, ignore_errors=True)
    counts: dict[str, Counter[str]] = {}
    for result in outcomes:
        counts.setdefault(result.folder, Counter())[result.status] += 1
    print()
    for folder, counter in sorted(counts.items()):
        total = sum(counter.values())
        print(
            f"{folder}: {counter['passed']}/{total} passed, {counter['failed']} failed, "
            f"{counter['unsupported']} unsupported"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["guide", "operator"]))
