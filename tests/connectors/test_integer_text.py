"""Number fields are parsed as NES states it (:mod:`streamctl.spark.tuples`, "Parsing"): after
trimming white space (space, tab, line feed, vertical tab, form feed, carriage return), an
integer must be ``-?[0-9]+`` (unsigned types: no sign) and lie within the column's NES type; a
float must be ``12``, ``-1.5``, ``1e3``, ``.5``, ``inf``, ``infinity`` or ``nan`` (any case);
anything else is malformed. Checked against those rules written in plain Python, for every
integer type and both float types, over generated texts: leading zeros, signs (``+`` is not NES
syntax), values at and past each type's bounds, past 64 bits, past 20 digits, blanks inside
and around, other characters around (control characters, no-break and line separators, which
are no NES white space), decimal points, exponents, Java's and C's other float forms
(``1d``, ``0x1p3``).

The parse is done through the source's own column expressions on the untrimmed field text, as a
CSV source hands it over (``field_rules.field_text`` then ``field_rules.candidate_value``), on
a batch DataFrame: a value where the rule gives one, NULL where the text is malformed (the
source turns that NULL into the query's failure, which ``test_formats_roundtrip`` checks end
to end).
"""

from __future__ import annotations

import math
import re
import struct
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.nes_types import INTEGER_TYPES, UNSIGNED_TYPES, integer_range
from streamctl.spark import sql_text as S
from streamctl.spark.field_rules import candidate_value, decimal_length, field_text

TYPES = sorted(INTEGER_TYPES)
NES_BLANKS = " \t\n\v\f\r"


def nes_integer(text: str, nes_type: str) -> int | None:
    """The rule, independently: the value, or None for a malformed text."""
    text = text.strip(NES_BLANKS)
    pattern = r"[0-9]+" if nes_type in UNSIGNED_TYPES else r"-?[0-9]+"
    if re.fullmatch(pattern, text, flags=re.ASCII) is None:
        return None
    low, high = integer_range(nes_type)
    value = int(text)
    return value if low <= value <= high else None


def bound_texts(nes_type: str) -> st.SearchStrategy[str]:
    low, high = integer_range(nes_type)
    near = st.sampled_from([low - 1, low, low + 1, high - 1, high, high + 1, 0, 2**63, 2**64])
    return surrounded(near.map(str))


digits = st.text(st.sampled_from("0123456789"), min_size=1, max_size=25)
# white space NES trims, and characters around a number that it does not
around = st.text(st.sampled_from(NES_BLANKS + "\x00\x01\x1f\x7f\u00a0\u0085\u2028"), max_size=3)


def surrounded(core: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(core, st.builds(lambda a, c, b: a + c + b, around, core, around))


texts = surrounded(
    st.one_of(
        digits,
        digits.map(lambda d: "-" + d),
        digits.map(lambda d: "+" + d),
        digits.map(lambda d: "000" + d),
        st.builds(
            lambda a, b, sep: a + sep + b, digits, digits, st.sampled_from([".", "e", " ", "_"])
        ),
        st.text(st.sampled_from("0123456789-+ .eE"), max_size=6),
    )
)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cases=st.lists(
        st.sampled_from(TYPES).flatmap(
            lambda t: st.tuples(st.just(t), st.one_of(texts, bound_texts(t)))
        ),
        min_size=1,
        max_size=200,
    )
)
def test_integer_texts_parse_as_nes_states(spark: Any, cases: list[tuple[str, str]]) -> None:

    frame = spark.createDataFrame([(text,) for _, text in cases], "text string")
    parsed = frame.select(
        *(_parse(S.col("text"), nes_type).column(f"v{i}") for i, nes_type in enumerate(TYPES))
    ).collect()
    for row, (_, text) in zip(parsed, cases, strict=True):
        for i, nes_type in enumerate(TYPES):
            got = row[f"v{i}"]
            assert (None if got is None else int(got)) == nes_integer(text, nes_type), (
                nes_type,
                text,
            )


DECIMAL_LENGTH_BOUNDS = sorted(
    {
        n
        for k in range(20)
        for n in (10**k - 1, 10**k, 10**k + 1, 1 - 10**k, -(10**k), -(10**k) - 1)
        if -(2**63) <= n < 2**63
    }
    | {-(2**63), -(2**63) + 1, 2**63 - 1}
)
"""Every power of ten and its neighbours, both signs, and BIGINT's bounds."""


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(numbers=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300))
def test_decimal_length_is_the_length_of_the_number_written_out(
    spark: Any, numbers: list[int]
) -> None:
    """The integer shortcut's length of a BIGINT's decimal form (``decimal_length``) against
    Python's ``str``: at every bound of a length (:data:`DECIMAL_LENGTH_BOUNDS`) and at random."""
    numbers = DECIMAL_LENGTH_BOUNDS + numbers
    frame = spark.createDataFrame([(n,) for n in numbers], "n bigint")
    lengths = frame.select(decimal_length(S.col("n")).column("length")).collect()
    assert [row["length"] for row in lengths] == [len(str(n)) for n in numbers]


def _parse(field: S.Sql, nes_type: str) -> S.Sql:
    """The source's candidate value of an untrimmed CSV field (NULL: malformed)."""
    column = {"name": "a", "type": nes_type, "nullable": True}
    return candidate_value(field_text(field, column, csv=True, quoted=True), column)


def nes_float(text: str) -> float | None:
    """The float rule, independently: the value (Python's correctly rounded parse), or None."""
    text = text.strip(NES_BLANKS)
    pattern = r"-?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?|inf|infinity|nan)"
    if re.fullmatch(pattern, text, flags=re.ASCII | re.IGNORECASE) is None:
        return None
    return float(text)


def _float32_bits(value: float) -> int:
    bits: int = struct.unpack("<I", struct.pack("<f", value))[0]
    return bits


def _float32(bits: int) -> float:
    value: float = struct.unpack("<f", struct.pack("<I", bits))[0]
    return value


MAX_FLOAT32 = _float32(0x7F7FFFFF)


def nearest_float32(text: str, double: float) -> float:
    """The single-precision float nearest to the decimal ``text`` (ties to even), found with
    exact fractions among the neighbours of its double; infinite past the largest float's half
    unit above."""
    if not math.isfinite(double):
        return double
    exact = Fraction(text.lower())
    magnitude = abs(exact)
    sign = -1.0 if text.startswith("-") else 1.0
    half_past_max = Fraction(MAX_FLOAT32) + Fraction(2) ** 103  # half a unit in the last place
    if magnitude >= half_past_max:
        return sign * math.inf
    near = _float32_bits(min(abs(double), MAX_FLOAT32))
    candidates = [bits for bits in (near - 1, near, near + 1) if 0 <= bits <= 0x7F7FFFFF]
    best = min(candidates, key=lambda bits: (abs(Fraction(_float32(bits)) - magnitude), bits % 2))
    return sign * _float32(best)


ODD_FLOAT_TEXTS = [
    "inf", "-Infinity", "NaN", "-nan", "INF", "+1", "1d", "1f", "0x1p3", "1e", "e3", ".", "-",
    ".5", "5.", "-.5e-3", "1E+2", "infinit", "nana", "1_0", "1 0", "\u0661",  # an Arabic-Indic 1
    # a digit, "-" or "." first and a digit last (the cast alone decides those): Java's hex
    # floats, and texts Java refuses
    "0X1P3", "0x1.8p1", "-0x1p-2", "1a2", "1-2", "5e5e5", "-5.e3", "1.5e+05", "1e400", "-1e-400",
    "00012.5", "..5", "-.", "1.2.3", "1e5.5", "\u0661.5", "1\u0661",
]  # fmt: skip
float_cores = st.one_of(
    st.floats().map(repr),
    st.floats().map(lambda f: f"{f:.17e}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:.3f}"),
    st.sampled_from(ODD_FLOAT_TEXTS),
    st.text(st.sampled_from("0123456789-+.eEinfINFaAxXpd"), max_size=6),
)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(surrounded(float_cores), min_size=1, max_size=200),
    nes_type=st.sampled_from(["FLOAT32", "FLOAT64"]),
)
def test_float_texts_parse_as_nes_states(spark: Any, texts: list[str], nes_type: str) -> None:
    texts = [*texts, *ODD_FLOAT_TEXTS]  # every run checks each of them, bare

    frame = spark.createDataFrame([(text,) for text in texts], "text string")
    parsed = frame.select(_parse(S.col("text"), nes_type).column("v")).collect()
    for row, text in zip(parsed, texts, strict=True):
        expected = nes_float(text)
        if expected is not None and nes_type == "FLOAT32":
            expected = nearest_float32(text.strip(NES_BLANKS), expected)
        got = row["v"]
        if expected is None or got is None:
            assert got is expected, (nes_type, text, got)
        elif math.isnan(expected):
            assert math.isnan(got), (nes_type, text, got)
        else:
            assert got == expected, (nes_type, text, got, expected)
