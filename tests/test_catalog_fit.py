"""``check_rows_fit`` (:mod:`streamctl.catalog.fit`) refuses exactly the values a column cannot
hold, checked against the rules written out here independently: ``Integer`` 32 bits,
``BigInteger`` 64 bits, ``String(n)`` at most ``n`` characters, text without NUL characters or
lone surrogates, floats finite; booleans, JSON and keys that name no column take anything. Rows
come in several shapes in one call (keys left out, in another order, a bind prefix), as a pass
writes them."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import JSON, BigInteger, Boolean, Column, Float, Integer, MetaData, String, Table

from streamctl.catalog.fit import ValueDoesNotFit, check_rows_fit

TABLE = Table(
    "fit_probe",
    MetaData(),
    Column("small", Integer),
    Column("big", BigInteger),
    Column("ratio", Float),
    Column("name", String(8)),
    Column("note", String),
    Column("flag", Boolean),
    Column("doc", JSON),
)


def refusal(column: str, value: Any) -> bool:
    """Whether ``column`` cannot hold ``value``, by the rules in the module docstring."""
    if value is None or column not in TABLE.c:
        return False
    if column in ("small", "big") and isinstance(value, int) and not isinstance(value, bool):
        bits = 32 if column == "small" else 64
        return not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    if column == "ratio" and isinstance(value, float):
        return not math.isfinite(value)
    if column in ("name", "note") and isinstance(value, str):
        if column == "name" and len(value) > 8:
            return True
        return "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    return False


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["ok", "a\x00b", "\ud800", "x" * 9, "é" * 8]),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
keys = st.sampled_from(["small", "big", "ratio", "name", "note", "flag", "doc", "other"])
rows = st.lists(st.dictionaries(keys, values, max_size=8), max_size=20)


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(rows=rows, prefix=st.sampled_from(["", "v_"]))
def test_a_row_is_refused_exactly_where_a_value_does_not_fit(
    rows: list[dict[str, Any]], prefix: str
) -> None:
    bound = [{prefix + key: value for key, value in row.items()} for row in rows]
    expected = [(key, value) for row in rows for key, value in row.items() if refusal(key, value)]
    if not expected:
        check_rows_fit(TABLE, bound, prefix=prefix)
        return
    with pytest.raises(ValueDoesNotFit) as refused:
        check_rows_fit(TABLE, bound, prefix=prefix)
    assert refused.value.column == expected[0][0]  # the first value that does not fit


@st.composite
def rows_of_one_shape(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows that all have the same keys, as a pass writes them in bulk (checked a column at a
    time first): mostly values that fit, now and then one that does not."""
    shape = draw(st.lists(keys, unique=True, max_size=8))
    fitting = st.one_of(
        st.none(),
        st.integers(-(2**31), 2**31 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([1e308, -1e308]),  # their sum overflows though each fits
        st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=8).filter(
            lambda text: "\x00" not in text
        ),
    )
    cell = st.one_of(fitting, fitting, fitting, values)
    return draw(st.lists(st.fixed_dictionaries({key: cell for key in shape}), max_size=20))


@settings(max_examples=500, deadline=None)
@given(rows=rows_of_one_shape(), prefix=st.sampled_from(["", "v_"]))
def test_rows_of_one_shape_are_refused_exactly_where_a_value_does_not_fit(
    rows: list[dict[str, Any]], prefix: str
) -> None:
    test_a_row_is_refused_exactly_where_a_value_does_not_fit.hypothesis.inner_test(rows, prefix)
