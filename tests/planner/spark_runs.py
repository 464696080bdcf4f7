"""Running a NebulaStream query's translation on the tests' local SparkSession: the pieces the
Spark translation tests share (binding against in-memory sources, running a bounded stream to
its end, reading its rows back as plain Python values)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.translate import TranslatedQuery


@dataclass(frozen=True)
class Col:
    name: str
    type: str
    nullable: bool = True


def plain(value: Any) -> Any:
    """A Spark value as the tests write expectations: UINT64 (a DECIMAL(20,0)) as an int."""
    return int(value) if isinstance(value, Decimal) else value


def bound_plan(text: str, sources: Mapping[str, tuple[Sequence[Col], Any]]) -> plan.QueryPlan:
    """``text`` parsed and bound against sources given as ``name -> (columns, rows)``."""
    lookup = MemoryCatalog({name: list(columns) for name, (columns, _) in sources.items()})
    return bind_query(parse_query(text), lookup).plan


def run_to_end(
    spark: Any, translated: TranslatedQuery, name: str, checkpoint: Path
) -> list[tuple[Any, ...]]:
    """Run a bounded streaming translation to its end (``availableNow``) into an in-memory
    table ``name``; its rows, unsorted, as plain values (the table is dropped afterwards)."""
    query = (
        translated.dataframe.writeStream.format("memory")
        .queryName(name)
        .outputMode(translated.output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    rows = [tuple(plain(v) for v in row) for row in spark.sql(f"SELECT * FROM {name}").collect()]
    spark.sql(f"DROP VIEW IF EXISTS {name}")
    return rows


def csv_stream_reader(
    spark: Any, directory: Path, sources: Mapping[str, tuple[Sequence[Col], Any]]
) -> Callable[[str], Any]:
    """A ``read_source`` for :func:`streamctl.spark.translate.build`: each source's rows
    written as one CSV file under ``directory/<name>`` (``None`` as an empty field, as
    NebulaStream reads NULL) and read back as a bounded stream with the source's schema."""

    def read_source(name: str) -> Any:
        columns, rows = sources[name]
        folder = directory / name
        folder.mkdir(parents=True, exist_ok=True)
        lines = (",".join("" if v is None else str(v) for v in row) for row in rows)
        (folder / "part.csv").write_text("".join(line + "\n" for line in lines))
        return spark.readStream.schema(spark_schema(list(columns))).csv(str(folder))

    return read_source
