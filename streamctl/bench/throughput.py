"""``streamctl bench throughput``: rows/s of queries as streamctl plans them, against the same
queries written by hand in PySpark, in one run on one SparkSession.

What a run does
---------------
1. Writes ``rows`` rows ``id,k,v,ts`` (seeded: ``id`` the row number, ``k`` a key in ``0..7``,
   ``v`` a float in ``[0, 1)``, ``ts`` milliseconds ascending, ten rows a millisecond) in each
   input format a query reads: CSV, JSON lines and Parquet (``id``/``ts`` as Parquet's
   unsigned 64-bit integers, as a NebulaStream ``UINT64`` is written).
2. Starts one SparkSession as an agent does (:func:`~streamctl.agent.process.agent_spark_session`,
   the agent's settings, ``master``, a heap of ``driver_memory``: :data:`DRIVER_MEMORY`).
3. For each query of :data:`QUERIES` (filter/project, tumbling window with GROUP BY, sliding
   window, windowed join; CSV, JSON and Parquet in and out), runs both sides over the whole
   input, each as a bounded streaming query (``availableNow``) into a file directory of the
   query's output format, one after the other:

   * ``planned``: the NebulaStream statement bound by the product's planner and run by the
     agent's code path (:func:`~streamctl.spark.source_readers.source_relation`,
     :func:`~streamctl.spark.translate.build`, :func:`~streamctl.spark.sink_writers.start_sink`
     into a File sink with NES's formatting);
   * ``hand``: the same query as a PySpark user writes it (Spark's readers and writers of the
     format, ``withWatermark`` and ``window`` for the windows, a window-equality stream-stream
     join).

   Each side runs unmeasured over the whole input first, for at least :data:`WARM_UP_S`
   seconds and at least once, then ``repeat`` times (:data:`REPEAT`) and for at least
   :data:`MEASURE_S` seconds, alternating with the other side; the median counts. The rate
   is the query's steady rate, as a continuous query runs: a side's first run over the whole input
   also pays for the JVM compiling its generated code, which takes longer the more code
   there is (the planned filter/project's first run takes 4.3-9.3 s, its next ones
   2.2-3.3 s; the hand-written one's 2.1-2.7 s, then 1.6-2.1 s), and a warm-up on a small
   input does not bring the JIT there.
4. Prints per query ``planned_s``, ``hand_s``, both rows/s, ``ratio`` (hand time over planned
   time: 1.0 is Spark's own speed), the rows each side wrote, and ``min_ratio`` over all
   queries; and of each side's time the part its ``start`` took (``planned_start_s``,
   ``hand_start_s``: building the query's DataFrames, a call into the JVM for each projection
   and each of its columns, where Spark parses and analyses it, and ``writeStream.start()``).
   The row counts agree but for windows: the hand-written side never emits the last
   window(s) of the input (Spark's append mode emits a window once the watermark passes its
   end, and nothing moves it at the end of bounded input), where NebulaStream, and so the
   planned side, emits every window when the input ends.

The coordinator's part of a start (a pass, the agent's action) is ``bench deploy``'s; this one
measures the data path alone, where the planned query spends its rows.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["QUERIES", "ThroughputQuery", "run_throughput_bench", "write_inputs"]

COLUMNS: Final = (
    ("id", "UINT64"),
    ("k", "INT32"),
    ("v", "FLOAT64"),
    ("ts", "UINT64"),
)
KEYS: Final = 8
FORMATS: Final = ("CSV", "JSON", "PARQUET")

Reader = Callable[[], "DataFrame"]
"""A new streaming DataFrame of the input, typed as a PySpark user reads it (``t``: ``ts`` as a
timestamp)."""


@dataclass(frozen=True)
class ThroughputQuery:
    name: str
    statement: str
    """The NebulaStream statement over ``src`` (and ``src2``, the same input), into ``out``."""
    output: tuple[tuple[str, str], ...]
    """The sink's columns."""
    hand: Callable[[Reader], DataFrame]
    """The same query in PySpark."""
    input_format: str = "CSV"
    output_format: str = "CSV"


def _filter_project(read: Reader) -> DataFrame:
    from pyspark.sql import functions as F

    return read().where(F.col("v") > 0.5).select("id", (F.col("v") * 2).alias("v2"), "ts")


def _window_bounds() -> list[Any]:
    from pyspark.sql import functions as F

    return [
        F.unix_millis(F.col("window.start")).alias("start"),
        F.unix_millis(F.col("window.end")).alias("end"),
    ]


def _tumbling(read: Reader) -> DataFrame:
    from pyspark.sql import functions as F

    windowed = read().withWatermark("t", "0 seconds").groupBy(F.window("t", "1 second"), "k")
    totals = windowed.agg(F.count("v").alias("n"), F.sum("v").alias("total"))
    return totals.select(*_window_bounds(), "k", "n", "total")


def _sliding(read: Reader) -> DataFrame:
    from pyspark.sql import functions as F

    windowed = (
        read().withWatermark("t", "0 seconds").groupBy(F.window("t", "2 seconds", "1 second"))
    )
    return windowed.agg(F.max("v").alias("top")).select(*_window_bounds(), "top")


def _windowed_join(read: Reader) -> DataFrame:
    from pyspark.sql import functions as F

    left = read().withWatermark("t", "0 seconds").withColumn("window", F.window("t", "1 second"))
    right = (
        read()
        .withWatermark("t", "0 seconds")
        .select(
            F.col("id").alias("id_r"),
            F.col("v").alias("v_right"),
            F.window("t", "1 second").alias("window_r"),
        )
    )
    joined = left.join(
        right, (F.col("id") == F.col("id_r")) & (F.col("window") == F.col("window_r"))
    )
    return joined.select(*_window_bounds(), "id", "v", "v_right")


_TUMBLING_STATEMENT: Final = (
    "SELECT start, end, k, COUNT(v) AS n, SUM(v) AS total FROM src "
    "GROUP BY k WINDOW TUMBLING(ts, SIZE 1 SEC) INTO out"
)
_TUMBLING_OUTPUT: Final = (
    ("start", "UINT64"),
    ("end", "UINT64"),
    ("k", "INT32"),
    ("n", "UINT64"),
    ("total", "FLOAT64"),
)
_FILTER_STATEMENT: Final = (
    "SELECT id, v * FLOAT64(2) AS v2, ts FROM src WHERE v > FLOAT64(0.5) INTO out"
)
_FILTER_OUTPUT: Final = (("id", "UINT64"), ("v2", "FLOAT64"), ("ts", "UINT64"))

QUERIES: Final = (
    ThroughputQuery("filter_project", _FILTER_STATEMENT, _FILTER_OUTPUT, _filter_project),
    ThroughputQuery("tumbling_group_by", _TUMBLING_STATEMENT, _TUMBLING_OUTPUT, _tumbling),
    ThroughputQuery(
        "sliding",
        "SELECT start, end, MAX(v) AS top FROM src "
        "WINDOW SLIDING(ts, SIZE 2 SEC, ADVANCE BY 1 SEC) INTO out",
        (("start", "UINT64"), ("end", "UINT64"), ("top", "FLOAT64")),
        _sliding,
    ),
    ThroughputQuery(
        "windowed_join",
        "SELECT start, end, id, v, src2.v AS v_right FROM src INNER JOIN src2 ON id = src2.id "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO out",
        (
            ("start", "UINT64"),
            ("end", "UINT64"),
            ("id", "UINT64"),
            ("v", "FLOAT64"),
            ("v_right", "FLOAT64"),
        ),
        _windowed_join,
    ),
    ThroughputQuery(
        "filter_project_json",
        _FILTER_STATEMENT,
        _FILTER_OUTPUT,
        _filter_project,
        input_format="JSON",
        output_format="JSON",
    ),
    ThroughputQuery(
        "tumbling_group_by_parquet",
        _TUMBLING_STATEMENT,
        _TUMBLING_OUTPUT,
        _tumbling,
        input_format="PARQUET",
        output_format="PARQUET",
    ),
)


def write_inputs(directory: Path, rows: int, seed: int) -> None:
    """The input in every format, ``directory/<format>/part-0.<format>``: the same rows,
    generated once."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    for format_ in FORMATS:
        (directory / format_).mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    columns: dict[str, list[Any]] = {"id": [], "k": [], "v": [], "ts": []}
    with (
        (directory / "CSV" / "part-0.csv").open("w", encoding="utf-8") as csv_out,
        (directory / "JSON" / "part-0.json").open("w", encoding="utf-8") as json_out,
    ):
        for id_ in range(rows):
            key, value, ts = rng.randrange(KEYS), rng.random(), id_ // 10
            csv_out.write(f"{id_},{key},{value!r},{ts}\n")
            json_out.write(json.dumps({"id": id_, "k": key, "v": value, "ts": ts}) + "\n")
            for name, item in zip(columns, (id_, key, value, ts), strict=True):
                columns[name].append(item)
    parquet_types = {"id": pa.uint64(), "k": pa.int32(), "v": pa.float64(), "ts": pa.uint64()}
    table = pa.table(
        {name: pa.array(items, parquet_types[name]) for name, items in columns.items()}
    )
    pq.write_table(table, directory / "PARQUET" / "part-0.parquet")


@dataclass(frozen=True)
class Side:
    start: Callable[[], Any]
    """Starts the bounded streaming query."""
    rows_out: Callable[[], int]
    """How many rows it wrote (its committed output, read after it ended)."""


def _planned(session: SparkSession, query: ThroughputQuery, inputs: Path, work: Path) -> Side:
    from streamctl.planner.binder import bind_query
    from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
    from streamctl.planner.options import normalize_sink_options, normalize_source_options
    from streamctl.planner.parser import parse_query
    from streamctl.protocol import messages as m
    from streamctl.sink_files import committed_files, read_file_sink_lines
    from streamctl.spark.sink_writers import start_sink
    from streamctl.spark.source_readers import source_relation
    from streamctl.spark.specs import SinkSpec, SourceSpec
    from streamctl.spark.translate import build

    source_columns = [m.ColumnSpec(name, type_, False) for name, type_ in COLUMNS]
    sink_columns = [m.ColumnSpec(name, type_, False) for name, type_ in query.output]
    sink_config = normalize_sink_options(
        "FILE", {"file_path": str(work / "out"), "format": query.output_format}
    )
    catalog = MemoryCatalog(
        {"src": source_columns, "src2": source_columns},
        [SinkInfo("out", sink_columns, "FILE", sink_config)],
    )
    bound = bind_query(parse_query(query.statement), catalog)
    schema = [{"name": c.name, "type": c.type, "nullable": False} for c in source_columns]
    source_config = normalize_source_options(
        "FILE", {"file_path": str(inputs / query.input_format), "format": query.input_format}
    )
    source = SourceSpec(1, "FILE", source_config, schema)
    sink = SinkSpec(
        "out",
        "FILE",
        sink_config,
        [{"name": c.name, "type": c.type, "nullable": False} for c in sink_columns],
    )

    query_name = f"planned_{query.name}_{work.name}"

    def start() -> Any:
        translated = build(
            bound.plan,
            session,
            lambda name: source_relation(session, source, work / "staging" / name),
            bounded=True,
        )
        return start_sink(
            translated.dataframe,
            sink,
            query_name=query_name,
            checkpoint_dir=str(work / "checkpoint"),
            output_mode=translated.output_mode,
            available_now=True,
        )

    def rows_out() -> int:
        if query.output_format != "PARQUET":
            return len(read_file_sink_lines(sink, query_name))
        files = [str(path) for path in committed_files(sink, query_name)]
        return int(session.read.parquet(*files).count()) if files else 0

    return Side(start, rows_out)


_HAND_SCHEMAS: Final = {
    "CSV": "id LONG, k INT, v DOUBLE, ts LONG",
    "JSON": "id LONG, k INT, v DOUBLE, ts LONG",
    # what Spark's Parquet reader makes of unsigned 64-bit integers
    "PARQUET": "id DECIMAL(20,0), k INT, v DOUBLE, ts DECIMAL(20,0)",
}


def _hand(session: SparkSession, query: ThroughputQuery, inputs: Path, work: Path) -> Side:
    from pyspark.sql import functions as F

    def read() -> DataFrame:
        frame = (
            session.readStream.schema(_HAND_SCHEMAS[query.input_format])
            .format(query.input_format.lower())
            .load(str(inputs / query.input_format))
        )
        return frame.withColumn("t", F.timestamp_millis(F.col("ts").cast("long")))

    def start() -> Any:
        return (
            query.hand(read)
            .writeStream.format(query.output_format.lower())
            .option("path", str(work / "out"))
            .option("checkpointLocation", str(work / "checkpoint"))
            .queryName(f"hand_{query.name}_{work.name}")
            .trigger(availableNow=True)
            .outputMode("append")
            .start()
        )

    def rows_out() -> int:
        output = str(work / "out")
        if query.output_format == "PARQUET":
            return int(session.read.parquet(output).count())
        return int(session.read.text(output).count())

    return Side(start, rows_out)


def _timed(start: Callable[[], Any]) -> tuple[float, float]:
    """Seconds until the query ended, and of those the seconds ``start`` took (building the
    DataFrames, JVM calls that parse and analyse each projection, and ``writeStream.start()``)."""
    began = time.perf_counter()
    streaming = start()
    started = time.perf_counter()
    streaming.awaitTermination()
    if streaming.exception() is not None:
        raise RuntimeError(f"{streaming.name} failed: {streaming.exception()}")
    return time.perf_counter() - began, started - began


def _release_state(session: SparkSession) -> None:
    """Unload the state stores of the runs that ended. Spark keeps a finished query's
    state-store providers (their state in memory) loaded until its maintenance task, every
    60 s, unloads them; the windowed join's runs (2M rows of state per side each) would pile
    up in the heap after the other queries' runs until the bench runs out of it. Both sides
    start from the same clean heap this way; the next query's first state store starts the
    maintenance again."""
    jvm = session._jvm
    assert jvm is not None  # a classic session: the bench launches its own JVM
    jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()


WARM_UP_S: Final = 10.0
"""Unmeasured running time of each side before its measured runs (at least one run). The JIT
compiles a query's code by how long it has run, not by how many runs: the Parquet tumbling
query (1.2-1.4 s a run) still gets faster at its tenth run, on both sides, so after one
warm-up run the figure would measure how far the JIT has got, more so on the side with more
generated code; the windowed join (25 s a run) is warm after its first."""

REPEAT: Final = 3
"""Measured runs of each side, at least: single runs of the same side on this machine vary
by up to a fifth."""

MEASURE_S: Final = 10.0
"""Measured running time of each side, at least (more runs than :data:`REPEAT` where a run is
short): the median of three 1.2 s runs of the Parquet query moves by a tenth from one bench
run to the next, a fixed cost of a run (a batch's planning, the state store's commit, a
pause of the garbage collector) deciding it."""

DRIVER_MEMORY: Final = "4g"
"""The session's heap. A bounded run reads its whole input in one batch, so the windowed join
holds both inputs as join state at once: with Spark's default of 1g the hand-written join runs
out of heap at 500,000 rows and the planned one at 2,000,000."""


def _measured_enough(sides: Iterable[list[float]], repeat: int, measure_s: float) -> bool:
    """Whether every side has run ``repeat`` times and for ``measure_s`` seconds."""
    return all(len(runs) >= repeat and sum(runs) >= measure_s for runs in sides)


def run_throughput_bench(
    rows: int = 2_000_000,
    repeat: int = REPEAT,
    master: str = "local[2]",
    seed: int = 0,
    driver_memory: str = DRIVER_MEMORY,
    only: Sequence[str] = (),
    warm_up_s: float = WARM_UP_S,
    measure_s: float = MEASURE_S,
) -> dict[str, Any]:
    """The figures of :data:`QUERIES` (those named in ``only``, when given)."""
    from streamctl.agent.process import agent_spark_session

    unknown = set(only) - {query.name for query in QUERIES}
    if unknown:
        known = ", ".join(query.name for query in QUERIES)
        raise ValueError(f"unknown queries {sorted(unknown)}; known: {known}")
    chosen = [query for query in QUERIES if not only or query.name in only]

    root = Path(tempfile.mkdtemp(prefix="streamctl-bench-throughput-"))
    runs = iter(range(1_000_000))
    try:
        write_inputs(root / "input", rows, seed)
        session = agent_spark_session("bench_throughput", master, root / "spark", driver_memory)
        try:
            figures: dict[str, Any] = {}
            for query in chosen:
                sides: dict[str, Callable[[SparkSession, ThroughputQuery, Path, Path], Side]]
                sides = {"planned": _planned, "hand": _hand}
                seconds: dict[str, list[float]] = {side: [] for side in sides}
                starts: dict[str, list[float]] = {side: [] for side in sides}
                written: dict[str, int] = {}
                for make in sides.values():  # warm-up: code generation, class loading, JIT
                    warmed = 0.0
                    while warmed < warm_up_s or not warmed:
                        work = root / f"run-{next(runs)}"
                        warmed += _timed(make(session, query, root / "input", work).start)[0]
                        _release_state(session)
                        shutil.rmtree(work, ignore_errors=True)
                while not _measured_enough(seconds.values(), repeat, measure_s):
                    for name, make in sides.items():
                        work = root / f"run-{next(runs)}"
                        side = make(session, query, root / "input", work)
                        took, starting = _timed(side.start)
                        seconds[name].append(took)
                        starts[name].append(starting)
                        written[name] = side.rows_out()
                        _release_state(session)
                        shutil.rmtree(work, ignore_errors=True)
                planned, hand = (statistics.median(seconds[s]) for s in ("planned", "hand"))
                figures[query.name] = {
                    "input": query.input_format,
                    "output": query.output_format,
                    "planned_s": round(planned, 2),
                    "hand_s": round(hand, 2),
                    "planned_rows_per_s": round(rows / planned),
                    "hand_rows_per_s": round(rows / hand),
                    "ratio": round(hand / planned, 3),
                    "planned_start_s": round(statistics.median(starts["planned"]), 2),
                    "hand_start_s": round(statistics.median(starts["hand"]), 2),
                    "planned_rows_out": written["planned"],
                    "hand_rows_out": written["hand"],
                }
        finally:
            session.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "rows": rows,
        "repeat": repeat,
        "warm_up_s": warm_up_s,
        "measure_s": measure_s,
        "master": master,
        "queries": figures,
        "min_ratio": min(f["ratio"] for f in figures.values()),
    }
