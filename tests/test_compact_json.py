"""``streamctl.compact_json.loads`` reads JSON exactly as the standard library's ``json.loads``
does, on whatever text it is given: integers of any size stay integers (orjson alone would
read one beyond 64 bits as a float), NaN and infinities are read, and text that is no JSON is
refused by both."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.compact_json import dumps_bytes, loads

pytestmark = pytest.mark.quick

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**17, max_value=10**40),  # around 19 digits, both signs below
    st.integers(min_value=-(10**40), max_value=-(10**17)),
    st.floats(),
    st.text(alphabet=st.sampled_from('0123456789"\\ab é\x00'), max_size=30),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and an integer never equal to a float."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=400, deadline=None)
@given(document=documents)
def test_a_document_reads_back_as_the_standard_library_reads_it(document: Any) -> None:
    text = json.dumps(document)  # NaN and Infinity as the standard library writes them
    assert same(loads(text.encode()), json.loads(text))
    assert same(loads(text), json.loads(text))


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.sampled_from('0123456789[]{},:"-.eE truefalsn\\'), max_size=40))
def test_any_text_is_read_or_refused_as_the_standard_library_does(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except ValueError:
        expected = ValueError
    try:
        got: Any = loads(text)
    except ValueError:
        got = ValueError
    assert got is expected if expected is ValueError else same(got, expected)


def test_a_long_integer_after_written_ones_stays_exact() -> None:
    big = 2**64 + 1
    assert loads(dumps_bytes([1, "x" * 19, big])) == [1, "x" * 19, big]
    assert loads(b"[" + b"9" * 18 + b"]") == [10**18 - 1]


def test_what_is_neither_text_nor_bytes_is_refused_as_the_standard_library_does() -> None:
    for value in (0, 1.5, None, [b"1"]):
        with pytest.raises(TypeError):
            json.loads(value)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            loads(value)  # type: ignore[arg-type]
    assert loads(bytearray(b"[1]")) == loads(memoryview(b"[1]")) == [1]
