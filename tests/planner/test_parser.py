"""Parser tests: the whole conformance suite parses; the AST says what was written; errors
name their place; nothing but PlannerError escapes, in bounded time."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from conformance import needs_suite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.systest_files import (
    all_statement_texts,
    read_systest,
    suite_file_params,
    suite_files,
)
from streamctl.error_codes import INVALID_STATEMENT, SYNTAX_ERROR
from streamctl.planner import ast
from streamctl.planner.parser import MAX_NESTING, parse_query, parse_statements
from streamctl.planner.planning_errors import PlannerError


@pytest.mark.quick
@needs_suite
def test_suite_is_there() -> None:
    assert len(suite_files()) == 68


@pytest.mark.quick
@pytest.mark.parametrize("path", suite_file_params())
def test_every_statement_of_the_suite_parses(path: Path) -> None:
    systest = read_systest(path)
    for line, text in all_statement_texts(systest):
        statements = parse_statements(text)
        assert len(statements) == 1, f"{path}:{line}: {text}"


def select(text: str) -> ast.Select:
    query = parse_query(text).query
    assert isinstance(query, ast.Select)
    return query


# ---- what the AST says -----------------------------------------------------------------------


@pytest.mark.quick
def test_identifiers_are_upper_cased_unless_quoted() -> None:
    text = "select id, Stream.Value, `S$t` from stream into Sink"
    query = select(text)
    parts = [item.expression.parts for item in query.items]  # type: ignore[union-attr]
    assert parts == [("ID",), ("STREAM", "VALUE"), ("S$t",)]
    column = text.index("stream") + 1
    assert query.source == ast.SourceRef(name="STREAM", alias=None, line=1, column=column)


@pytest.mark.quick
def test_keywords_are_case_insensitive_and_usable_as_names_where_not_expected() -> None:
    query = select(
        "SeLeCt start AS windowStart, end, value, type, size FROM stream "
        "group by id window tumbling(timestamp, size 5 sec) INTO s"
    )
    names = [item.expression.parts[0] for item in query.items]  # type: ignore[union-attr]
    assert names == ["START", "END", "VALUE", "TYPE", "SIZE"]
    assert query.window is not None and query.window.size is not None
    assert query.window.size.millis == 5000


@pytest.mark.quick
def test_positions_are_one_based_line_and_column() -> None:
    query = select("SELECT\n  a,\n    b + c AS d\nFROM s INTO k")
    second = query.items[1]
    assert (second.line, second.column) == (3, 5)
    assert isinstance(second, ast.SelectExpression)
    assert isinstance(second.expression, ast.BinaryOp)
    assert (second.expression.right.line, second.expression.right.column) == (3, 9)


@pytest.mark.quick
def test_operator_precedence_follows_nebulastream() -> None:
    query = select("SELECT a FROM s WHERE NOT a + b * c < d OR e AND f == g INTO k")
    where = query.where
    assert isinstance(where, ast.BinaryOp) and where.op == "OR"
    negated = where.left
    assert isinstance(negated, ast.UnaryOp) and negated.op == "NOT"
    comparison = negated.operand
    assert isinstance(comparison, ast.BinaryOp) and comparison.op == "<"
    addition = comparison.left
    assert isinstance(addition, ast.BinaryOp) and addition.op == "+"
    assert isinstance(addition.right, ast.BinaryOp) and addition.right.op == "*"
    conjunction = where.right
    assert isinstance(conjunction, ast.BinaryOp) and conjunction.op == "AND"


@pytest.mark.quick
@pytest.mark.parametrize(
    ("written", "normalised"),
    [("=", "=="), ("==", "=="), ("<>", "!="), ("!=", "!="), ("<=>", "<=>")],
)
def test_comparison_spellings(written: str, normalised: str) -> None:
    query = select(f"SELECT a FROM s WHERE a {written} b INTO k")
    assert isinstance(query.where, ast.BinaryOp)
    assert query.where.op == normalised


@pytest.mark.quick
def test_constants() -> None:
    text = r"""SELECT FLOAT64(3.141), UINT64(0), VARSIZED("x\"y"), 'a\'b', -5, -2.5e3, TRUE, NULL,
        INT32(-1) FROM s INTO k"""
    values = [item.expression for item in select(text).items]  # type: ignore[union-attr]
    typed = values[0]
    assert isinstance(typed, ast.FunctionCall) and typed.name == "FLOAT64"
    assert typed.args[0] == ast.Literal(
        kind="float", text="3.141", line=1, column=text.index("3.141") + 1
    )
    assert values[2].args[0].text == 'x"y'  # type: ignore[union-attr]
    assert values[3] == ast.Literal(kind="string", text="a'b", line=1, column=text.index("'a") + 1)
    kinds = [value.kind for value in values[4:8]]  # type: ignore[union-attr]
    assert kinds == ["integer", "float", "boolean", "null"]
    assert values[4].text == "-5"  # type: ignore[union-attr]
    assert values[5].python_value() == -2500.0  # type: ignore[union-attr]
    assert values[8].args[0].text == "-1"  # type: ignore[union-attr]


@pytest.mark.quick
def test_comments_of_all_kinds() -> None:
    statements = parse_statements(
        "# a comment line\nSELECT a, -- trailing\n /* block\n comment */ b # hash\nFROM s INTO k;"
    )
    assert len(statements) == 1


@pytest.mark.quick
def test_several_statements_and_empty_ones() -> None:
    statements = parse_statements(";;CREATE LOGICAL SOURCE s(a INT8);; SELECT a FROM s INTO k;")
    assert [type(s) for s in statements] == [ast.CreateLogicalSource, ast.QueryStatement]
    assert parse_statements("  ;  ") == []


@pytest.mark.quick
def test_create_statements() -> None:
    logical, physical, sink, worker = parse_statements(
        "CREATE LOGICAL SOURCE stream(id UINT64 NOT NULL, t text, b BIGINT);"
        "CREATE PHYSICAL SOURCE FOR stream TYPE File SET('|' AS PARSER.`FIELD_DELIMITER`, "
        "-3 AS `SOURCE`.X, SCHEMA(a INT8) AS `SOURCE`.`SCHEMA`);"
        "CREATE SINK out(stream.id UINT64 NOT NULL, `S$T` VARSIZED) TYPE Checksum;"
        "CREATE WORKER 'host:9090' SET(4 AS CAPACITY)"
    )
    assert isinstance(logical, ast.CreateLogicalSource)
    assert [(c.catalog_name, c.type, c.not_null) for c in logical.columns] == [
        ("ID", "UINT64", True),
        ("T", "VARSIZED", False),
        ("B", "INT64", False),
    ]
    assert isinstance(physical, ast.CreatePhysicalSource)
    assert physical.source_type == "FILE"
    config = ast.options_to_config(physical.options)
    assert config["PARSER.FIELD_DELIMITER"] == "|"
    assert config["SOURCE.X"] == -3
    assert config["SOURCE.SCHEMA"] == [{"name": "A", "type": "INT8", "nullable": True}]
    assert isinstance(sink, ast.CreateSink)
    assert [c.catalog_name for c in sink.columns] == ["STREAM$ID", "S$T"]
    assert sink.sink_type == "CHECKSUM"
    assert isinstance(worker, ast.CreateWorker)
    assert worker.name == "host:9090"
    assert ast.options_to_config(worker.options) == {"CAPACITY": 4}


@pytest.mark.quick
def test_show_drop_explain() -> None:
    statements = parse_statements(
        "SHOW QUERIES; SHOW LOGICAL SOURCES FORMAT JSON; SHOW PHYSICAL SOURCES FOR s WHERE id = 3;"
        "SHOW SINKS; SHOW WORKERS WHERE name = 'w1' FORMAT TEXT;"
        "DROP QUERY WHERE id = 7; DROP LOGICAL SOURCE WHERE name = 's' CASCADE; DROP SINK out;"
        'DROP PHYSICAL SOURCE 4; DROP WORKER WHERE name = "w1";'
        "EXPLAIN SELECT a FROM s"
    )
    shows = [s for s in statements[:5] if isinstance(s, ast.ShowStatement)]
    assert [s.subject for s in shows] == [
        "QUERIES",
        "LOGICAL SOURCES",
        "PHYSICAL SOURCES",
        "SINKS",
        "WORKERS",
    ]
    assert shows[1].format == "JSON"
    assert shows[2].for_logical_source == "S"
    assert shows[2].filter is not None and shows[2].filter.attribute == "ID"
    drops = [d for d in statements[5:10] if isinstance(d, ast.DropStatement)]
    assert [
        (d.subject, d.filter.attribute, d.filter.value.python_value(), d.cascade) for d in drops
    ] == [
        ("QUERY", "ID", 7, False),
        ("LOGICAL SOURCE", "NAME", "s", True),
        ("SINK", "NAME", "OUT", False),
        ("PHYSICAL SOURCE", "ID", 4, False),
        ("WORKER", "NAME", "w1", False),
    ]
    explain = statements[10]
    assert isinstance(explain, ast.ExplainStatement)
    assert explain.statement.sink is None


@pytest.mark.quick
def test_windows_joins_unions_inline_sources_and_sinks() -> None:
    text = (
        "SELECT * FROM (SELECT * FROM s) INNER JOIN (SELECT * FROM t x) ON sid = tid "
        "WINDOW SLIDING(ts, SIZE 30 SEC, ADVANCE BY 5 SEC) INTO sink"
    )
    query = select(text)
    join = query.source
    assert isinstance(join, ast.Join)
    assert join.window.kind == "SLIDING"
    assert join.window.advance is not None and join.window.advance.millis == 5000
    right = join.right
    assert isinstance(right, ast.SubqueryRef)
    inner = right.query
    assert isinstance(inner, ast.Select) and inner.source == ast.SourceRef(
        name="T", alias="X", line=1, column=text.index("t x") + 1
    )

    windowed = select(
        "SELECT COUNT(*) FROM s WINDOW TUMBLING(ts, SIZE 1 MINUTES) GROUP BY k "
        "WATERMARK(ts, 2 SECONDS) HAVING x > 1 INTO o"
    )
    assert windowed.group_by and windowed.watermark is not None
    assert windowed.watermark.delay.millis == 2000
    count = windowed.items[0]
    assert isinstance(count, ast.SelectExpression) and isinstance(
        count.expression, ast.FunctionCall
    )
    assert count.expression.star

    statement = parse_query(
        "SELECT a FROM s UNION SELECT a FROM t UNION SELECT a FROM File("
        "'x.csv' AS `SOURCE`.FILE_PATH, SCHEMA(a INT8) AS `SOURCE`.`SCHEMA`) INTO Checksum()"
    )
    union = statement.query
    assert isinstance(union, ast.Union) and isinstance(union.left, ast.Union)
    inline = union.right.source  # type: ignore[union-attr]
    assert isinstance(inline, ast.InlineSource) and inline.source_type == "FILE"
    assert isinstance(statement.sink, ast.InlineSink) and statement.sink.sink_type == "CHECKSUM"


@pytest.mark.quick
def test_count_window_is_parsed_for_the_binder_to_refuse() -> None:
    query = select("SELECT COUNT(a) FROM s WINDOW TUMBLING(100) INTO k")
    assert query.window is not None and query.window.kind == "COUNT"


@pytest.mark.quick
def test_parse_query_wants_exactly_one_query() -> None:
    with pytest.raises(PlannerError) as error:
        parse_query("SHOW SINKS")
    assert error.value.code == INVALID_STATEMENT
    with pytest.raises(PlannerError) as error:
        parse_query("SELECT a FROM s INTO k; SELECT a FROM s INTO k")
    assert error.value.code == INVALID_STATEMENT


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.quick
@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("SELECT * FROM", 1, 14, "unexpected end of the statement"),
        ("SELECT a\nFROM s\nWHERE a ==\nINTO k", 4, 1, "unexpected 'INTO'"),
        ("SELECT a FROM s WHERE a = 'open INTO k", 1, 27, "unterminated quote"),
        ("CREATE SINK k(a FOO) TYPE File", 1, 17, "unknown data type 'FOO'"),
        (
            "SELECT SUM(a) FROM s WINDOW TUMBLING(t, SIZE 5 YEARS) INTO k",
            1,
            48,
            "unknown time unit",
        ),
        ("SHOW SINKS FORMAT XML", 1, 19, "unknown output format"),
        ("DROP SINK WHERE name < 3", 1, 22, "filters compare with '='"),
        ("SELECT a FROM db.s INTO k", 1, 15, "source names are not qualified"),
        ("SELECT a FROM s INTO k;\n  SELECT @", 2, 10, "unexpected character '@'"),
    ],
)
def test_syntax_errors_name_line_column_and_problem(
    text: str, line: int, column: int, fragment: str
) -> None:
    with pytest.raises(PlannerError) as error:
        parse_statements(text)
    assert error.value.code == SYNTAX_ERROR
    assert (error.value.line, error.value.column) == (line, column)
    assert fragment in error.value.message
    assert error.value.message.startswith(f"line {line}, column {column}: ")
    assert error.value.nes_code == 2000


@pytest.mark.quick
def test_expected_tokens_are_listed() -> None:
    with pytest.raises(PlannerError) as error:
        parse_statements("SELECT a FROM s WINDOW SLIDING(t, SIZE 1 SEC) INTO k")
    assert "expected" in error.value.message


@pytest.mark.quick
def test_deep_nesting_is_refused_without_recursion_error() -> None:
    deep = "SELECT a FROM s WHERE " + "NOT " * (MAX_NESTING + 50) + "a INTO k"
    with pytest.raises(PlannerError) as error:
        parse_statements(deep)
    assert "nested" in error.value.message
    parenthesised = "SELECT " + "(" * 20_000 + "a" + ")" * 20_000 + " FROM s INTO k"
    assert len(parse_statements(parenthesised)) == 1
    subqueries = "SELECT a FROM " + "(SELECT a FROM " * 300 + "s" + ")" * 300 + " INTO k"
    with pytest.raises(PlannerError):
        parse_statements(subqueries)


def test_huge_and_odd_input_is_refused_or_parsed_without_crashing() -> None:
    # no wall-clock bound here (a loaded CI machine took 33 s): pytest-timeout bounds it, and
    # the parse's cost is benchmarked, not tested
    for text in [
        "x" * 2_000_000,
        "SELECT " + "a, " * 100_000 + "a FROM s INTO k",
        "\x00\xff\ud800",
    ]:
        with contextlib.suppress(PlannerError):
            parse_statements(text)
    with pytest.raises(PlannerError):
        parse_statements(None)  # type: ignore[arg-type]


_TOKENS = st.sampled_from(
    [
        *[
            "SELECT",
            "FROM",
            "WHERE",
            "INTO",
            "WINDOW",
            "TUMBLING",
            "SLIDING",
            "SIZE",
            "ADVANCE",
            "BY",
            "GROUP",
            "HAVING",
        ],
        *[
            "UNION",
            "INNER",
            "JOIN",
            "ON",
            "CREATE",
            "LOGICAL",
            "PHYSICAL",
            "SOURCE",
            "SINK",
            "TYPE",
            "SET",
            "AS",
            "SHOW",
            "DROP",
        ],
        *[
            "EXPLAIN",
            "NOT",
            "NULL",
            "AND",
            "OR",
            "(",
            ")",
            ",",
            ";",
            ".",
            "*",
            "+",
            "-",
            "/",
            "%",
            "==",
            "!=",
            "<",
            ">=",
            "1",
            "2.5",
            "a",
            "b",
            "stream",
        ],
        *["UINT64", "FLOAT64(1.0)", "SEC", "MS", "/*", "*/"],
        "'str'",
        '"dq"',
        "`q`",
        "#c\n",
        "--c\n",
    ]
)


@pytest.mark.quick
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, max_size=40))
def test_token_soup_raises_only_planner_errors(tokens: list[str]) -> None:
    with contextlib.suppress(PlannerError):
        parse_statements(" ".join(tokens))


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_raises_only_planner_errors(text: str) -> None:
    with contextlib.suppress(PlannerError):
        parse_statements(text)
