"""``GENERATOR_SCHEMA`` and ``GENERATOR_RATE_CONFIG`` texts from anyone: parsed, or refused with
``GeneratorSchemaError`` (the request's ``INVALID_REQUEST``), never another exception (an
``INTERNAL`` answer and a quarantined request), and never accepted with a value a query start
refuses later (a non-finite number, a length the agent cannot build).

Seen before: ``RANDOMSTR ² 5`` (``str.isdigit`` takes ``²``, ``int`` does not), 5,000-digit
numbers (Python refuses to read more than 4,300 digits), ``1e400`` (stored as ``inf``, refused
by the agent), ``RANDOMSTR 1 99999999999999`` (the agent grew by 35 MB/s building it).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.limits import MAX_RANDOM_STRING_LENGTH
from streamctl.planner import options
from streamctl.planner.generator_schema import (
    GeneratorSchemaError,
    NormalField,
    RandomStringField,
    SequenceField,
    format_generator_schema,
    parse_generator_schema,
    parse_rate,
)
from streamctl.planner.options import ConnectorOptionError

pytestmark = pytest.mark.quick

NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        ["²", "1e400", "-1e400", "1e-400", "9" * 5000, "0" * 5000 + "1", "0" * 30 + "7", "٣", ""]
    ),
    st.text(alphabet="0123456789.eE-+x", min_size=1, max_size=30),
)
WORDS = st.sampled_from(
    [
        "SEQUENCE",
        "NORMAL_DISTRIBUTION",
        "RANDOMSTR",
        "WORDLIST",
        "UINT64",
        "INT8",
        "FLOAT32",
        "FLOAT64",
        "sequence",
    ]
)
TYPES = st.sampled_from(["UINT64", "INT8", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN"])
LINES = st.one_of(
    st.tuples(TYPES, NUMBERS, NUMBERS, NUMBERS).map(lambda w: "SEQUENCE " + " ".join(w)),
    st.tuples(TYPES, NUMBERS, NUMBERS).map(lambda w: "NORMAL_DISTRIBUTION " + " ".join(w)),
    st.tuples(NUMBERS, NUMBERS).map(lambda w: "RANDOMSTR " + " ".join(w)),
    st.lists(st.one_of(WORDS, NUMBERS), min_size=1, max_size=6).map(" ".join),
)


@settings(max_examples=600, deadline=None)
@given(lines=st.lists(LINES, min_size=1, max_size=3))
def test_a_generator_schema_is_parsed_or_refused_with_its_own_error(lines: list[str]) -> None:
    text = ", ".join(lines)
    try:
        fields = parse_generator_schema(text)
    except GeneratorSchemaError:
        return
    for field in fields:
        if isinstance(field, SequenceField):
            assert all(math.isfinite(v) for v in (field.start, field.end, field.step))
            field.rows_until_stop()  # countable: no OverflowError
        elif isinstance(field, NormalField):
            assert math.isfinite(field.mean) and math.isfinite(field.stddev)
        elif isinstance(field, RandomStringField):
            assert 0 < field.min_length <= field.max_length <= MAX_RANDOM_STRING_LENGTH
    # the canonical text, as stored, is read back to the same fields (what the agent does)
    assert parse_generator_schema(format_generator_schema(fields)) == fields


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from(["FIXED", "SINUS", "fixed", "OTHER"]),
    pairs=st.lists(
        st.tuples(st.sampled_from(["emit_rate", "amplitude", "frequency", "x"]), NUMBERS),
        max_size=3,
    ),
)
def test_a_rate_config_is_parsed_or_refused_with_its_own_error(
    kind: str, pairs: list[tuple[str, str]]
) -> None:
    config = ", ".join(f"{key} {value}" for key, value in pairs)
    try:
        rate = parse_rate(kind, config)
    except GeneratorSchemaError:
        return
    assert all(math.isfinite(float(v)) for v in vars(rate).values() if isinstance(v, float))
    assert parse_rate(rate.kind, rate.config_text()) == rate


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(NUMBERS, st.integers(-(2**70), 2**70), st.floats()))
def test_an_integer_option_is_read_or_refused_with_its_own_error(value: object) -> None:
    """Integer connector options (ports, sizes) given as any text or number: read, within
    bounds, or refused ``ConnectorOptionError`` (5,000 digits were a ``ValueError``:
    ``INTERNAL``)."""
    convert = options._integer(1, 65535)
    try:
        number = convert("socket_port", value)
    except ConnectorOptionError:
        return
    assert 1 <= number <= 65535
