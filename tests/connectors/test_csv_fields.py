"""CSV tuples parsed by streamctl's Java UDF (``jvm/NesCsvFields.java``, what a session with the
jar plans: :func:`streamctl.spark.tuples._csv_fields`) give what the Spark expressions give
(:func:`streamctl.spark.tuples._csv_expressions`, what a session without the jar plans), value
for value and type for type, and fail where they fail, with the same message.

The expressions are checked against NES's rules written independently in
``test_integer_text``, ``test_float_text`` and ``test_formats_roundtrip``; this checks the two
implementations against each other over generated schemas (every NES type, nullable or not),
delimiters, quoting on and off, and tuples mixing valid values with everything around them:
blanks NES trims and characters it does not, quotes (balanced, doubled, unbalanced, around a
delimiter), line terminators at the end (a CRLF line), signs, bounds and past 64 bits, float
words, empty fields, too few and too many fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from connector_helpers import (
    ANSI_ON,
    columns,
    failure_message,
    same_outcome,
    same_value,
    spark_examples,
)
from hypothesis import example, given
from hypothesis import strategies as st

from streamctl.nes_types import canonical_type, integer_range
from streamctl.spark import sql_text as S
from streamctl.spark.jvm_functions import FIELDS_ERROR, csv_fields_function
from streamctl.spark.specs import SourceSpec
from streamctl.spark.translate import SPARK_CONF, spark_conf
from streamctl.spark.tuples import _csv_expressions, _csv_fields, csv_layout, struct_values

TYPES = (
    "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
    "FLOAT32", "FLOAT64", "BOOLEAN", "CHAR", "VARSIZED",
)  # fmt: skip

BLANKS = " \t\n\v\f\r"
OTHER_AROUND = "\x00\x01\u00a0\u0085\u2028"


def _numbers(nes_type: str) -> st.SearchStrategy[str]:
    if nes_type.startswith("FLOAT"):
        return st.one_of(
            st.floats().map(repr),
            st.sampled_from(
                ["inf", "-INF", "Infinity", "-infinity", "nan", "-nan", "NaN", "+inf", "1e400",
                 "1.", ".5", "-.5e-3", "1E5", "1d", "0x1p3", "5e", ".", "-", "1e+05", "1.5f"]
            ),
        )  # fmt: skip
    low, high = integer_range(nes_type)
    edges = [low - 1, low, high, high + 1, 0, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63)]
    return st.one_of(
        st.integers(low, high).map(str),
        st.sampled_from(edges).map(str),
        st.sampled_from(["-0", "+5", "007", "1.5", "1e3", "0" * 22 + "9", "-" + "0" * 20 + "1"]),
    )


def _values(nes_type: str) -> st.SearchStrategy[str]:
    if nes_type == "BOOLEAN":
        return st.sampled_from(["true", "false", "TRUE", "False", "1", "0", "yes", "2", "t"])
    if nes_type in ("CHAR", "VARSIZED"):
        return st.text(st.sampled_from('ab é"\u2028\t,|'), max_size=4)
    return _numbers(nes_type)


around = st.text(st.sampled_from(BLANKS + OTHER_AROUND), max_size=2)
anything = st.text(st.sampled_from('0123456789-+.eEinfaNtrul"x ,|\t\r\u00e9'), max_size=6)


@st.composite
def fields(draw: st.DrawFn, nes_type: str) -> str:
    """One field's raw text: a value of its type or anything, maybe with blanks or other
    characters around and maybe in (RFC 4180) quotes; or empty, or quoted empty."""
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return ""
    if shape == 1:
        return '""'
    value = draw(st.one_of(_values(nes_type), anything))
    if draw(st.booleans()):
        value = draw(around) + value + draw(around)
    if draw(st.integers(0, 3)) == 0:
        value = '"' + value.replace('"', '""') + '"'
    return value


@dataclass(frozen=True)
class Case:
    schema: tuple[str, ...]
    """``"name TYPE"`` declarations, ``?`` for nullable (``connector_helpers.columns``)."""
    delimiter: str
    quoted: bool
    lines: tuple[str, ...]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=6))
    nullable = [draw(st.booleans()) for _ in types]
    schema = tuple(
        f"c{i} {t}{'?' if n else ''}" for i, (t, n) in enumerate(zip(types, nullable, strict=True))
    )
    delimiter = draw(st.sampled_from([",", "|", ";", "\t"]))
    quoted = draw(st.booleans())
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        texts = [draw(fields(t)) for t in types]
        count = draw(st.integers(0, 12))
        if count == 0 and len(texts) > 1:
            texts.pop()  # too few fields
        elif count == 1:
            texts.append(draw(fields("VARSIZED")))  # too many
        line = delimiter.join(texts)
        if draw(st.integers(0, 5)) == 0:
            line += "\r"  # a CRLF line split at its LF
        if line:
            lines.append(line)
    return Case(schema, delimiter, quoted, tuple(lines) or ("x",))


@pytest.fixture(scope="module")
def has_jar(spark: Any) -> None:
    if csv_fields_function(spark, ["INT8"]) is None:
        pytest.fail("streamctl's jar does not load in the test session")


def _spec(case: Case) -> SourceSpec:
    return SourceSpec(1, "INLINE", {"data": ""}, columns(*case.schema))


def _frame(spark: Any, lines: tuple[str, ...]) -> S.Relation:
    return S.Relation(spark.createDataFrame([(line,) for line in lines], "value string"))


def _function(spark: Any, spec: SourceSpec) -> str:
    function = csv_fields_function(spark, [canonical_type(c["type"]) for c in spec.schema])
    assert function is not None
    return function


def _java_outcomes(spark: Any, case: Case) -> list[tuple[Any, ...] | str]:
    """Each line's values, or its failure message, from the Java parse's struct itself (one
    query: the struct carries the failure the planned source raises)."""
    spec = _spec(case)
    call = S.call(
        _function(spark, spec),
        S.col("value"),
        csv_layout(spec, case.delimiter, case.quoted).encode(),
    )
    structs = S.project(_frame(spark, case.lines), [call.alias("p")])
    values = struct_values(spec, S.col("p"))
    error = S.col("p").getField(FIELDS_ERROR).alias("error")
    rows = S.project(structs, [error, *(v.alias(f"v{i}") for i, v in enumerate(values))])
    return [r[0] if r[0] is not None else tuple(r[1:]) for r in rows.frame().collect()]


def _expressions(spark: Any, case: Case, lines: tuple[str, ...]) -> list[tuple[Any, ...]] | str:
    """The expressions' rows of ``lines``, or the query's failure message."""
    return _collect(
        _csv_expressions(_frame(spark, lines), _spec(case), case.delimiter, case.quoted)
    )


def _collect(parsed: S.Relation) -> list[tuple[Any, ...]] | str:
    try:
        return [tuple(row) for row in parsed.frame().collect()]
    except Exception as error:  # a malformed tuple fails the query: its message
        return failure_message(error)


def _compare(spark: Any, case: Case) -> None:
    """Both parses agree on every line: the lines the Java parse takes give the same rows
    from the expressions (one query), and each line it fails fails the expressions alone
    with the same message; the planned source fails where a line fails."""
    java = _java_outcomes(spark, case)
    taken = [(line, o) for line, o in zip(case.lines, java, strict=True) if not isinstance(o, str)]
    rows = _expressions(spark, case, tuple(line for line, _ in taken))
    assert not isinstance(rows, str), (case, "the expressions fail lines Java takes", rows)
    for (line, java_row), row in zip(taken, rows, strict=True):
        for declaration, a, b in zip(case.schema, java_row, row, strict=True):
            assert same_value(a, b), (case, line, declaration, a, b)
    failed = [(line, o) for line, o in zip(case.lines, java, strict=True) if isinstance(o, str)]
    for line, message in failed:
        assert _expressions(spark, case, (line,)) == message, (case, line)
    spec = _spec(case)
    planned = _csv_fields(
        _frame(spark, case.lines), spec, _function(spark, spec), case.delimiter, case.quoted
    )
    outcome = _collect(planned)
    if failed:
        assert outcome in {message for _, message in failed}, (case, outcome)
    else:
        assert not isinstance(outcome, str), (case, outcome)
        for planned_row, row in zip(outcome, rows, strict=True):
            assert all(same_value(a, b) for a, b in zip(planned_row, row, strict=True)), case


@spark_examples(6)
@given(case=cases())
@example(
    Case(
        ("a INT8?", "b UINT64", "c FLOAT32?", "d BOOLEAN", "e CHAR?", "f VARSIZED"),
        ",",
        True,
        (
            ' -128 ,18446744073709551615,\t-NaN ,TRUE, é ,"x, ""y"""',
            '127,0000000000000000000000001, .5e3 ,0,"z",\r',
            ',1,,1,,"a"\r',
        ),
    )
)
def test_the_java_parse_gives_what_the_expressions_give(
    spark: Any, has_jar: None, case: Case
) -> None:
    _compare(spark, case)


@spark_examples(4)
@given(case=cases())
def test_both_parses_mean_the_same_under_the_planners_settings(
    spark: Any, has_jar: None, case: Case
) -> None:
    """The planner analyses a source's parse with the query's operators, under SPARK_CONF
    (ANSI off, as Spark Connect analyses every query); a source read alone is analysed under
    the session's settings. Each parse gives the same rows, or fails with the same message,
    under both: each line alone, and all lines in one query (which fails, under both, with
    the message of one of its failing lines: whichever Spark reports first)."""
    spec = _spec(case)

    def outcomes(lines: tuple[str, ...]) -> tuple[list[tuple[Any, ...]] | str, ...]:
        java = _csv_fields(
            _frame(spark, lines), spec, _function(spark, spec), case.delimiter, case.quoted
        )
        general = _csv_expressions(_frame(spark, lines), spec, case.delimiter, case.quoted)
        return _collect(java), _collect(general)

    batches = [case.lines, *((line,) for line in case.lines)]
    with spark_conf(spark, ANSI_ON):
        default = [outcomes(lines) for lines in batches]
    with spark_conf(spark, SPARK_CONF):
        planned = [outcomes(lines) for lines in batches]
    for alone, a, b in zip(batches[1:], default[1:], planned[1:], strict=True):
        for x, y in zip(a, b, strict=True):
            assert same_outcome(x, y), (case, alone, x, y)
    failures = {x for outcome in default[1:] for x in outcome if isinstance(x, str)}
    for x, y in zip(default[0], planned[0], strict=True):
        if isinstance(x, str) or isinstance(y, str):
            assert isinstance(x, str) and isinstance(y, str) and {x, y} <= failures, (case, x, y)
        else:
            assert same_outcome(x, y), (case, x, y)
