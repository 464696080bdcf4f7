"""A join's window naming each input's event-time column, ``TUMBLING(ts1, ts2, SIZE ...)`` (and
``SLIDING``), as newer NebulaStream grammars write it.

Property (metamorphic, on the reference engine): joining ``l(ts, ...)`` with ``r(ts2, ...)`` in
a window over ``ts, ts2`` gives the rows of the same join where the right input's time column
is called ``ts`` too and the window names one column, which is the form ``query_api.md``
defines; generated rows, NULL keys and values included. A window over one input that names
two columns is refused with a message naming the problem."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol.messages import ColumnSpec
from streamctl.reference import run_reference

LEFT = [ColumnSpec("ts", "UINT64", False), ColumnSpec("id", "INT32"), ColumnSpec("v", "INT32")]


def _right(time_name: str) -> list[ColumnSpec]:
    return [
        ColumnSpec(time_name, "UINT64", False),
        ColumnSpec("id2", "INT32"),
        ColumnSpec("v2", "INT32"),
    ]


def _rows(
    text: str, right_time: str, left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    catalog = MemoryCatalog({"l": LEFT, "r": _right(right_time)})
    return run_reference(bind_query(parse_query(text), catalog).plan, {"l": left, "r": right})


side_rows = st.lists(
    st.tuples(st.integers(0, 60), st.none() | st.integers(0, 3), st.none() | st.integers(-5, 5)),
    max_size=12,
)
windows = st.sampled_from(["TUMBLING({}, SIZE 10 MS)", "SLIDING({}, SIZE 20 MS, ADVANCE BY 10 MS)"])


@settings(max_examples=40, deadline=None)
@given(side_rows, side_rows, windows)
def test_two_time_columns_join_as_one_column_of_the_same_name(
    left: list[tuple[Any, ...]], right: list[tuple[Any, ...]], window: str
) -> None:
    query = "SELECT * FROM l INNER JOIN r ON id = id2 WINDOW {} INTO File()"
    named_each = _rows(query.format(window.format("ts, ts2")), "ts2", left, right)
    named_once = _rows(query.format(window.format("ts")), "ts", left, right)
    assert named_each == named_once


@pytest.mark.quick
@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        # The second name is looked up in the right input (V is the left input's).
        (
            "SELECT * FROM l INNER JOIN r ON id = id2 WINDOW TUMBLING(ts, v, SIZE 1 SEC) "
            "INTO File()",
            "V",
        ),
        (
            "SELECT start, end, COUNT(v) AS n FROM l WINDOW TUMBLING(ts, ts, SIZE 1 SEC) "
            "INTO File()",
            "two are for a join",
        ),
    ],
)
def test_a_second_time_column_is_refused_where_it_does_not_fit(
    statement: str, refusal: str
) -> None:
    with pytest.raises(PlannerError) as refused:
        _rows(statement, "ts2", [], [])
    assert refusal in str(refused.value)
