"""JSON tuples read by the typed parse (:func:`streamctl.spark.tuples._json_columns`: Spark's
JSON reader straight to ``BIGINT``/``DOUBLE`` where every key is present exactly with a value
of its type) give what the general rules give (the text of each key parsed by its column's
rules, ``_json_fields`` then ``_typed_fields``), value for value, and fail where they fail.

Generated tuples mix what the typed parse takes with everything it must hand over to the
general rules: keys in other cases or missing, ``null``, numbers out of their type's range or
past 64 bits, floats in integer columns, numbers in strings (``"25"``, ``"+25"``, ``" 7 "``),
JSON's non-numeric numbers bare (``NaN``) and in strings (``"+INF"``), booleans as numbers,
nested values, extra keys, lines that are no JSON object. The general rules themselves are
checked against the docs in ``test_formats_roundtrip``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from connector_helpers import source
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streamctl.spark.tuples import _json_fields, _typed_fields, parse_lines

SCHEMA = (
    "i8 INT8?",
    "u64 UINT64?",
    "i64 INT64?",
    "f64 FLOAT64?",
    "f32 FLOAT32?",
    "b BOOLEAN?",
    "s VARSIZED?",
    "n INT32",
)
NAMES = [declaration.split()[0] for declaration in SCHEMA]

integers = st.one_of(
    st.integers(-200, 300),
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
)

ODD_VALUES = [
    '"25"', '"+25"', '" 7 "', '"-0"', '"1.5"', '"NaN"', '"+INF"', '"Infinity"', '"-INF"', "NaN",
    "Infinity", "-Infinity", "true", "null", "1e400", "-0", "-0.0", "1.0", "2e2", "300", "-129",
    str(2**63), str(2**64), "-1", '{"x": 1}', "[1]",
]  # fmt: skip
raw_values = st.one_of(
    integers.map(json.dumps),
    st.floats(allow_nan=True, allow_infinity=True).map(json.dumps),  # NaN, Infinity bare
    st.sampled_from([*ODD_VALUES, '"true"', '"TRUE"', '"1"', "false", '"x"', '""', '"\\u00e9"']),
)


def _valid(nes_type: str) -> st.SearchStrategy[str]:
    """Values the typed parse takes for a column of ``nes_type``."""
    ranges = {"INT8": (-128, 127), "UINT64": (0, 2**63 - 1), "INT64": (-(2**63), 2**63 - 1)}
    if nes_type in ranges or nes_type == "INT32":
        low, high = ranges.get(nes_type, (-(2**31), 2**31 - 1))
        return st.one_of(st.integers(low, high), st.sampled_from([low, high])).map(json.dumps)
    if nes_type.startswith("FLOAT"):
        return st.floats(allow_nan=False, allow_infinity=False).map(json.dumps)
    if nes_type == "BOOLEAN":
        return st.sampled_from(["true", "false"])
    return st.text(max_size=5).map(json.dumps)


@st.composite
def tuples(draw: st.DrawFn) -> str:
    """A JSON tuple: most of its keys exact with a value the typed parse takes, some (none,
    often) spelled otherwise, missing or holding anything."""
    if draw(st.integers(0, 30)) == 0:
        return draw(st.sampled_from(["[1, 2]", "7", '"x"', "{", '{"n": 1', "{}"]))
    odd = set(draw(st.lists(st.sampled_from(NAMES), max_size=2)))
    members = []
    for declaration in SCHEMA:
        name, nes_type = declaration.split()
        if name not in odd:
            members.append(f'"{name}": {draw(_valid(nes_type.rstrip("?")))}')
            continue
        spelling = draw(st.sampled_from([name, name.upper(), None]))
        if spelling is not None:
            members.append(f'"{spelling}": {draw(raw_values)}')
    if draw(st.booleans()):
        members.append('"extra": {"n": [1, 2]}')
    order = draw(st.permutations(members))
    return "{" + ", ".join(order) + "}"


def _rows(spark: Any, lines: list[str], general: bool) -> list[tuple[Any, ...]] | str:
    """The parsed rows, or ``"failed"``."""
    spec = source("INLINE", {"data": "", "format": "JSON"}, *SCHEMA)
    frame = spark.createDataFrame([(line,) for line in lines], "value string")
    parsed = (
        _typed_fields(_json_fields(frame, spec), spec, csv=False, quoted=False)
        if general
        else parse_lines(frame, spec)
    )
    try:
        return [tuple(row) for row in parsed.collect()]
    except Exception:  # the query's failure: a malformed tuple
        return "failed"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b and type(a) is type(b) and repr(a) == repr(b))


def _compare(spark: Any, lines: list[str]) -> None:
    """Both parses agree on every line: all lines at once, one at a time where one fails (a
    malformed tuple fails its whole query)."""
    typed, general = _rows(spark, lines, False), _rows(spark, lines, True)
    if isinstance(typed, str) or isinstance(general, str):
        if len(lines) > 1:
            for line in lines:
                _compare(spark, [line])
            return
        assert typed == general, (lines, typed, general)
        return
    for line, a_row, b_row in zip(lines, typed, general, strict=True):
        for name, a, b in zip(NAMES, a_row, b_row, strict=True):
            assert _same(a, b), (line, name, a, b)


@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lines=st.lists(tuples(), min_size=1, max_size=6))
def test_the_typed_parse_gives_what_the_general_rules_give(spark: Any, lines: list[str]) -> None:
    _compare(spark, lines)


COMPLETE = {"i8": "1", "u64": "2", "i64": "3", "f64": "4.5", "f32": "5.5", "b": "true",
            "s": '"x"', "n": "6"}  # fmt: skip


def test_each_odd_value_in_an_otherwise_typed_tuple(spark: Any) -> None:
    """Every value the typed parse must not take, alone in a tuple it would otherwise take."""
    lines = []
    for index, value in enumerate(ODD_VALUES):  # each value in one of the typed columns
        members = {**COMPLETE, ("i8", "u64", "f64")[index % 3]: value}
        lines.append("{" + ", ".join(f'"{k}": {v}' for k, v in members.items()) + "}")
    _compare(spark, lines)
