"""CSV and JSON input and output against writers and parsers derived from the NES docs.

Rules (nes-docs/null_handling.md, "Input Parsing" and "Output Formatting"; the rest as
``streamctl/spark/source_readers.py`` and ``streamctl/spark/sink_writers.py`` state them):

* CSV input: only an empty field is NULL; a string is written in double quotes with ``"``
  doubled, so it may hold the field delimiter, quotes, or be empty (``""``).
* JSON input: ``null`` and a missing key are NULL; keys match column names ignoring case.
* CSV output: ``NULL`` for NULL, strings quoted when the sink quotes strings.
* JSON output: NULL as the string ``"NULL"``; nullable columns as strings of their CSV text.

Writers and parsers here are Python's ``csv`` and ``json`` modules configured that way, not the
product's. The product's parsing and formatting run on batch DataFrames (the same column
expressions the streaming query uses) to keep the hypothesis examples cheap; one test runs the
whole streaming path, source file to sink file.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from connector_helpers import columns, file_sink, run_bounded, source
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from streamctl.spark.sink_writers import nes_text_lines, read_file_sink
from streamctl.spark.source_readers import parse_lines
from streamctl.spark.spark_types import spark_schema

SCHEMA = (
    "i8 INT8?",
    "u64 UINT64?",
    "i32 INT32",
    "f64 FLOAT64?",
    "b BOOLEAN?",
    "c CHAR?",
    "s VARSIZED?",
    "t VARSIZED",
)
COLUMNS = columns(*SCHEMA)

# Any character but the tuple delimiter "\n" (no field can hold it, quoted or not) and
# surrogates (not UTF-8).
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=12)
# Every example runs Spark jobs: few examples of many rows each, and no shrinking (which would
# run hundreds of jobs; a failing example is printed as found).
SETTINGS = settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


FIRST_SIX = [
    nullable(st.integers(-(2**7), 2**7 - 1)),
    nullable(st.integers(0, 2**64 - 1)),
    st.integers(-(2**31), 2**31 - 1),
    nullable(st.floats(allow_nan=False, width=64)),
    nullable(st.booleans()),
    nullable(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc"))),
]
ROW = st.tuples(*FIRST_SIX, nullable(TEXT), TEXT)
ROWS = st.lists(ROW, min_size=1, max_size=40)


def csv_text(value: Any) -> str:
    """A value as a CSV writer following the docs writes it (strings quoted, NULL empty)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    return repr(value)


def parse(spark: Any, lines: list[str], spec: Any) -> list[tuple[Any, ...]]:
    frame = spark.createDataFrame([(line,) for line in lines], "value string")
    rows = parse_lines(frame, spec).frame().collect()
    return [tuple(int(v) if type(v).__name__ == "Decimal" else v for v in row) for row in rows]


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    return sorted(map(repr, a)) == sorted(map(repr, b))


@SETTINGS
@given(rows=ROWS, delimiter=st.sampled_from([",", "|", ";", "\t"]))
def test_csv_written_per_the_docs_reads_back_as_the_rows(
    spark: Any, rows: list[tuple[Any, ...]], delimiter: str
) -> None:
    lines = [delimiter.join(csv_text(v) for v in row) for row in rows]
    spec = source("INLINE", {"data": "", "field_delimiter": delimiter}, *SCHEMA)
    assert same(parse(spark, lines, spec), rows)


@SETTINGS
@given(rows=ROWS, data=st.data())
def test_json_written_per_the_docs_reads_back_as_the_rows(
    spark: Any, rows: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    lines = []
    for row in rows:
        obj: dict[str, Any] = {}
        for column, value in zip(COLUMNS, row, strict=True):
            # NULL as null or as a missing key; keys in the case the user wrote them
            if value is None and data.draw(st.booleans()):
                continue
            key = column["name"]
            obj[data.draw(st.sampled_from([key, key.upper()]))] = value
        lines.append(json.dumps(obj, ensure_ascii=data.draw(st.booleans())))
    spec = source("INLINE", {"data": "", "format": "JSON"}, *SCHEMA)
    assert same(parse(spark, lines, spec), rows)


def sink_lines(spark: Any, rows: list[tuple[Any, ...]], spec: Any) -> list[str]:
    """The sink's text of ``rows``, in order (UINT64 is a DECIMAL(20,0) in Spark)."""
    typed = [(r[0], None if r[1] is None else Decimal(r[1]), *r[2:]) for r in rows]
    frame = spark.createDataFrame(typed, spark_schema(COLUMNS)).coalesce(1)
    return [row[0] for row in nes_text_lines(frame, spec).collect()]


def nes_float(value: float) -> float:
    """What NES's six-decimal float text reads back as."""
    return float(f"{value:.6f}")


def expected_output(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(nes_float(v) if isinstance(v, float) else v for v in row)


# Output strings without line breaks (a sink line is one tuple) and never the text NULL, which
# Python's csv module cannot tell from the unquoted NULL once it dropped the quotes.
OUT_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=12).filter(
    lambda s: s != "NULL"
)
OUT_ROW = st.tuples(*FIRST_SIX, nullable(OUT_TEXT), OUT_TEXT)


PARSERS: list[Callable[[str], Any]] = [
    int,
    int,
    int,
    float,
    lambda text: {"true": True, "false": False}[text],
]


@SETTINGS
@given(rows=st.lists(OUT_ROW, min_size=1, max_size=40), delimiter=st.sampled_from([",", "|"]))
def test_csv_sink_output_parses_with_the_csv_module(
    spark: Any, rows: list[tuple[Any, ...]], delimiter: str
) -> None:
    spec = file_sink(Path("/nonexistent"), *SCHEMA, quote_strings=True, field_delimiter=delimiter)
    lines = sink_lines(spark, rows, spec)
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter, strict=True)
    parsed = []
    for fields in reader:
        assert len(fields) == len(COLUMNS)
        values: list[Any] = [None if f == "NULL" else f for f in fields]
        for i in range(5):
            if values[i] is not None:
                values[i] = PARSERS[i](values[i])
        parsed.append(tuple(values))
    assert same(parsed, [expected_output(row) for row in rows])


@SETTINGS
@given(rows=st.lists(ROW, min_size=1, max_size=40))
def test_json_sink_output_parses_with_the_json_module(
    spark: Any, rows: list[tuple[Any, ...]]
) -> None:
    spec = file_sink(Path("/nonexistent"), *SCHEMA, format="JSON")
    for line, row in zip(sink_lines(spark, rows, spec), rows, strict=True):
        obj = json.loads(line)
        assert list(obj) == [column["name"] for column in COLUMNS]
        for column, value in zip(COLUMNS, row, strict=True):
            written = obj[column["name"]]
            if not column["nullable"]:
                assert written == value  # NOT NULL: a JSON number or string
            elif value is None:
                assert written == "NULL"
            elif isinstance(value, bool):
                assert written == ("true" if value else "false")
            elif isinstance(value, float):
                assert float(written) == nes_float(value)
            else:
                assert written == str(value)


def test_files_through_streaming_queries_keep_the_rows(spark: Any, tmp_path: Path) -> None:
    rows = [
        (1, 2**64 - 1, -5, 1.5, True, "x", 'a,"b"|c', "\u2028\x85\x0c\r"),
        (None, None, 0, None, None, None, None, "NULL"),
        (-128, 0, 7, -0.25, False, '"', "", 'comma, "quote"'),
    ]
    data = "\n".join(",".join(csv_text(v) for v in row) for row in rows) + "\n"
    (tmp_path / "in.csv").write_text(data, encoding="utf-8")
    csv_source = source("FILE", {"file_path": str(tmp_path / "in.csv")}, *SCHEMA)
    for format_ in ("CSV", "JSON"):
        options = {"quote_strings": True} if format_ == "CSV" else {}
        sink = file_sink(tmp_path / format_, *SCHEMA, format=format_, **options)
        run_bounded(spark, csv_source, sink, tmp_path, query_name=f"q{format_}")
        assert same(read_file_sink(None, sink), rows)


MALFORMED = [
    # (column, text) -- nullable columns: only empty fields are NULL, anything else must parse
    ("a INT32?", "abc"),
    ("a INT32?", "1.5"),
    ("a INT32?", "2147483648"),
    ("a UINT8?", "256"),
    ("a UINT8?", "-1"),
    ("a UINT64?", "18446744073709551616"),
    ("a INT32?", "   "),
    ("a FLOAT64?", "1.2.3"),
    ("a BOOLEAN?", "yes"),
    ("a CHAR?", "ab"),
    ("a INT32", ""),  # empty in a NOT NULL column
]


@pytest.mark.parametrize(("column", "text"), MALFORMED)
def test_malformed_csv_values_fail_the_query(spark: Any, column: str, text: str) -> None:
    spec = source("INLINE", {"data": ""}, column, "z INT32")  # two columns: "" is no empty line
    with pytest.raises(Exception, match="column 'a'"):
        parse(spark, [f"{text},1"], spec)


JSON_MALFORMED = [
    ("a INT32?", '{"a": "abc"}'),
    ("a INT32?", '{"a": {"x": 1}}'),
    ("a INT32?", '{"a": [1]}'),
    ("a INT32?", '{"a": true}'),
    ("a INT32?", '{"a": 1.5}'),
    ("a INT32?", '{"a": ""}'),
    ("a UINT8?", '{"a": 300}'),
    ("a BOOLEAN?", '{"a": 2}'),
    ("a INT32", '{"b": 1}'),  # missing key in a NOT NULL column
    ("a INT32", '{"a": null}'),
]


@pytest.mark.parametrize(("column", "line"), JSON_MALFORMED)
def test_malformed_json_values_fail_the_query(spark: Any, column: str, line: str) -> None:
    spec = source("INLINE", {"data": "", "format": "JSON"}, column)
    with pytest.raises(Exception, match="column 'a'"):
        parse(spark, [line], spec)


def test_json_values_of_other_types_as_the_docstring_states(spark: Any) -> None:
    spec = source("INLINE", {"data": "", "format": "JSON"}, "a VARSIZED?", "n INT64?", "B BOOLEAN")
    lines = [
        '{"a": {"x": [1, "y"]}, "n": "25", "b": 1}',
        '{"a": 12, "N": -3, "b": "TRUE"}',
        '{"a": "", "b": false, "extra": {"ignored": 1}}',
    ]
    assert same(
        parse(spark, lines, spec),
        [('{"x":[1,"y"]}', 25, True), ("12", -3, True), ("", None, False)],
    )
    with pytest.raises(Exception, match=r"not a JSON object|Malformed"):
        parse(spark, ["[1, 2]"], spec)


def test_a_quoted_last_field_of_a_crlf_line_is_unquoted(spark: Any) -> None:
    """A CRLF file read with the tuple delimiter \\n keeps the \\r: a quoted last field before
    it loses its quotes as before (the parser's pattern ends at a final line terminator)."""
    spec = source("INLINE", {"data": ""}, "id INT32", "name VARSIZED?", "n INT32")
    lines = ['1,"alice","5"\r', '2,"",7', '3,"a""b",8\r']
    assert same(parse(spark, lines, spec), [(1, "alice", 5), (2, "", 7), (3, 'a"b', 8)])


@SETTINGS
@given(values=st.lists(st.floats(width=64), min_size=1, max_size=20))
@example(values=[math.nan, math.inf, -math.inf, 1.5, -0.0, 1e23])
def test_json_sink_writes_a_not_null_float_as_a_number_unless_json_has_none_for_it(
    spark: Any, values: list[float]
) -> None:
    """NaN and the infinities are no JSON numbers (RFC 8259): a NOT NULL float column holds
    them as the strings of their CSV text (``nan``, ``inf``, ``-inf``), every other value as
    the number; the nullable column holds the CSV text as a string either way."""
    spec = file_sink(Path("/nonexistent"), "f FLOAT64", "g FLOAT64?", format="JSON")
    frame = spark.createDataFrame(
        [(value, value) for value in values], spark_schema(columns("f FLOAT64", "g FLOAT64?"))
    ).coalesce(1)
    lines = [row[0] for row in nes_text_lines(frame, spec).collect()]
    for line, value in zip(lines, values, strict=True):
        obj = json.loads(line)
        text = "nan" if value != value else {math.inf: "inf", -math.inf: "-inf"}.get(value)
        if text is None:
            assert isinstance(obj["f"], float)
            assert obj["f"] == nes_float(value)
        else:
            assert obj["f"] == text
        if text is None:  # C's %.6f, trailing zeros dropped down to one
            text = f"{value:.6f}".rstrip("0")
            text += "0" if text.endswith(".") else ""
        assert obj["g"] == text
