"""``streamctl bench throughput``: rows/s of queries as streamctl plans them, against the same
queries written by hand in PySpark, in one run on one SparkSession.

What a run does
---------------
1. Writes one CSV file of ``rows`` rows ``id,k,v,ts`` (seeded: ``k`` a key in ``0..7``, ``v`` a
   float in ``[0, 1)``, ``ts`` milliseconds ascending, ten rows a millisecond) into a source
   directory.
2. Starts one SparkSession as an agent does (:func:`~streamctl.worker.agent.agent_spark_session`,
   the agent's settings, ``master``).
3. For each query of :data:`QUERIES`, runs both sides over the whole file, each as a bounded
   streaming query (``availableNow``) into a CSV file directory, one after the other:

   * ``planned``: the NebulaStream statement bound by the product's planner and run by the
     agent's code path (:func:`~streamctl.spark.sources.read_source`,
     :func:`~streamctl.spark.translate.build`, :func:`~streamctl.spark.sinks.start_sink`
     into a File sink with NES's CSV formatting);
   * ``hand``: the same query as a PySpark user writes it (Spark's CSV reader and writer,
     ``withWatermark`` and ``window`` for the windows).

   Each side runs ``repeat`` times after one warm-up run on a small file; the median counts.
4. Prints per query ``planned_s``, ``hand_s``, both rows/s and ``ratio`` (hand time over
   planned time: 1.0 is Spark's own speed), and ``min_ratio`` over all queries.

The coordinator's part of a start (a pass, the agent's action) is ``bench deploy``'s; this one
measures the data path alone, where the planned query spends its rows.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["QUERIES", "ThroughputQuery", "run_throughput_bench"]

COLUMNS: Final = (
    ("id", "UINT64"),
    ("k", "INT32"),
    ("v", "FLOAT64"),
    ("ts", "UINT64"),
)
KEYS: Final = 8


@dataclass(frozen=True)
class ThroughputQuery:
    name: str
    statement: str
    """The NebulaStream statement, into sink ``out``."""
    output: tuple[tuple[str, str], ...]
    """The sink's columns."""
    hand: Callable[[DataFrame], DataFrame]
    """The same query in PySpark, over the typed input (``t``: ``ts`` as a timestamp)."""


def _filter_project(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.where(F.col("v") > 0.5).select("id", (F.col("v") * 2).alias("v2"), "ts")


def _tumbling(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    windowed = frame.withWatermark("t", "0 seconds").groupBy(F.window("t", "1 second"), "k")
    return windowed.agg(F.count("v").alias("n"), F.sum("v").alias("total")).select(
        (F.unix_millis(F.col("window.start"))).alias("start"),
        (F.unix_millis(F.col("window.end"))).alias("end"),
        "k",
        "n",
        "total",
    )


def _sliding(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    windowed = frame.withWatermark("t", "0 seconds").groupBy(F.window("t", "2 seconds", "1 second"))
    return windowed.agg(F.max("v").alias("top")).select(
        (F.unix_millis(F.col("window.start"))).alias("start"),
        (F.unix_millis(F.col("window.end"))).alias("end"),
        "top",
    )


QUERIES: Final = (
    ThroughputQuery(
        "filter_project",
        "SELECT id, v * FLOAT64(2) AS v2, ts FROM src WHERE v > FLOAT64(0.5) INTO out",
        (("id", "UINT64"), ("v2", "FLOAT64"), ("ts", "UINT64")),
        _filter_project,
    ),
    ThroughputQuery(
        "tumbling_group_by",
        "SELECT start, end, k, COUNT(v) AS n, SUM(v) AS total FROM src "
        "GROUP BY k WINDOW TUMBLING(ts, SIZE 1 SEC) INTO out",
        (
            ("start", "UINT64"),
            ("end", "UINT64"),
            ("k", "INT32"),
            ("n", "UINT64"),
            ("total", "FLOAT64"),
        ),
        _tumbling,
    ),
    ThroughputQuery(
        "sliding",
        "SELECT start, end, MAX(v) AS top FROM src "
        "WINDOW SLIDING(ts, SIZE 2 SEC, ADVANCE BY 1 SEC) INTO out",
        (("start", "UINT64"), ("end", "UINT64"), ("top", "FLOAT64")),
        _sliding,
    ),
)


def write_input(directory: Path, rows: int, seed: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with (directory / "part-0.csv").open("w", encoding="utf-8") as out:
        chunk: list[str] = []
        for row in range(rows):
            chunk.append(f"{row},{rng.randrange(KEYS)},{rng.random()!r},{row // 10}\n")
            if len(chunk) == 10_000:
                out.writelines(chunk)
                chunk.clear()
        out.writelines(chunk)


def _planned(
    session: SparkSession, query: ThroughputQuery, source_dir: Path, work: Path
) -> Callable[[], Any]:
    from streamctl.planner.binder import bind_query
    from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
    from streamctl.planner.options import normalize_sink_options, normalize_source_options
    from streamctl.planner.parser import parse_query
    from streamctl.spark.sinks import start_sink
    from streamctl.spark.sources import read_source
    from streamctl.spark.specs import SinkSpec, SourceSpec
    from streamctl.spark.translate import build
    from streamctl.workflows import messages as m

    source_columns = [m.ColumnSpec(name, type_, False) for name, type_ in COLUMNS]
    sink_columns = [m.ColumnSpec(name, type_, False) for name, type_ in query.output]
    sink_config = normalize_sink_options("FILE", {"file_path": str(work / "out")})
    catalog = MemoryCatalog(
        {"src": source_columns}, [SinkInfo("out", sink_columns, "FILE", sink_config)]
    )
    bound = bind_query(parse_query(query.statement), catalog)
    schema = [{"name": c.name, "type": c.type, "nullable": False} for c in source_columns]
    source_config = normalize_source_options("FILE", {"file_path": str(source_dir)})
    source = SourceSpec(1, "FILE", source_config, schema)
    sink = SinkSpec(
        "out",
        "FILE",
        sink_config,
        [{"name": c.name, "type": c.type, "nullable": False} for c in sink_columns],
    )

    def start() -> Any:
        translated = build(
            bound.plan,
            session,
            lambda _name: read_source(session, source, work / "staging"),
            bounded=True,
            work_dir=work / "query",
        )
        return start_sink(
            translated.dataframe,
            sink,
            query_name=f"planned_{query.name}_{work.name}",
            checkpoint_dir=str(work / "checkpoint"),
            output_mode=translated.output_mode,
            available_now=True,
        )

    return start


def _hand(
    session: SparkSession, query: ThroughputQuery, source_dir: Path, work: Path
) -> Callable[[], Any]:
    from pyspark.sql import functions as F

    schema = "id LONG, k INT, v DOUBLE, ts LONG"

    def start() -> Any:
        frame = session.readStream.schema(schema).csv(str(source_dir))
        frame = frame.withColumn("t", F.timestamp_millis(F.col("ts")))
        return (
            query.hand(frame)
            .writeStream.format("csv")
            .option("path", str(work / "out"))
            .option("checkpointLocation", str(work / "checkpoint"))
            .queryName(f"hand_{query.name}_{work.name}")
            .trigger(availableNow=True)
            .outputMode("append")
            .start()
        )

    return start


def _timed(start: Callable[[], Any]) -> float:
    began = time.perf_counter()
    streaming = start()
    streaming.awaitTermination()
    if streaming.exception() is not None:
        raise RuntimeError(f"{streaming.name} failed: {streaming.exception()}")
    return time.perf_counter() - began


def run_throughput_bench(
    rows: int = 2_000_000, repeat: int = 1, master: str = "local[2]", seed: int = 0
) -> dict[str, Any]:
    from streamctl.worker.agent import agent_spark_session

    root = Path(tempfile.mkdtemp(prefix="streamctl-bench-throughput-"))
    runs = iter(range(1_000_000))
    try:
        write_input(root / "warm", 20_000, seed)
        write_input(root / "input", rows, seed)
        session = agent_spark_session("bench_throughput", master, root / "spark")
        try:
            figures: dict[str, Any] = {}
            for query in QUERIES:
                sides = {"planned": _planned, "hand": _hand}
                seconds: dict[str, list[float]] = {side: [] for side in sides}
                for make in sides.values():  # warm-up: code generation, class loading
                    _timed(make(session, query, root / "warm", root / f"run-{next(runs)}"))
                for _ in range(repeat):
                    for side, make in sides.items():
                        work = root / f"run-{next(runs)}"
                        seconds[side].append(_timed(make(session, query, root / "input", work)))
                        shutil.rmtree(work, ignore_errors=True)
                planned, hand = (statistics.median(seconds[s]) for s in ("planned", "hand"))
                figures[query.name] = {
                    "planned_s": round(planned, 2),
                    "hand_s": round(hand, 2),
                    "planned_rows_per_s": round(rows / planned),
                    "hand_rows_per_s": round(rows / hand),
                    "ratio": round(hand / planned, 3),
                }
        finally:
            session.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "rows": rows,
        "repeat": repeat,
        "master": master,
        "queries": figures,
        "min_ratio": min(f["ratio"] for f in figures.values()),
    }
