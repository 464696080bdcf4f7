"""NebulaStream's field rules as Spark expressions.

Protocol: :mod:`streamctl.spark.tuples` hands :func:`typed_fields` a relation of raw field
texts ``_f<i>`` (a CSV tuple's fields, a JSON tuple's key texts) and gets each column's typed
value, or a query that fails on the first field that breaks the rules of ``tuples``' module
docstring ("Parsing"), with the message that names source, column and value
(:func:`invalid_prefix`). These are the rules a session without streamctl's jar plans (a Spark
Connect server without it); the Java parses (``jvm/NesCsvFields.java``,
``jvm/NesJsonTexts.java``) implement the same rules and are checked against these
(``tests/connectors/test_csv_fields.py``, ``tests/connectors/test_json_typed_parse.py``).
:func:`accept` and :func:`in_range` also check typed input (``tuples.conform``).

The expressions are Spark SQL text (:mod:`streamctl.spark.sql_text`): each projection reaches
the JVM in one call per column, where building them with pyspark's functions takes a call per
node (2,400 of a CSV query's start). Each choice below that looks odd is for speed, measured
with Java Flight Recorder; the docstrings say which.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, Final

from streamctl.nes_types import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    UNSIGNED_TYPES,
    canonical_type,
    integer_range,
)
from streamctl.spark import sql_text as S
from streamctl.spark.spark_types import spark_type_ddl
from streamctl.spark.specs import SourceSpec
from streamctl.spark.sql_text import Relation, Sql

__all__ = [
    "SAME_RANGE_CARRIERS",
    "accept",
    "candidate_value",
    "decimal_length",
    "field_text",
    "in_range",
    "invalid_prefix",
    "typed_fields",
]


def invalid_prefix(spec: SourceSpec, column: Mapping[str, Any], why: str) -> str:
    """A malformed (``why`` empty) or missing (``why`` `` NOT NULL``) value's failure text,
    before the raw field and a closing ``'``."""
    return f"source {spec.id}: column {column['name']!r} ({column['type']}{why}) cannot take '"


def _invalid(spec: SourceSpec, column: Mapping[str, Any], raw: Sql, why: str) -> Sql:
    return S.call(
        "raise_error",
        S.call(
            "concat",
            invalid_prefix(spec, column, why),
            S.call("coalesce", raw.cast("STRING"), "NULL"),
            "'",
        ),
    )


def accept(
    value: Sql,
    valid: Sql | None,
    missing: Sql,
    raw: Sql,
    column: Mapping[str, Any],
    spec: SourceSpec,
) -> Sql:
    """NULL where ``missing`` (a query failure in a NOT NULL column), ``value`` where
    ``valid`` (``None``: every value that is not missing), otherwise a query failure (a
    malformed value). A value always valid has no arm of its own: each arm is text Spark
    analyses, optimises and compiles on every batch."""
    target = spark_type_ddl(column["type"])
    absent = S.lit(None).cast(target)
    if not column["nullable"]:
        absent = _invalid(spec, column, raw, " NOT NULL").cast(target)
    if valid is None:
        return S.when(missing, absent).otherwise(value.cast(target))
    return (
        S.when(missing, absent)
        .when(S.call("coalesce", valid, False), value.cast(target))
        .otherwise(_invalid(spec, column, raw, "").cast(target))
    )


# Number texts as NES takes them, with the white space around them (Java's ``\s`` is exactly
# :data:`_BLANKS`): numbers are matched and cast untrimmed, since Spark's casts skip the blanks
# themselves and trimming a set of characters costs more than the parse (``\z``: the end of
# the text, not before a final line terminator as ``$``).
_INTEGER_TEXT: Final = r"^\s*-?[0-9]+\s*\z"
_UNSIGNED_TEXT: Final = r"^\s*[0-9]+\s*\z"
_FLOAT_TEXT: Final = (
    r"(?i)^\s*-?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?|inf|infinity|nan)\s*\z"
)
_NEGATIVE_NAN: Final = r"(?i)^\s*-nan\s*\z"


SAME_RANGE_CARRIERS: Final = frozenset({"INT8", "INT16", "INT32", "INT64"})
"""Integer types whose Spark carrier (:mod:`streamctl.spark.spark_types`) has exactly their
range."""
_LONG_DIGITS: Final = 18
"""Every unsigned text of at most this many digits is below 2**63: a ``BIGINT`` holds it."""


def in_range(number: Sql, nes_type: str) -> Sql:
    """Whether an integer value lies within its NES type: compared as ``BIGINT`` where both
    bounds are one (no decimal per value), as exact decimals for ``UINT64``."""
    low, high = integer_range(nes_type)
    if nes_type == "UINT64":
        return number.between(Decimal(low), Decimal(high))
    return number.between(low, high)


def _integer(text: Sql, nes_type: str, long_value: Sql | None = None) -> Sql:
    """The integer ``text`` stands for in the column's Spark type, or NULL where it is not one
    of ``nes_type`` (not ``-?[0-9]+`` between white space, unsigned without a sign, or out of
    range).

    Parsed as ``BIGINT`` (``try_cast``: NULL past 64 bits), never as a decimal, except the
    rare ``UINT64`` text of more than 18 characters; the regular expression makes the text
    exactly what NES accepts (``try_cast`` alone would take ``+5`` or control characters
    around the digits). It runs only where the text is not the number's own decimal form
    (``-?[0-9]+`` without leading zeros): the usual text passes, and Java's regular
    expressions (a ``Matcher`` per value) are a fifth of a CSV query's time (Java Flight
    Recorder; ``OR`` evaluates its right side only where the left is not true).

    A text is its number's own form exactly where it is as long as that form
    (:func:`decimal_length`): every other text the cast reads has something more (white
    space, ``+``, a leading zero, a ``-`` before 0, a decimal point). Comparing lengths spares
    writing each number out as a string (``CAST(n AS STRING)``), a tenth of a CSV query's
    executor samples.

    ``long_value``: ``text`` cast to ``BIGINT`` (``try_cast``), as a column of its own
    (:func:`typed_fields`): the length comparison names it dozens of times."""
    if long_value is None:
        long_value = text.try_cast("BIGINT")
    canonical = S.call("octet_length", text) == decimal_length(long_value)
    if nes_type in UNSIGNED_TYPES:
        canonical = canonical & (long_value >= 0)
    syntax = canonical | text.rlike(_UNSIGNED_TEXT if nes_type in UNSIGNED_TYPES else _INTEGER_TEXT)
    if nes_type == "UINT64":
        carrier = spark_type_ddl(nes_type)
        short = long_value.cast(carrier)
        wide = text.try_cast(carrier)  # NULL past 20 digits
        # bytes, not characters (no count): the syntax leaves only ASCII digits and blanks
        value = S.when(S.call("octet_length", text) <= _LONG_DIGITS, short)
        value = value.when(in_range(wide, nes_type), wide)
        return S.when(syntax, value)
    if nes_type != "INT64":  # the range is judged on the BIGINT, so syntax is named once
        syntax = syntax & in_range(long_value, nes_type)
    return S.when(syntax, long_value).cast(spark_type_ddl(nes_type))


def decimal_length(number: Sql) -> Sql:
    """The length of a ``BIGINT``'s decimal form (``-`` and digits), by comparisons against
    powers of ten on its own side of zero (so ``-2**63`` is never negated).

    ``number`` is named 37 times: pass a column, not an expression. Spark's analyser walks the
    whole expression tree on every start; with the number written out (``TRY_CAST``) and
    negated in each comparison, a source of three integer columns would be an 18 KB query
    whose analysis is a third of a planned CSV query's start."""
    non_negative = S.when(number < 10, 1)
    negative = S.when(number > -10, 2)
    for count in range(2, 19):
        non_negative = non_negative.when(number < 10**count, count)
        negative = negative.when(number > -(10**count), count + 1)
    return S.when(number >= 0, non_negative.otherwise(19)).otherwise(negative.otherwise(20))


_BLANKS: Final = " \t\n\u000b\f\r"
"""White space a number or boolean field may have around it: Java's regex ``\\s``."""


def _unquoted(field: Sql) -> Sql:
    """The field without one level of surrounding double quotes (``""`` inside is ``"``).

    Java's ``$`` also matches before a final line terminator, so a quoted last field of a
    CRLF line (a carriage return after ``"alice"``) is unquoted too, and loses the return."""
    inner = S.call("regexp_replace", S.call("regexp_extract", field, r'(?s)^"(.*)"$', 1), '""', '"')
    # a field that does not start with a quote cannot match: the plain test spares most
    # fields the regular expression
    quoted = field.startswith('"') & field.rlike(r'(?s)^".*"$')
    return S.when(quoted, inner).otherwise(field)


def typed_fields(
    raw: Relation,
    spec: SourceSpec,
    *,
    csv: bool,
    quoted: bool,
    fast: Mapping[int, Sql] | None = None,
) -> Relation:
    """Typed columns from raw field texts ``_f<i>``, in projections so that each expression
    runs once per field (Spark keeps a projection apart where collapsing it would repeat a
    costly expression): the cleaned texts ``_t<i>`` (and an integer text's ``BIGINT``,
    ``_n<i>``), then each text's candidate value ``_c<i>`` (NULL where the text is not of the
    column's type), then the checked values.

    ``fast``: values of columns already typed (over columns of ``raw``), taken where ``raw``'s
    ``_complete`` holds; the text is parsed only where it does not.
    """
    fast = fast or {}
    count = len(spec.schema)
    carried = [S.col(c) for c in raw.columns if not c.startswith("_f")]
    raw_fields = [S.col(f"_f{i}") for i in range(count)]
    cleaned = S.project(
        raw,
        [
            *carried,
            *raw_fields,
            *(
                field_text(field, column, csv=csv, quoted=quoted).alias(f"_t{i}")
                for i, (field, column) in enumerate(zip(raw_fields, spec.schema, strict=True))
            ),
        ],
    )
    integers = [
        i for i, column in enumerate(spec.schema) if canonical_type(column["type"]) in INTEGER_TYPES
    ]
    texts = [S.col(f"_t{i}") for i in range(count)]
    if integers:  # each integer text's BIGINT once, as a column _n<i> the checks name
        cleaned = S.project(
            cleaned,
            [
                *carried,
                *raw_fields,
                *texts,
                *(texts[i].try_cast("BIGINT").alias(f"_n{i}") for i in integers),
            ],
        )
    candidates = S.project(
        cleaned,
        [
            *carried,
            *raw_fields,
            *(
                candidate_value(texts[i], column, S.col(f"_n{i}") if i in integers else None).alias(
                    f"_c{i}"
                )
                for i, column in enumerate(spec.schema)
            ),
        ],
    )
    values = []
    for i, column in enumerate(spec.schema):
        value = _parse_field(raw_fields[i], S.col(f"_c{i}"), column, spec, csv=csv)
        if i in fast:
            value = S.when(S.col("_complete"), fast[i]).otherwise(value)
        values.append(value.alias(column["name"]))
    return S.project(candidates, values)


def field_text(field: Sql, column: Mapping[str, Any], *, csv: bool, quoted: bool) -> Sql:
    """A field's text to parse: without quotes, trimmed unless ``VARSIZED`` or a number (whose
    syntax takes the white space around it)."""
    nes_type = canonical_type(column["type"])
    text = _unquoted(field) if quoted else field
    if nes_type == "VARSIZED":
        return text
    if nes_type in FLOAT_TYPES and not csv:
        # Spark's JSON parser hands JSON's non-numeric numbers back quoted
        trimmed = S.call("btrim", text, _BLANKS)
        return S.call("regexp_replace", trimmed, r'(?i)^"(-?(?:infinity|nan))"$', "$1")
    if nes_type in INTEGER_TYPES or nes_type in FLOAT_TYPES:
        return text  # matched with its white space (_INTEGER_TEXT, _FLOAT_TEXT)
    return S.call("btrim", text, _BLANKS)


def candidate_value(text: Sql, column: Mapping[str, Any], long_value: Sql | None = None) -> Sql:
    """The value a field's text stands for in its column's type, or NULL where the text is not
    of that type: an integer or a float as its Spark type (:func:`_integer`: NULL out of
    range too, ``long_value`` the text cast to ``BIGINT`` if already computed), a boolean's
    text lower-cased; other texts as they are."""
    nes_type = canonical_type(column["type"])
    if nes_type == "BOOLEAN":
        return S.call("lower", text)
    if nes_type in INTEGER_TYPES:
        return _integer(text, nes_type, long_value)
    if nes_type in FLOAT_TYPES:
        target = spark_type_ddl(nes_type)
        number = text.try_cast(target)
        # Spark's cast reads every other form of the syntax, but not "-nan" (C's strtod does)
        negative_nan = S.when(text.rlike(_NEGATIVE_NAN), S.lit(float("nan")).cast(target))
        fallback = S.when(text.rlike(_FLOAT_TEXT), S.call("coalesce", number, negative_nan))
        return S.when(_plain_decimal_shape(text), number).otherwise(fallback)
    return text


def _plain_decimal_shape(text: Sql) -> Sql:
    """Whether ``text`` begins with a digit, ``-`` or ``.``, ends with a digit and is no
    hexadecimal (``0x``/``-0x`` in either case): then it is of :data:`_FLOAT_TEXT`'s syntax
    exactly where Java's ``parseDouble`` (Spark's cast) reads it, and the cast alone decides,
    with no regular expression.

    Why: Java reads a decimal ``[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?``, with a
    type suffix (``d``, ``F``), as hexadecimal (``[+-]?0[xX]...``), as ``NaN``/``Infinity``,
    or with characters up to U+0020 around it. The shape leaves only the decimal without
    ``+`` sign, suffix or characters around, which is NES's syntax less its ``inf``/``nan``
    words (those and every other text take the regular expression). Java's regular
    expressions are a tenth of a CSV query's executor time (Java Flight Recorder). Every test
    here looks at a fixed few bytes at either end, none counts or scans the text: counting
    characters (``right`` does, twice) and scanning for an ``x`` cost a fifth of a planned
    CSV filter/project's executor samples. Characters compare as UTF-8 bytes, so no
    other script's digit is between ``0`` and ``9``."""
    # a text begins with a digit where it sorts from "0" to before ":" (the byte after "9")
    starts_with_digit = (text >= "0") & (text < ":")
    starts = starts_with_digit | text.startswith("-") | text.startswith(".")
    ends_in_digit = _any(text.endswith(digit) for digit in "0123456789")
    hexadecimal = _any(text.startswith(prefix) for prefix in ("0x", "0X", "-0x", "-0X"))
    return ends_in_digit & starts & ~hexadecimal


def _any(tests: Iterable[Sql]) -> Sql:
    tests = list(tests)
    return functools.reduce(operator.or_, tests[1:], tests[0])


def _parse_field(
    field: Sql, candidate: Sql, column: Mapping[str, Any], spec: SourceSpec, *, csv: bool
) -> Sql:
    """One field (raw, and its :func:`candidate_value`) as a typed value (module docstring)."""
    nes_type = canonical_type(column["type"])
    missing = (field == "") if csv else field.isNull()
    if nes_type == "VARSIZED":
        if csv and not column["nullable"]:
            missing = S.lit(False)  # an empty field is the empty string where NULL cannot be
        return accept(candidate, None, missing, field, column, spec)
    if nes_type == "CHAR":
        return accept(candidate, S.call("length", candidate) == 1, missing, field, column, spec)
    if nes_type == "BOOLEAN":
        valid = candidate.isin("true", "false", "1", "0")
        return accept(candidate.isin("true", "1"), valid, missing, field, column, spec)
    return accept(candidate, candidate.isNotNull(), missing, field, column, spec)
