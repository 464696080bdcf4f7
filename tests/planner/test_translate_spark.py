"""Translation tests on local Spark: C++ arithmetic, windows flushed at the end of bounded input,
NebulaStream's window joins, timestamp functions, and how build() treats the session."""

from __future__ import annotations

import random
import struct
import threading
import time
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planner.spark_runs import Col, bound_plan, plain, run_to_end
from streamctl.error_codes import NOT_SUPPORTED
from streamctl.nes_types import integer_range
from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.planner.types import _common_numeric
from streamctl.spark import sql_text as S
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.translate import (
    EXECUTION_CONF,
    SPARK_CONF,
    TranslatedQuery,
    build,
    spark_conf,
)

pytestmark = pytest.mark.spark

INTEGERS = ["INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"]


def _short(type_name: str) -> str:
    return type_name.lower().replace("uint", "u").replace("int", "i").replace("float", "f")


# ---- reference semantics -------------------------------------------------------------------


def _wrap(value: int, type_name: str) -> int:
    low, high = integer_range(type_name)
    return (value - low) % (high - low + 1) + low


def _truncating_division(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _reference(operation: str, a: int, b: int, a_type: str, b_type: str) -> Any:
    common = _common_numeric(a_type, b_type)
    x, y = _wrap(a, common), _wrap(b, common)
    if operation == "+":
        return _wrap(x + y, common)
    if operation == "-":
        return _wrap(x - y, common)
    if operation == "*":
        return _wrap(x * y, common)
    if operation == "/":
        return None if y == 0 else _wrap(_truncating_division(x, y), common)
    if operation == "%":
        return None if y == 0 else _wrap(x - _truncating_division(x, y) * y, common)
    if operation == "<":
        return x < y
    return x == y


def _samples(type_name: str, rng: random.Random) -> list[int]:
    low, high = integer_range(type_name)
    picks = {low, high, 0, 1, min(high, 42), max(low, -42), max(low, -1), high // 2 + 1}
    picks.update(rng.randint(low, high) for _ in range(6))
    return sorted(picks)


def _spark_value(value: Any, type_name: str) -> Any:
    return Decimal(value) if type_name == "UINT64" else value


def _run_batch(
    spark: Any,
    text: str,
    sources: dict[str, tuple[list[Col], list[tuple[Any, ...]]]],
    tmp_path: Path,
    relation: bool = False,
) -> list[Any]:
    """The rows of ``text`` over ``sources``, each given to ``build`` as a DataFrame, or with
    ``relation`` as a Relation (what the agent gives for a single physical source)."""
    query_plan = bound_plan(text, sources)

    def read_source(name: str) -> Any:
        columns, rows = sources[name]
        frame = spark.createDataFrame(rows, spark_schema(columns))
        return S.Relation(frame) if relation else frame

    translated = build(query_plan, spark, read_source, bounded=False)
    return [tuple(plain(v) for v in row) for row in translated.dataframe.collect()]


# ---- arithmetic ----------------------------------------------------------------------------


@pytest.mark.parametrize("left", INTEGERS)
def test_integer_arithmetic_and_comparisons_follow_cpp(
    spark: Any, tmp_path: Path, left: str
) -> None:
    rng = random.Random(left)
    operations = ["+", "-", "*", "/", "%", "<", "=="]
    columns = [Col("a", left)] + [Col(f"b{_short(t)}", t) for t in INTEGERS]
    left_values = _samples(left, rng)
    # No zero divisor: an integer division or modulo by zero fails the whole query
    # (null_handling.md: ArithmeticalError; tests/differential/test_regressions.py).
    right_values = {t: [v for v in _samples(t, rng) if v != 0] for t in INTEGERS}
    rows = []
    for index in range(max(len(left_values), *(len(v) for v in right_values.values())) * 2):
        a = rng.choice(left_values)
        rights = [right_values[t][index % len(right_values[t])] for t in INTEGERS]
        rows.append((a, *rights))
    items = [
        f"a {operation} b{_short(right)} AS r{i}_{j}"
        for i, right in enumerate(INTEGERS)
        for j, operation in enumerate(operations)
    ]
    spark_rows = [
        tuple(_spark_value(v, c.type) for v, c in zip(row, columns, strict=True)) for row in rows
    ]
    results = _run_batch(
        spark,
        f"SELECT {', '.join(items)} FROM pairs INTO File()",
        {"pairs": (columns, spark_rows)},
        tmp_path,
    )
    assert len(results) == len(rows)
    for row, result in zip(rows, results, strict=True):
        expected = [
            _reference(operation, row[0], row[1 + i], left, right)
            for i, right in enumerate(INTEGERS)
            for operation in operations
        ]
        assert list(result) == expected, (left, row)


def test_long_and_nested_arithmetic_plans_and_wraps_like_cpp(spark: Any, tmp_path: Path) -> None:
    """A chain of 150 INT32 additions (the planner takes 200 levels of nesting) and 8 nested
    UINT64 additions plan and compute C++'s wrapped sums: expressions reach Spark as SQL
    text, whose parser recursed past the driver's default thread stack at 100 additions, and
    whose UINT64 conversions once named their operand three times (text growing 9x a level)."""
    terms, nested = 150, 8
    rows = [(7, 2**63 + 5), (-(2**31) + 3, 2**64 - 1), (2**31 - 1, 0)]
    columns = [Col("a", "INT32"), Col("u", "UINT64")]
    results = _run_batch(
        spark,
        f"SELECT {' + '.join(['a'] * terms)} AS s, {' + '.join(['u'] * nested)} AS t "
        "FROM nums INTO File()",
        {"nums": (columns, [(a, Decimal(u)) for a, u in rows])},
        tmp_path,
    )
    assert sorted(results) == sorted(
        (_wrap(a * terms, "INT32"), _wrap(u * nested, "UINT64")) for a, u in rows
    )


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def test_float32_arithmetic_rounds_like_single_precision(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(7)
    rows = [(_float32(rng.uniform(-1e6, 1e6)), _float32(rng.uniform(-1e3, 1e3))) for _ in range(50)]
    rows.append((1.0, 0.0))
    rows.append((-1.0, 0.0))
    results = _run_batch(
        spark,
        "SELECT a + b AS s, a * b AS p, a / b AS q, ROUND(a) AS r, CEIL(a) AS c FROM f INTO File()",
        {"f": ([Col("a", "FLOAT32"), Col("b", "FLOAT32")], rows)},
        tmp_path,
    )
    for (a, b), (total, product, quotient, rounded, ceiling) in zip(rows, results, strict=True):
        assert total == _float32(a + b)
        assert product == _float32(a * b)
        if b == 0:
            assert quotient == (float("inf") if a > 0 else float("-inf"))
        else:
            assert quotient == _float32(a / b)
        assert rounded == _float32(float(int(abs(a) + 0.5)) * (1 if a >= 0 else -1))
        assert ceiling == _float32(float(-int(-a // 1)))


def test_nulls_and_three_valued_logic(spark: Any, tmp_path: Path) -> None:
    rows = [(1, None, True), (None, 2, None), (3, 4, False)]
    results = _run_batch(
        spark,
        "SELECT a + b AS s, a == b AS e, f AND (a < b) AS x, ISNULL(a) AS n, f OR TRUE AS o "
        "FROM n INTO File()",
        {"n": ([Col("a", "INT32"), Col("b", "INT32"), Col("f", "BOOLEAN")], rows)},
        tmp_path,
    )
    assert results == [
        (None, None, None, False, True),
        (None, None, None, True, True),
        (7, False, False, False, True),
    ]


def test_timestamp_functions(spark: Any, tmp_path: Path) -> None:
    texts = ["1970-01-01T00:00:01.234Z", "1970-01-01T01:00:00+01:00", "2021-12-14T15:05:03", None]
    results = _run_batch(
        spark,
        "SELECT CASTTOUNIXTS(t) AS ms, CASTFROMUNIXTS(CASTTOUNIXTS(t)) AS back FROM ts INTO File()",
        {"ts": ([Col("t", "VARSIZED")], [(t,) for t in texts])},
        tmp_path,
    )
    assert results == [
        (1234, "1970-01-01T00:00:01.234Z"),
        (0, "1970-01-01T00:00:00.000Z"),
        (1639494303000, "2021-12-14T15:05:03.000Z"),
        (None, None),
    ]
    with pytest.raises(Exception, match="CASTTOUNIXTS"):
        _run_batch(
            spark,
            "SELECT CASTTOUNIXTS(t) AS ms FROM ts INTO File()",
            {"ts": ([Col("t", "VARSIZED")], [("2023-02-29T12:00:00Z",)])},
            tmp_path,
        )


def test_build_restores_the_session_conf(spark: Any, tmp_path: Path) -> None:
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        wrapped = _run_batch(
            spark,
            "SELECT a + a AS s FROM w INTO File()",
            {"w": ([Col("a", "INT64")], [(2**63 - 1,)])},
            tmp_path,
        )
        assert wrapped == [(-2,)]
        assert spark.conf.get("spark.sql.ansi.enabled") == "true"
        # a Relation source is analysed with the operators, under the planner's settings too
        wrapped = _run_batch(
            spark,
            "SELECT a + a AS s FROM w WHERE a > INT64(0) INTO File()",
            {"w": ([Col("a", "INT64")], [(2**63 - 1,)])},
            tmp_path,
            relation=True,
        )
        assert wrapped == [(-2,)]
        assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    # what build analyses with: C++ integer semantics, and the settings the plans run with
    assert SPARK_CONF == {"spark.sql.ansi.enabled": "false", **EXECUTION_CONF}


class _SlowConf:
    """A session's settings whose reads and writes let other threads run in between."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {"spark.sql.ansi.enabled": "true"}

    def get(self, key: str, default: str | None = None) -> str | None:
        time.sleep(0.001)
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        time.sleep(0.001)
        self.values[key] = value

    def unset(self, key: str) -> None:
        time.sleep(0.001)
        self.values.pop(key, None)


def test_concurrent_settings_blocks_never_see_each_other() -> None:
    """Threads sharing a session (an agent's explain, validate and a Spark Connect start) each
    see their own settings for the whole of their block, and the session's own are back
    afterwards, whatever the interleaving."""
    session = SimpleNamespace(conf=_SlowConf())
    seen: list[tuple[int, str | None]] = []

    def block(number: int) -> None:
        settings = {"spark.sql.ansi.enabled": f"value {number}", f"own {number}": "x"}
        with spark_conf(session, settings):  # type: ignore[arg-type]
            for _ in range(5):
                seen.append((number, session.conf.get("spark.sql.ansi.enabled")))
            with spark_conf(session, SPARK_CONF):  # type: ignore[arg-type]  # re-entrant
                seen.append((number, session.conf.get("spark.sql.ansi.enabled") + " inner"))
            seen.append((number, session.conf.get("spark.sql.ansi.enabled")))  # restored

    threads = [threading.Thread(target=block, args=(number,), daemon=True) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    for number, value in seen:
        assert value in (f"value {number}", "false inner"), (number, value)
    assert len(seen) == 6 * 7
    assert session.conf.values == {"spark.sql.ansi.enabled": "true"}


def test_inline_sources_need_a_reader(spark: Any, tmp_path: Path) -> None:
    bound = bind_query(
        parse_query(
            "SELECT a FROM File('x.csv' AS `SOURCE`.FILE_PATH, "
            "SCHEMA(a INT8) AS `SOURCE`.`SCHEMA`) INTO File()"
        ),
        MemoryCatalog(),
    )
    with pytest.raises(PlannerError) as error:
        build(bound.plan, spark, lambda name: None, bounded=True)  # type: ignore[arg-type,return-value]
    assert error.value.code == NOT_SUPPORTED


# ---- streaming: windows and joins on bounded input -----------------------------------------


def _stream(spark: Any, directory: Path, columns: list[Col], rows: list[str]) -> Any:
    """A tiny CSV stream reader: rows of text, one file, the columns' Spark types."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "part.csv").write_text("".join(row + "\n" for row in rows))
    return spark.readStream.schema(spark_schema(columns)).csv(str(directory))


def _run_stream(
    spark: Any,
    text: str,
    sources: dict[str, tuple[list[Col], list[str]]],
    tmp_path: Path,
    *,
    bounded: bool = True,
) -> tuple[TranslatedQuery, list[tuple[Any, ...]]]:
    query_plan = bound_plan(text, sources)

    def read_source(name: str) -> Any:
        columns, rows = sources[name]
        return _stream(spark, tmp_path / "sources" / name, columns, rows)

    translated = build(query_plan, spark, read_source, bounded=bounded)
    name = f"q{abs(hash(text)) % 10**8}_{len(list(tmp_path.iterdir()))}"
    rows = run_to_end(spark, translated, name, tmp_path / "checkpoint")
    return translated, sorted(rows)


READINGS = (
    [Col("id", "UINT64", False), Col("value", "UINT64", False), Col("ts", "UINT64", False)],
    ["1,1,1000", "1,2,1500", "2,5,2100", "1,7,2999", "2,1,61000"],
)


def test_a_bounded_window_query_starts_again_from_its_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    """Started again from its checkpoint after it ended (as after a kill -9 of its agent at
    the wrong moment), a bounded window query runs a batch holding only a new end-of-input
    marker row and writes nothing more. Failed with constant marker values: with the input
    side planned as empty, Spark rewrote COUNT(value) into COUNT(1) and the aggregation's
    state had one field less than the checkpoint's ('STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE').
    """
    text = (
        "SELECT start, end, id, SUM(value) AS total, COUNT(value) AS n FROM readings "
        "GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
    )
    query_plan = bound_plan(text, {"readings": READINGS})
    columns, rows = READINGS

    def read_source(name: str) -> Any:
        return _stream(spark, tmp_path / "sources" / name, columns, rows)

    def run() -> list[tuple[Any, ...]]:
        """One run into a Parquet directory (the memory sink cannot restart); all its rows."""
        translated = build(query_plan, spark, read_source, bounded=True)
        query = (
            translated.dataframe.writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
        written = spark.read.parquet(str(tmp_path / "out")).collect()
        return sorted(tuple(plain(v) for v in row) for row in written)

    want = [(1000, 2000, 1, 3, 2), (2000, 3000, 1, 7, 1), (2000, 3000, 2, 5, 1)]
    want.append((61000, 62000, 2, 1, 1))
    assert run() == want
    assert run() == want  # nothing more


def test_every_tumbling_window_is_emitted_when_bounded_input_ends(
    spark: Any, tmp_path: Path
) -> None:
    translated, rows = _run_stream(
        spark,
        "SELECT start, end, id, SUM(value) AS total, COUNT(*) AS n FROM readings "
        "GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        {"readings": READINGS},
        tmp_path,
    )
    assert rows == [
        (1000, 2000, 1, 3, 2),
        (2000, 3000, 1, 7, 1),
        (2000, 3000, 2, 5, 1),
        (61000, 62000, 2, 1, 1),
    ]
    assert translated.available_now and translated.flushes_windows_at_end
    assert translated.output_mode == "append"


def test_sliding_windows_start_at_zero(spark: Any, tmp_path: Path) -> None:
    _, rows = _run_stream(
        spark,
        "SELECT start, end, MAX(value) AS m FROM readings "
        "WINDOW SLIDING(ts, SIZE 2 SEC, ADVANCE BY 1 SEC) INTO File()",
        {"readings": READINGS},
        tmp_path,
    )
    assert rows == [
        (0, 2000, 2),
        (1000, 3000, 7),
        (2000, 4000, 7),
        (60000, 62000, 1),
        (61000, 63000, 1),
    ]


def test_window_after_filter_and_union_is_flushed(spark: Any, tmp_path: Path) -> None:
    _, rows = _run_stream(
        spark,
        "SELECT COUNT(*) AS n FROM (SELECT * FROM readings WHERE value > UINT64(1) "
        "UNION SELECT * FROM readings WHERE id == UINT64(2)) WINDOW TUMBLING(ts, SIZE 1 MINUTE) "
        "INTO File()",
        {"readings": READINGS},
        tmp_path,
    )
    assert rows == [(4,), (1,)] or rows == [(1,), (4,)]


def test_sliding_window_join_pairs_once_per_common_window(spark: Any, tmp_path: Path) -> None:
    orders = (
        [Col("order_id", "INT64"), Col("customer", "INT64"), Col("ts", "INT64")],
        ["1,42,10000", "2,7,50000"],
    )
    payments = (
        [Col("paid_id", "INT64"), Col("amount", "FLOAT64"), Col("ts", "INT64")],
        ["1,99.5,12000", "2,1.0,90000"],
    )
    _, rows = _run_stream(
        spark,
        "SELECT start, order_id, amount FROM (SELECT * FROM orders) INNER JOIN "
        "(SELECT * FROM payments) ON order_id = paid_id "
        "WINDOW SLIDING(ts, SIZE 30 SEC, ADVANCE BY 5 SEC) INTO File()",
        {"orders": orders, "payments": payments},
        tmp_path,
    )
    assert rows == [(0, 1, 99.5), (5000, 1, 99.5), (10000, 1, 99.5)]


def test_unbounded_queries_get_no_markers(spark: Any, tmp_path: Path) -> None:
    lookup = MemoryCatalog({"readings": READINGS[0]})
    bound = bind_query(
        parse_query(
            "SELECT COUNT(*) AS n FROM readings WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
        ),
        lookup,
    )
    translated = build(
        bound.plan,
        spark,
        lambda name: _stream(spark, tmp_path / "in", READINGS[0], READINGS[1]),
        bounded=False,
    )
    assert not translated.available_now and not translated.flushes_windows_at_end
    assert translated.dataframe.isStreaming


def test_plans_from_json_translate_like_the_original(spark: Any, tmp_path: Path) -> None:
    lookup = MemoryCatalog({"readings": READINGS[0]})
    bound = bind_query(
        parse_query(
            "SELECT id, value * UINT64(2) AS v FROM readings WHERE ts > UINT64(1500) INTO File()"
        ),
        lookup,
    )
    restored = plan.QueryPlan.from_json_text(bound.plan.to_json_text())
    rows = [(1, 2, 1000), (3, 4, 2000)]

    def read_source(name: str) -> Any:
        return spark.createDataFrame(
            [tuple(Decimal(v) for v in r) for r in rows], spark_schema(READINGS[0])
        )

    first = build(bound.plan, spark, read_source, bounded=False)
    second = build(restored, spark, read_source, bounded=False)
    assert first.dataframe.columns == second.dataframe.columns == ["READINGS$ID", "V"]
    assert first.dataframe.collect() == second.dataframe.collect()


def test_a_source_relation_and_a_long_chain_of_filters_above_it(spark: Any, tmp_path: Path) -> None:
    """A source given as a Relation (its steps not yet analysed, as the agent's single
    physical sources are) is continued by the operators above it into one query text: 60
    nested queries, each a filter and a projection (120 subqueries), are read by Spark's
    parser and keep exactly the rows every filter keeps."""
    depth = 60
    statement = "SELECT a FROM s WHERE a > INT64(0)"
    for level in range(1, depth):
        statement = f"SELECT a FROM ({statement}) WHERE a > INT64({level})"
    rows = [(value,) for value in range(-5, depth + 5)]
    results = _run_batch(
        spark,
        statement + " INTO File()",
        {"s": ([Col("a", "INT64")], rows)},
        tmp_path,
        relation=True,
    )
    assert sorted(results) == [(value,) for value in range(depth, depth + 5)]
