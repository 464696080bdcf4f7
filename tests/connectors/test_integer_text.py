"""Integer fields are parsed as NES states it (:mod:`streamctl.spark.tuples`, "Parsing"): after
trimming, the text must be ``-?[0-9]+`` (unsigned types: no sign) and lie within the column's
NES type; anything else is malformed. Checked against that rule written in plain Python, for
every integer type, over generated texts: leading zeros, signs (``+`` is not NES syntax),
values at and past each type's bounds, past 64 bits, past 20 digits, blanks inside, decimal
points and exponents.

The parse is done through the source's own column expressions (``_integer``) on a batch
DataFrame: a value where the rule gives one, NULL where the text is malformed (the source turns
that NULL into the query's failure, which ``test_formats_roundtrip`` checks end to end).
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.nes_types import INTEGER_TYPES, UNSIGNED_TYPES, integer_range
from streamctl.spark.tuples import _integer

TYPES = sorted(INTEGER_TYPES)


def nes_integer(text: str, nes_type: str) -> int | None:
    """The rule, independently: the value, or None for a malformed text."""
    pattern = r"[0-9]+" if nes_type in UNSIGNED_TYPES else r"-?[0-9]+"
    if re.fullmatch(pattern, text, flags=re.ASCII) is None:
        return None
    low, high = integer_range(nes_type)
    value = int(text)
    return value if low <= value <= high else None


def bound_texts(nes_type: str) -> st.SearchStrategy[str]:
    low, high = integer_range(nes_type)
    near = st.sampled_from([low - 1, low, low + 1, high - 1, high, high + 1, 0, 2**63, 2**64])
    return near.map(str)


digits = st.text(st.sampled_from("0123456789"), min_size=1, max_size=25)
texts = st.one_of(
    digits,
    digits.map(lambda d: "-" + d),
    digits.map(lambda d: "+" + d),
    digits.map(lambda d: "000" + d),
    st.builds(lambda a, b, sep: a + sep + b, digits, digits, st.sampled_from([".", "e", " ", "_"])),
    st.text(st.sampled_from("0123456789-+ .eE"), max_size=6),
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
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(text,) for _, text in cases], "text string")
    parsed = frame.select(
        *(_integer(F.col("text"), nes_type).alias(f"v{i}") for i, nes_type in enumerate(TYPES))
    ).collect()
    for row, (_, text) in zip(parsed, cases, strict=True):
        for i, nes_type in enumerate(TYPES):
            got = row[f"v{i}"]
            assert (None if got is None else int(got)) == nes_integer(text, nes_type), (
                nes_type,
                text,
            )
