"""Binder tests: NebulaStream names and types, the sink check, errors with positions, the
suite's queries, determinism and robustness."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.systest_files import queries_with_catalog, read_systest, suite_file_params
from streamctl.error_codes import (
    INVALID_STATEMENT,
    NOT_SUPPORTED,
    SINK_SCHEMA_MISMATCH,
    TYPE_MISMATCH,
    UNKNOWN_COLUMN,
    UNKNOWN_SINK,
    UNKNOWN_SOURCE,
)
from streamctl.planner import plan
from streamctl.planner.binder import BoundQuery, bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.planner.types import _common_numeric

pytestmark = pytest.mark.quick


@dataclass(frozen=True)
class Col:
    name: str
    type: str
    nullable: bool = False


NUMERIC = [
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "FLOAT32",
    "FLOAT64",
]


def _short(type_name: str) -> str:
    """INT8 -> i8, UINT64 -> u64, FLOAT32 -> f32 (the suite's column names)."""
    return type_name.lower().replace("uint", "u").replace("int", "i").replace("float", "f")


def catalog(**sinks: list[tuple[str, str]]) -> MemoryCatalog:
    result = MemoryCatalog(
        {
            "s": [Col("speed", "FLOAT64"), Col("altitude", "FLOAT64"), Col("ts", "UINT64")],
            "stream": [Col("id", "UINT64"), Col("value", "UINT64"), Col("timestamp", "UINT64")],
            "t": [Col("tid", "INT64"), Col("tval", "INT64"), Col("ts", "INT64")],
            "u": [Col("uid", "INT64"), Col("uval", "INT64", True), Col("ts", "INT64")],
            "texts": [Col("t", "VARSIZED"), Col("n", "INT32", True), Col("flag", "BOOLEAN")],
            "numbers": [Col(_short(name), name) for name in NUMERIC],
        }
    )
    for name, columns in sinks.items():
        result.add_sink(SinkInfo(name, tuple(Col(n, t) for n, t in columns), "FILE"))
    return result


def bind(text: str, lookup: MemoryCatalog | None = None) -> BoundQuery:
    return bind_query(parse_query(text), lookup or catalog())


def bind_error(text: str, lookup: MemoryCatalog | None = None) -> PlannerError:
    with pytest.raises(PlannerError) as error:
        bind(text, lookup)
    return error.value


def output(text: str) -> list[tuple[str, str, bool]]:
    bound = bind(text)
    return [(c.name, c.type, c.nullable) for c in bound.output_schema]


# ---- names ---------------------------------------------------------------------------------


def test_nebulastream_output_names() -> None:
    assert output("SELECT * FROM stream INTO File()") == [
        ("STREAM$ID", "UINT64", False),
        ("STREAM$VALUE", "UINT64", False),
        ("STREAM$TIMESTAMP", "UINT64", False),
    ]
    assert [
        n
        for n, _, _ in output("SELECT id AS new_id, value, id * UINT64(2) FROM stream INTO Print()")
    ][:2] == [
        "NEW_ID",
        "STREAM$VALUE",
    ]


def test_window_output_names() -> None:
    names = [
        name
        for name, _, _ in output(
            "SELECT start, end AS e, id, SUM(value), SUM(value) AS total, COUNT(*) FROM stream "
            "GROUP BY id WINDOW TUMBLING(timestamp, SIZE 5 SEC) INTO File()"
        )
    ]
    assert names == [
        "STREAM$START",
        "E",
        "STREAM$ID",
        "STREAM$VALUE_SUM",
        "STREAM$TOTAL",
        "STREAM$COUNT",
    ]


def test_join_output_names_and_window_bounds() -> None:
    bound = bind(
        "SELECT * FROM (SELECT * FROM t) INNER JOIN (SELECT * FROM u) ON tid = uid "
        "WINDOW TUMBLING(ts, SIZE 1 MINUTES) INTO File()"
    )
    assert [c.name for c in bound.output_schema] == [
        "TU$START", "TU$END", "T$TID", "T$TVAL", "T$TS", "U$UID", "U$UVAL", "U$TS",
    ]  # fmt: skip
    assert bound.windowed
    assert bound.event_time_columns == ("T$TS", "U$TS")
    join = next(op for op in plan.walk(bound.plan.root) if isinstance(op, plan.WindowJoin))
    assert join.window == plan.Window("tumbling", 60_000, 60_000, 0)


def test_qualified_and_dollar_names_resolve() -> None:
    assert (
        len(output("SELECT stream.id, `STREAM$VALUE`, STREAM.timestamp FROM stream INTO File()"))
        == 3
    )
    assert len(output("SELECT x.id FROM stream x INTO File()")) == 1
    assert len(output("SELECT q.id FROM (SELECT id FROM stream) q INTO File()")) == 1


def test_sources_inline_sources_and_sinks_are_reported() -> None:
    lookup = catalog(out=[("id", "UINT64")])
    bound = bind(
        "SELECT id FROM stream UNION SELECT id FROM File('a.csv' AS `SOURCE`.FILE_PATH, "
        "SCHEMA(id UINT64 NOT NULL) AS `SOURCE`.`SCHEMA`) INTO out",
        lookup,
    )
    assert bound.logical_sources == ("stream",)
    assert bound.sink_name == "out" and bound.inline_sink is None
    assert len(bound.inline_sources) == 1
    inline = bound.inline_sources[0]
    assert inline.source_type == "FILE" and inline.config_dict() == {"SOURCE.FILE_PATH": "a.csv"}
    assert inline.id == "inline:0"
    sinked = bind("SELECT id FROM stream INTO Checksum()")
    assert sinked.inline_sink is not None and sinked.inline_sink.sink_type == "CHECKSUM"


# ---- types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "common"),
    [
        ("INT8", "INT8", "INT32"),
        ("INT8", "UINT8", "INT32"),
        ("INT16", "UINT16", "INT32"),
        ("INT8", "INT64", "INT64"),
        ("INT8", "UINT32", "UINT32"),
        ("INT32", "UINT32", "UINT32"),
        ("INT64", "UINT32", "INT64"),
        ("INT64", "UINT64", "UINT64"),
        ("UINT8", "UINT16", "INT32"),
        ("UINT32", "UINT64", "UINT64"),
        ("INT64", "FLOAT32", "FLOAT32"),
        ("FLOAT32", "FLOAT64", "FLOAT64"),
        ("UINT64", "FLOAT32", "FLOAT32"),
    ],
)
def test_usual_arithmetic_conversions(a: str, b: str, common: str) -> None:
    assert _common_numeric(a, b) == common
    assert _common_numeric(b, a) == common


def test_expression_types() -> None:
    columns = output(
        "SELECT i8 + i8 AS a, u64 % INT32(3) AS b, ABS(i16) AS c, CEIL(f32) AS d, SQRT(u8) AS e, "
        "POW(i8, INT32(2)) AS f, i8 < u32 AS g, CONCAT(VARSIZED('x'), VARSIZED('y')) AS h, "
        "-u8 AS i, CASTTOUNIXTS(VARSIZED('1970-01-01T00:00:00Z')) AS j, "
        "CASTFROMUNIXTS(u64) AS k, FLOAT32(i64) AS l, 1 AS m, 3000000000 AS n, 2.5 AS o "
        "FROM numbers INTO File()"
    )
    assert [t for _, t, _ in columns] == [
        "INT32", "UINT64", "INT16", "FLOAT32", "FLOAT64", "FLOAT64", "BOOLEAN", "VARSIZED",
        "INT32", "UINT64", "VARSIZED", "FLOAT32", "INT32", "INT64", "FLOAT64",
    ]  # fmt: skip


def test_aggregate_types_and_nullability() -> None:
    columns = output(
        "SELECT COUNT(n), SUM(n), MIN(t), AVG(n), MEDIAN(n) FROM texts "
        "WINDOW TUMBLING(n, SIZE 1 SEC) INTO File()"
    )
    assert [(t, nullable) for _, t, nullable in columns] == [
        ("UINT64", False),
        ("INT32", True),
        ("VARSIZED", False),
        ("FLOAT64", True),
        ("FLOAT64", True),
    ]


def test_implicit_conversions_are_explicit_casts_in_the_plan() -> None:
    bound = bind("SELECT i8 + u32 AS x FROM numbers INTO File()")
    root = bound.plan.root
    assert isinstance(root, plan.Project)
    project = root.input
    assert isinstance(project, plan.Project)
    addition = project.columns[0].expr
    assert isinstance(addition, plan.CallExpr) and addition.function == "add"
    assert addition.type == "UINT32"
    assert [arg.type for arg in addition.args] == ["UINT32", "UINT32"]
    assert isinstance(addition.args[0], plan.CallExpr) and addition.args[0].function == "cast"


def test_typed_constants_are_folded_and_range_checked() -> None:
    bound = bind("SELECT i64 + UINT32(5) AS x, u8 == INT8(-1) AS y FROM numbers INTO File()")
    root = bound.plan.root
    assert isinstance(root, plan.Project) and isinstance(root.input, plan.Project)
    x, y = (column.expr for column in root.input.columns)
    assert x.args[1] == plan.LiteralExpr("5", "INT64")  # type: ignore[union-attr]
    assert y.args[1] == plan.LiteralExpr("-1", "INT32")  # type: ignore[union-attr]
    error = bind_error("SELECT UINT8(300) AS x FROM numbers INTO File()")
    assert error.code == TYPE_MISMATCH and "out of range for UINT8" in error.message
    assert bind_error("SELECT BOOLEAN(2.5) AS x FROM numbers INTO File()").code == TYPE_MISMATCH


# ---- the sink check ------------------------------------------------------------------------


def test_sink_accepts_nebulastream_spellings_of_names() -> None:
    lookup = catalog(
        a=[("STREAM$ID", "UINT64"), ("value", "UINT64")],
        b=[("stream.id", "UINT64")],
        c=[("new", "UINT64")],
    )
    bind("SELECT id, value FROM stream INTO a", lookup)
    bind("SELECT id FROM stream INTO b", lookup)
    bind("SELECT id + UINT64(1) AS new FROM stream INTO c", lookup)


def test_sink_mismatches_name_the_column() -> None:
    lookup = catalog(k=[("id", "UINT64")], wide=[("id", "INT64")], other=[("x", "UINT64")])
    error = bind_error("SELECT id, value FROM stream INTO k", lookup)
    assert error.code == SINK_SCHEMA_MISMATCH and "produces 2 column(s)" in error.message
    error = bind_error("SELECT id FROM stream INTO wide", lookup)
    assert error.code == SINK_SCHEMA_MISMATCH
    assert "column 1" in error.message and "UINT64 cannot be written as INT64" in error.message
    error = bind_error("SELECT id FROM stream INTO other", lookup)
    assert "the names differ" in error.message
    assert error.nes_code == 2003


def test_sink_accepts_lossless_widening() -> None:
    lookup = catalog(k=[("a", "INT64"), ("b", "FLOAT64"), ("c", "UINT64")])
    bound = bind("SELECT i32 AS a, f32 AS b, u8 AS c FROM numbers INTO k", lookup)
    assert [c.type for c in bound.output_schema] == ["INT64", "FLOAT64", "UINT64"]
    assert [f.type for f in bound.plan.output] == ["INT64", "FLOAT64", "UINT64"]


def test_nullable_output_into_not_null_sink_column_is_refused() -> None:
    lookup = catalog(k=[("n", "INT32")])
    error = bind_error("SELECT n FROM texts INTO k", lookup)
    assert error.code == SINK_SCHEMA_MISMATCH and "NULL" in error.message


def test_inline_sink_with_schema_is_checked_and_duplicate_names_are_refused() -> None:
    error = bind_error("SELECT id FROM stream INTO File(SCHEMA(id INT8) AS `SINK`.`SCHEMA`)")
    assert error.code == SINK_SCHEMA_MISMATCH
    assert bind_error("SELECT *, id FROM stream INTO File()").code == INVALID_STATEMENT


# ---- errors --------------------------------------------------------------------------------


def test_unknown_column_names_source_columns_and_position() -> None:
    error = bind_error("SELECT speed\nFROM s\nWHERE speeed > FLOAT64(1.0)\nINTO File()")
    assert error.code == UNKNOWN_COLUMN
    assert (error.line, error.column) == (3, 7)
    assert error.message == (
        "line 3, column 7: unknown column 'SPEEED' in source 'S'; columns are speed, altitude, ts"
    )


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("SELECT a FROM nowhere INTO File()", UNKNOWN_SOURCE, "unknown logical source"),
        ("SELECT id FROM stream INTO nowhere", UNKNOWN_SINK, "unknown sink"),
        ("SELECT t + n AS x FROM texts INTO File()", TYPE_MISMATCH, "needs a number"),
        ("SELECT id FROM stream WHERE id INTO File()", TYPE_MISMATCH, "not BOOLEAN"),
        ("SELECT t == n AS x FROM texts INTO File()", TYPE_MISMATCH, "cannot compare"),
        ("SELECT id FROM stream UNION SELECT t FROM texts INTO File()", TYPE_MISMATCH, "UNION"),
        ("SELECT SUM(id) FROM stream INTO File()", NOT_SUPPORTED, "needs a WINDOW"),
        ("SELECT id FROM stream GROUP BY id INTO File()", NOT_SUPPORTED, "GROUP BY without WINDOW"),
        ("SELECT t == BOOLEAN(1) AS x FROM texts INTO File()", NOT_SUPPORTED, "validity"),
        (
            "SELECT COUNT(id) FROM stream WINDOW TUMBLING(100) INTO File()",
            NOT_SUPPORTED,
            "count-based",
        ),
        (
            "SELECT COUNT(id) FROM stream WINDOW TUMBLING(SIZE 1 SEC) INTO File()",
            NOT_SUPPORTED,
            "ingestion time",
        ),
        (
            "SELECT id FROM stream WINDOW TUMBLING(timestamp, SIZE 1 SEC) INTO File()",
            INVALID_STATEMENT,
            "at least one aggregate",
        ),
        (
            "SELECT value, SUM(id) FROM stream WINDOW TUMBLING(timestamp, SIZE 1 SEC) INTO File()",
            UNKNOWN_COLUMN,
            "only GROUP BY keys",
        ),
        (
            "SELECT SUM(id) AS s FROM stream WHERE SUM(id) > UINT64(1) "
            "WINDOW TUMBLING(timestamp, SIZE 1 SEC) INTO File()",
            NOT_SUPPORTED,
            "in WHERE",
        ),
        (
            "SELECT COUNT(t) FROM texts WINDOW TUMBLING(t, SIZE 1 SEC) INTO File()",
            TYPE_MISMATCH,
            "must be an integer",
        ),
        ("SELECT NULL FROM stream INTO File()", TYPE_MISMATCH, "type of NULL"),
        ("SELECT FOO(id) FROM stream INTO File()", INVALID_STATEMENT, "unknown function FOO"),
        ("SELECT id FROM stream", INVALID_STATEMENT, "no INTO"),
        ("SELECT id FROM stream INTO Kafka()", NOT_SUPPORTED, "inline sink type"),
        ("SELECT a FROM File('x' AS `SOURCE`.FILE_PATH) INTO File()", INVALID_STATEMENT, "schema"),
    ],
)
def test_errors(text: str, code: str, fragment: str) -> None:
    error = bind_error(text)
    assert error.code == code
    assert fragment in error.message
    assert error.line is not None and error.column is not None


def test_explain_without_sink() -> None:
    bound = bind_query(parse_query("SELECT id FROM stream"), catalog(), allow_missing_sink=True)
    assert bound.sink_name is None and bound.output_schema[0].name == "STREAM$ID"
    assert "SCAN stream" in bound.plan.explain()


# ---- the conformance suite -----------------------------------------------------------------


@pytest.mark.parametrize("path", suite_file_params())
def test_suite_queries_bind_or_fail_as_expected(path: Path) -> None:
    for query, lookup in queries_with_catalog(read_systest(path)):
        try:
            bound = bind_query(parse_query(query.text), lookup)  # type: ignore[arg-type]
        except PlannerError as error:
            if error.code == NOT_SUPPORTED:
                continue
            assert query.expected_error == error.nes_code, f"line {query.line}: {error}"
            continue
        assert query.expected_error is None or query.expected_error >= 2300, query.line
        text = bound.plan.to_json_text()
        assert plan.QueryPlan.from_json_text(text) == bound.plan
        again = bind_query(parse_query(query.text), lookup)  # type: ignore[arg-type]
        assert again.plan.to_json_text() == text, "binding is deterministic"


# ---- robustness ----------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        *[
            "SELECT",
            "*",
            "id",
            "value",
            "speed",
            "ts",
            "tid",
            "uid",
            "n",
            "t",
            "FROM",
            "stream",
            "s",
            "ON",
            "WHERE",
            "HAVING",
            "INTO",
            "out",
        ],
        *["UNION", ",", "+", "*", "==", "<", "AND", "NOT", "AS", "x", "(", ")", "NULL", "TRUE"],
        "(SELECT * FROM t)",
        "INNER JOIN",
        "(SELECT * FROM u)",
        "tid = uid",
        "GROUP BY",
        "WINDOW TUMBLING(ts, SIZE 1 SEC)",
        "WINDOW SLIDING(timestamp, SIZE 2 SEC, ADVANCE BY 1 SEC)",
        "File()",
        "SELECT id FROM stream",
        *[
            "UINT64(1)",
            "INT8(-3)",
            "FLOAT32(2.5)",
            "VARSIZED('x')",
            "SUM(id)",
            "COUNT(*)",
            "AVG(value)",
        ],
        *["ABS(id)", "ISNULL(n)"],
        "CONCAT(t, t)",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, min_size=3, max_size=30))
def test_random_queries_raise_only_planner_errors(pieces: list[str]) -> None:
    lookup = catalog(out=[("id", "UINT64")])
    try:
        bound = bind_query(parse_query(" ".join(pieces)), lookup)
    except PlannerError:
        return
    assert plan.QueryPlan.from_json(bound.plan.to_json()) == bound.plan
