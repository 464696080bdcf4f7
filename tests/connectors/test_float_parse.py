"""Float fields of CSV and JSON tuples are read correctly rounded, as C's ``strtod``/``strtof``
(NebulaStream's parse) read them: the planned parse (:func:`streamctl.spark.tuples.parse_lines`,
the jar's Java parse in a session that has it) against Python's ``float`` for FLOAT64 (David
Gay's correctly rounded parse) and an exact rounding of the decimal's rational value for
FLOAT32 (ties to even; rounding through a double first would differ). FLOAT32 in JSON
tuples is not checked here: it is read through the double nearest the text and Java's text
of that double, as Spark's JSON reader (the general rules of :mod:`streamctl.spark.tuples`)
gives it, which differs from ``strtof`` for texts within a double's rounding error of a
halfway point between two floats (a known difference).

The texts are the hard ones for a parser: exactly halfway between two neighbouring doubles
or floats, and a digit past it either way (40 and more significant digits, subnormals and
the largest values included), long random mantissas with any exponent (overflow to an
infinity, underflow to a signed zero), and the shortest texts of random values.
"""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any, Final

import numpy as np
import pytest
from connector_helpers import source, spark_examples
from hypothesis import example, given
from hypothesis import strategies as st

from streamctl.planner.options import normalize_source_options
from streamctl.spark.jvm_functions import csv_fields_function
from streamctl.spark.tuples import parse_lines

_FLOAT32_MAX: Final = Fraction(struct.unpack("<f", b"\xff\xff\x7f\x7f")[0])


def _decimal_text(value: Decimal, negative: bool) -> str:
    """``value``'s exact digits in JSON's (and NES's) number syntax."""
    return ("-" if negative else "") + format(value, "e")


def _between(low: float, high: float | Decimal, nudge: int) -> Decimal:
    """The decimal exactly halfway between two neighbouring binary values, or a unit of its
    45th significant digit above (``nudge`` 1) or below (-1)."""
    with localcontext() as context:
        context.prec = 2000  # a halfway point of binary values has a finite expansion
        middle = (Decimal(low) + Decimal(high)) / 2
        return middle + nudge * Decimal(10) ** (middle.adjusted() - 45)


@st.composite
def halfway_texts(draw: st.DrawFn) -> str:
    width = draw(st.sampled_from([32, 64]))
    low = draw(st.floats(min_value=0, allow_infinity=False, width=width))
    if width == 32:
        high = float(np.nextafter(np.float32(low), np.float32(math.inf)))
    else:
        high = math.nextafter(low, math.inf)
    above: float | Decimal = high
    if math.isinf(high):
        # past the largest: halfway to the next power of two (2^128, 2^1024: the overflow
        # threshold), exact, where doubling the largest double is infinite
        above = Decimal(2) ** math.frexp(low)[1]
    return _decimal_text(
        _between(low, above, draw(st.sampled_from([-1, 0, 1]))), draw(st.booleans())
    )


long_mantissas = st.builds(
    lambda digits, exponent, negative: _decimal_text(Decimal(f"{digits}e{exponent}"), negative),
    st.integers(1, 10**45),
    st.integers(-380, 330),
    st.booleans(),
)
texts = st.one_of(
    halfway_texts(),
    long_mantissas,
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)


def _nearest_float32(text: str) -> float:
    """The FLOAT32 nearest to ``text``'s exact value, ties to even (IEEE 754)."""
    sign = -1.0 if text.startswith("-") else 1.0
    magnitude = abs(Fraction(Decimal(text)))
    if magnitude == 0:
        return sign * 0.0
    if magnitude >= _FLOAT32_MAX + Fraction(2) ** (127 - 24):
        return sign * math.inf
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    quantum = Fraction(2) ** (max(exponent, -126) - 23)
    units, remainder = divmod(magnitude, quantum)
    if remainder * 2 > quantum or (remainder * 2 == quantum and units % 2 == 1):
        units += 1
    return sign * float(units * quantum)


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


@pytest.fixture(scope="module", params=["CSV", "JSON"])
def tuple_format(request: pytest.FixtureRequest, spark: Any) -> str:
    if csv_fields_function(spark, ["FLOAT64"]) is None:
        pytest.fail("streamctl's jar does not load in the test session")
    return str(request.param)


def _parsed(spark: Any, tuple_format: str, texts: list[str]) -> list[tuple[Any, ...]]:
    config = normalize_source_options("INLINE", {"data": "0", "format": tuple_format})
    spec = source("INLINE", config, "d FLOAT64", "f FLOAT32")
    if tuple_format == "CSV":
        lines = [f"{text},{text}" for text in texts]
    else:
        lines = [json.dumps({"d": 0, "f": 0}).replace("0", text) for text in texts]
    frame = spark.createDataFrame([(line,) for line in lines], "value string")
    return [tuple(row) for row in parse_lines(frame, spec).frame().collect()]


@spark_examples(6)
@given(cases=st.lists(texts, min_size=1, max_size=200))
@example(
    cases=[
        "2.4703282292062327208828439643411068618252990130716238221279284125033775363e-324",
        "1.7976931348623158079372897140530341507993413271003782693617377898044496829e+308",
        "9007199254740993",
        "1.00000005960464477539062500000000000000000000000000000001",
        "3.4028235677973366e+38",
        "-7.006492321624085354618647916449580656401309709382578858785341419448955413429e-46",
        # just below and just above halfway from the largest double to 2^1024: it, and infinity
        "1.797693134862315807937289714053034150799341327100378269361737789804449682927647e+308",
        "1.797693134862315807937289714053034150799341327100378269361737789804449682927648e+308",
    ]
)
def test_floats_are_read_correctly_rounded(spark: Any, tuple_format: str, cases: list[str]) -> None:
    for text, (double, single) in zip(cases, _parsed(spark, tuple_format, cases), strict=True):
        assert _bits(double) == _bits(float(text)), (tuple_format, text, double, float(text))
        if tuple_format == "CSV":
            expected = _nearest_float32(text)
            assert _bits(single) == _bits(expected), (tuple_format, text, single, expected)
