"""JSON tuples read by the typed parse (:func:`streamctl.spark.tuples._json_columns`: straight
to ``BIGINT``/``DOUBLE`` where every key is present with a value of its type) give what the
general rules give (the text of each key parsed by its column's rules,
``tuples._json_fields`` then ``field_rules.typed_fields``), value for value, and fail where
they fail. Both typed parses are checked: streamctl's Java UDF (``jar``) and Spark's
``from_json``, which sessions without the jar use.

Generated tuples mix what the typed parse takes with everything it must hand over to the
general rules: keys in other cases, twice, with case twins or missing, ``null``, numbers out
of their type's range or past 64 bits, floats in integer columns, numbers in strings
(``"25"``, ``"+25"``, ``" 7 "``), JSON's non-numeric numbers bare (``NaN``) and in strings
(``"+INF"``), booleans as numbers, nested values, extra keys, lines that are no JSON object.
The general rules themselves are checked against the docs in ``test_formats_roundtrip``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from connector_helpers import ANSI_ON, same_value, source, spark_examples
from hypothesis import given
from hypothesis import strategies as st

from streamctl.spark import tuples as tuples_module
from streamctl.spark.field_rules import typed_fields
from streamctl.spark.translate import SPARK_CONF, spark_conf
from streamctl.spark.tuples import _json_fields, parse_lines

TYPED_PARSES = ("jar", "from_json")


@pytest.fixture(params=TYPED_PARSES)
def typed_parse(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which typed parse the source plans: without the jar's function, ``from_json``."""
    if request.param == "from_json":
        monkeypatch.setattr(tuples_module, "json_fields_function", lambda *_: None)
    return str(request.param)


SCHEMA = (
    "i8 INT8?",
    "u64 UINT64?",
    "i64 INT64?",
    "f64 FLOAT64?",
    "f32 FLOAT32?",
    "b BOOLEAN?",
    "s VARSIZED?",
    "c CHAR?",
    "u16 UINT16?",
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
    str(2**63), str(2**64), "-1", '{"x": 1}', "[1]", '"\\"NaN\\""', '" \\"-infinity\\" "',
    '"\\"inf\\""', '"\\"nan\\"\\u2028"', '"\\u0131nf"', '" 1.5\\t"', '"\\t7 "', '""', '" x "',
    '"\\ud83d\\ude00"', "65536", "-32769",
]  # fmt: skip
TEXT_NUMBERS = [
    "-0", "-0.0", "1.0", "2e2", "1e400", "1E5", "1.0e+05", "19.90", "0.0001", "-0e0", str(2**64),
    "0.10000000000000000000001", "1.0000000596046447753906250", "7.006492321624086e-46",
]  # fmt: skip
"""Numbers whose text Spark writes back otherwise than they are written."""
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
    if nes_type == "CHAR":
        return st.characters().map(json.dumps)
    if nes_type == "UINT16":
        return st.integers(0, 65535).map(json.dumps)
    return st.text(max_size=5).map(json.dumps)


@dataclass(frozen=True)
class Tuple:
    line: str
    twins: str | None = None
    """For a line whose keys repeat ignoring case: the line of each column's last exact key
    only. The general rules fail the line itself (JSON leaves repeated keys undefined); the
    typed parse may take it, as its last exact keys (module docstring of
    :mod:`streamctl.spark.tuples`), and then gives what the general rules give for this."""


@st.composite
def tuples(draw: st.DrawFn) -> Tuple:
    """A JSON tuple: most of its keys exact with a value the typed parse takes, some (none,
    often) spelled otherwise, twice, missing or holding anything."""
    if draw(st.integers(0, 30)) == 0:
        return Tuple(draw(st.sampled_from(["[1, 2]", "7", '"x"', "{", '{"n": 1', "{}"])))
    odd = set(draw(st.lists(st.sampled_from(NAMES), max_size=3)))
    members: list[tuple[str, str]] = []
    for declaration in SCHEMA:
        name, nes_type = declaration.split()
        valid = _valid(nes_type.rstrip("?"))
        if name not in odd:
            members.append((name, draw(valid)))
            continue
        # another spelling, twice, a case twin, missing; a valid value or anything
        # dotless i and long s upper-case to I and S: keys equal to the name ignoring case
        unicode_twin = name.replace("i", "\u0131").replace("s", "\u017f")
        spellings = draw(
            st.sampled_from(
                [[name], [name.upper()], [name.title()], [name, name], [name, name.upper()], [],
                 [unicode_twin], [name, unicode_twin]]
            )
        )  # fmt: skip
        for spelling in spellings:
            members.append((spelling, draw(st.one_of(valid, raw_values))))
    if draw(st.booleans()):
        members.append(("extra", '{"n": [1, 2]}'))
    if draw(st.integers(0, 5)) == 0:
        members.append(("EXTRA", "1"))  # a case twin of a key no column reads
    if draw(st.integers(0, 8)) == 0:
        # a case pair of Unicode 14 (Spark's upper maps case by ICU, Java 17's is Unicode 13)
        members.extend([("\ua7c0", "1"), ("\ua7c1", "2")])
    order = draw(st.permutations(members))
    twins = None
    if len({key.upper() for key, _ in order}) < len(order):
        last = {key: value for key, value in order if key in NAMES}
        twins = _object(last.items())
    return Tuple(_object(order), twins)


def _object(members: Iterable[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(key)}: {value}" for key, value in members) + "}"


def _rows(spark: Any, lines: list[str], general: bool, spec: Any) -> list[tuple[Any, ...]] | str:
    """The parsed rows, or what the failed query says (:func:`_failure`)."""
    frame = spark.createDataFrame([(line,) for line in lines], "value string")
    parsed = (
        typed_fields(_json_fields(frame, spec), spec, csv=False, quoted=False)
        if general
        else parse_lines(frame, spec).frame()
    )
    try:
        return [tuple(row) for row in parsed.collect()]
    except Exception as error:  # the query's failure: a malformed tuple
        return _failure(error)


def _failure(error: Exception) -> str:
    """What a failed query says: the message a tuple's failure raises, or the class of
    Spark's own error (a JSON object ``from_json`` cannot read, a key twice)."""
    parameters = getattr(error, "getMessageParameters", lambda: None)() or {}
    if "errorMessage" in parameters:
        return f"failed: {parameters['errorMessage']}"
    return f"failed: {getattr(error, 'getErrorClass', lambda: None)() or type(error).__name__}"


def _compare(spark: Any, cases: list[Tuple]) -> None:
    """Both parses agree on every line: all lines at once, one at a time where one fails (a
    malformed tuple fails its whole query). A line with repeated keys may fail the typed
    parse; where it does not, it gives what the general rules give for its ``twins``."""
    spec = source("INLINE", {"data": "", "format": "JSON"}, *SCHEMA)
    typed = _rows(spark, [case.line for case in cases], False, spec)
    general = _rows(spark, [case.twins or case.line for case in cases], True, spec)
    if isinstance(typed, str) or isinstance(general, str):
        if len(cases) > 1:
            for case in cases:
                _compare(spark, [case])
            return
        if not (cases[0].twins is not None and isinstance(typed, str)):
            assert typed == general, (cases, typed, general)
        return
    for case, a_row, b_row in zip(cases, typed, general, strict=True):
        for name, a, b in zip(NAMES, a_row, b_row, strict=True):
            assert same_value(a, b), (case, name, a, b)


@spark_examples(4)
@given(cases=st.lists(tuples(), min_size=1, max_size=6))
def test_the_typed_parse_gives_what_the_general_rules_give(
    spark: Any, typed_parse: str, cases: list[Tuple]
) -> None:
    _compare(spark, cases)


COMPLETE = {"i8": "1", "u64": "2", "i64": "3", "f64": "4.5", "f32": "5.5", "b": "true",
            "s": '"x"', "c": '"y"', "u16": "7", "n": "6"}  # fmt: skip


FUZZ_ALPHABET = "{}[]\":,'\\ \t\n\x00\x01019aeEINnu+-./*é\ufeff\ud800"
"""Characters a mutated tuple gains: JSON's syntax, escapes, numbers' characters, a byte
order mark, a lone surrogate."""


@st.composite
def odd_syntax(draw: st.DrawFn) -> Tuple:
    """A tuple of :func:`tuples` in a syntax that is not strict JSON, or no longer JSON at
    all: what Spark's JSON reader allows (single quotes, ``NaN``) and what it refuses
    (comments, leading zeros, unquoted keys, a trailing comma, control characters), text after
    the object (which it does not read), escaped keys, and characters inserted, replaced or
    deleted anywhere."""
    base = draw(tuples())
    line = base.line
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            line = line.replace('"', "'")
        elif kind == 1:
            line = line + draw(st.sampled_from([" x", '{"n": 1}', " // c", "\n", ",", "]", "}"]))
        elif kind == 2:
            line = draw(st.sampled_from([" ", "\t", "\ufeff", "/*c*/", "\n"])) + line
        elif kind == 3:
            line = line.replace(": ", draw(st.sampled_from([": 0", ":", ": +", " :"])), 1)
        elif kind == 4:
            line = line[:-1] + ",}" if line.endswith("}") else line
        elif kind == 5:
            line = line.replace('"n"', draw(st.sampled_from(["n", '"\\u006e"', "'N'"])), 1)
            # lone surrogates in keys, which Spark's strings hold as '?': twins
            lone = draw(st.sampled_from(["", "'\\ud800': 1, '\\udc00': 2, ", "'\\ud800': 1, "]))
            line = line.replace("{", "{" + lone, 1)
        elif kind == 6:
            position = draw(st.integers(0, len(line)))
            line = line[:position] + draw(st.sampled_from(FUZZ_ALPHABET)) + line[position:]
        elif kind == 7 and line:
            position = draw(st.integers(0, len(line) - 1))
            line = line[:position] + line[position + 1 :]
        elif kind == 8:
            line = line[: draw(st.integers(0, len(line)))]
        else:
            line = line.replace('"x"', draw(st.sampled_from(['"a\x01b"', "'q'", '"\\ud800"'])))
    # a line still the same strict JSON object keeps its twins (the typed parse may take it);
    # an empty line is no tuple (parse_lines skips it, the general parse alone does not)
    members = _strict_members(line)
    if members == _strict_members(base.line):
        return Tuple(line or " ", base.twins)
    if members is not None and len({key.upper() for key, _ in members}) < len(members):
        return base  # another strict object with twins: its twins are not known here
    return Tuple(line or " ")


def _strict_members(line: str) -> list[tuple[str, Any]] | None:
    """The members of ``line`` as strict JSON (no ``NaN``, nothing after the object), or
    None."""

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        value = json.loads(
            line, object_pairs_hook=lambda pairs: ("object", pairs), parse_constant=refuse
        )
    except ValueError:
        return None
    return list(value[1]) if isinstance(value, tuple) else None


@spark_examples(6)
@given(cases=st.lists(odd_syntax(), min_size=1, max_size=4))
def test_tuples_in_any_syntax_read_as_from_json_reads_them(spark: Any, cases: list[Tuple]) -> None:
    """The jar's general rules (``NesJsonKeys``: the keys' texts) give what Spark's
    ``from_json`` gives and fail where it fails, with the same message, on text that is JSON
    only to Spark's lenient reader or to no reader."""
    _compare(spark, cases)


@pytest.mark.parametrize(
    "line",
    [
        '{"n": "1", "x": 1, "X": 2}',
        '{"n": "1", "n": "2"}',
        '{"N": "1", "n": "2"}',
        '{"n": "1", "\\ud800": 1, "\\udfff": 2}',
        '{"n": "1", "\ua7c0": 1, "\ua7c1": 2}',
        '{"\u0131": "1"}',
    ],
)
def test_keys_equal_ignoring_case_fail_a_tuple_of_one_column_too(
    spark: Any, typed_parse: str, line: str
) -> None:
    """With one column Spark may inline the map the lookup ignoring case reads into that
    lookup, and evaluate it only where the exact key is missing; the check of keys equal
    ignoring case is made where every tuple passes, so both parses fail these tuples."""
    spec = source("INLINE", {"data": "", "format": "JSON"}, "n INT32?")
    frame = spark.createDataFrame([(line,)], "value string")
    results = []
    for parsed in (
        parse_lines(frame, spec).frame(),
        typed_fields(_json_fields(frame, spec), spec, csv=False, quoted=False),
    ):
        try:
            results.append([tuple(row) for row in parsed.collect()])
        except Exception as error:
            results.append(_failure(error))
    assert results[0] == results[1]
    if "\u0131" not in line:
        assert "two keys equal ignoring case" in str(results[0]), results


def test_each_odd_value_in_an_otherwise_typed_tuple(spark: Any, typed_parse: str) -> None:
    """Every value the typed parse must not take, alone in a tuple it would otherwise take."""
    lines = []
    for index, value in enumerate(ODD_VALUES):  # each value in one of the typed columns
        members = {**COMPLETE, ("i8", "u64", "f64", "f32", "c", "u16")[index % 6]: value}
        lines.append("{" + ", ".join(f'"{k}": {v}' for k, v in members.items()) + "}")
    _compare(spark, [Tuple(line) for line in lines])


def test_a_key_given_twice_is_never_taken_as_its_first_value(spark: Any, typed_parse: str) -> None:
    """A key twice whose last value the typed parse cannot take: the tuple is not taken as
    the first value (Spark's ``from_json`` keeps the fields it read before a failing one), so
    it fails as the general rules fail its last exact keys. Found by the property above."""
    for last in [str(2**64), '"x"', "1.5", "null"]:
        line = "{" + ", ".join(f'"{k}": {v}' for k, v in COMPLETE.items()) + f', "i64": {last}}}'
        twins = line.replace('"i64": 3, ', "")  # each column's last exact key
        _compare(spark, [Tuple(line, twins)])


def test_numbers_in_text_columns(spark: Any, typed_parse: str) -> None:
    """A number in a column the typed parse reads as text is the text the general rules make
    of it (not always as written: ``1E5``, ``-0``), for strings and FLOAT32 alike."""
    lines = []
    for value in TEXT_NUMBERS:
        members = {**COMPLETE, "s": value}
        lines.append("{" + ", ".join(f'"{k}": {v}' for k, v in members.items()) + "}")
        if "e4" not in value:  # not infinite: a float column's
            members = {**COMPLETE, "f32": value}
            lines.append("{" + ", ".join(f'"{k}": {v}' for k, v in members.items()) + "}")
    _compare(spark, [Tuple(line) for line in lines])


@spark_examples(4)
@given(cases=st.lists(tuples(), min_size=1, max_size=6))
def test_the_parse_means_the_same_under_the_planners_settings(
    spark: Any, typed_parse: str, cases: list[Tuple]
) -> None:
    """The planner analyses a source's parse with the query's operators, under SPARK_CONF
    (ANSI off, as Spark Connect analyses every query); a source read alone is analysed under
    the session's settings (Spark's default: ANSI on). The parse gives the same rows, or the
    same failure, under both: each line alone, and all lines in one query (which fails, under
    both, with the failure of one of its failing lines: whichever Spark reports first)."""
    spec = source("INLINE", {"data": "", "format": "JSON"}, *SCHEMA)
    batches = [[case.line for case in cases]] + [[case.line] for case in cases]
    with spark_conf(spark, ANSI_ON):
        default = [_rows(spark, lines, False, spec) for lines in batches]
    with spark_conf(spark, SPARK_CONF):
        planned = [_rows(spark, lines, False, spec) for lines in batches]
    failures = {outcome for outcome in default[1:] if isinstance(outcome, str)}
    for index, (lines, a, b) in enumerate(zip(batches, default, planned, strict=True)):
        if isinstance(a, str) or isinstance(b, str):
            together = isinstance(a, str) and isinstance(b, str) and {a, b} <= failures
            assert a == b if index else together, (lines, a, b)
            continue
        for row_a, row_b in zip(a, b, strict=True):
            assert all(same_value(x, y) for x, y in zip(row_a, row_b, strict=True)), (lines, a, b)
