"""The decoder's bound check (:func:`streamctl.domain.decode._out_of_bounds`) against a plain
reference written from its documented rules, on generated bodies.

The rules (``decode``'s docstrings and :mod:`streamctl.catalog.fit`): an object's keys are
strings that can be stored as text; a text value holds no NUL and no lone surrogate; an
integer is within 64 bits (32 for ``capacity``, ``load`` and ``count``); a float is finite
(and within 32 bits for those fields); nothing nests deeper than ``MAX_NESTING_DEPTH``. A
dataclass (a typed message, a schema's ``ColumnSpec``) is judged as the object its fields
make. The first refusal in field order names the value's place (``Kind.field[2].key``).

The checker walks thousands of bodies per pass and is written for speed; the reference here
is written for reading, so the two are independent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.domain.decode import NARROW_INTEGER_FIELDS, _out_of_bounds
from streamctl.limits import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_NESTING_DEPTH,
)
from streamctl.protocol import messages as m


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "it contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "it contains a lone surrogate, which is not valid Unicode text"
    return None


def _scalar(value: Any, leaf: str) -> str | None:
    narrow = leaf in NARROW_INTEGER_FIELDS
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        low, high = (INT32_MIN, INT32_MAX) if narrow else (INT64_MIN, INT64_MAX)
        return None if low <= value <= high else f" is {value}, outside the range {low} to {high}"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f" is {value}, not a finite number"
        if narrow and not INT32_MIN <= value <= INT32_MAX:
            return f" is {value}, outside the range {INT32_MIN} to {INT32_MAX}"
        return None
    if isinstance(value, str):
        problem = _text_problem(value)
        return None if problem is None else f": {problem}"
    return None


def _container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple) or dataclasses.is_dataclass(value)


def reference(value: Any, where: str, depth: int) -> str | None:
    if depth > MAX_NESTING_DEPTH:
        return f"{where} nests deeper than {MAX_NESTING_DEPTH} levels"
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key that is not a string"
            problem = _text_problem(key)
            if problem is not None:
                return f"{where} has a key that cannot be stored: {problem}"
            found = _member(item, f"{where}.{key[:64]}", key, depth)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _member(item, f"{where}[{index}]", "", depth)  # items are never narrow
            if found is not None:
                return found
        return None
    refusal = _scalar(value, where.rsplit(".", 1)[-1])
    return None if refusal is None else where + refusal


def _member(item: Any, place: str, leaf: str, depth: int) -> str | None:
    if depth < MAX_NESTING_DEPTH and not _container(item):
        refusal = _scalar(item, leaf)
        return None if refusal is None else place + refusal
    return reference(item, place, depth + 1)


TEXT = st.one_of(
    st.text(max_size=8),
    st.text(alphabet=st.sampled_from("ab\x00\ud800\udfff\t\u00e9"), max_size=6),
)
KEYS = st.one_of(TEXT, st.sampled_from(sorted(NARROW_INTEGER_FIELDS)), st.integers(-3, 3))
NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from(
        [INT64_MAX, INT64_MAX + 1, INT64_MIN, INT64_MIN - 1, INT32_MAX, INT32_MAX + 1, INT32_MIN]
    ),
    st.floats(),
    st.sampled_from([1e300, -1e300, float(INT32_MAX) + 1]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
COLUMNS = st.builds(m.ColumnSpec, TEXT, TEXT, st.booleans())


def _nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(KEYS, children, max_size=4),
    )


VALUES = st.recursive(st.one_of(SCALARS, COLUMNS), _nested, max_leaves=30)


def _deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"count": value}
    return value


@settings(max_examples=2000, deadline=None)
@given(VALUES, st.sampled_from(["", "capacity", "name"]))
def test_the_bound_check_agrees_with_the_reference(value, field):
    where = f"RegisterWorker.{field}" if field else "RegisterWorker"
    assert _out_of_bounds(value, where, 0) == reference(value, where, 0)


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(
    st.integers(MAX_NESTING_DEPTH - 3, MAX_NESTING_DEPTH + 3),
    st.one_of(SCALARS, COLUMNS),
)
def test_the_bound_check_agrees_at_the_nesting_limit(depth, leaf):
    value = _deep(depth, leaf)
    assert _out_of_bounds(value, "RegisterWorker", 0) == reference(value, "RegisterWorker", 0)


@pytest.mark.quick
@settings(max_examples=500, deadline=None)
@given(
    st.lists(COLUMNS, max_size=5),
    st.one_of(TEXT, st.integers(), st.floats()),
)
def test_typed_messages_are_judged_by_their_fields(schema, capacity):
    """Messages built directly (no validation: any value in any field), so the checker
    meets fields of unexpected types too."""
    messages = [
        m.CreateLogicalSource("s", schema),
        m.RegisterWorker("w", capacity=capacity),  # type: ignore[arg-type]
    ]
    for message in messages:
        assert _out_of_bounds(message, message.kind, 0) == reference(message, message.kind, 0)
