"""Window sizes, slides and lateness from anyone: bound within what Spark can run, or refused
``INVALID_STATEMENT`` when the statement is made, never accepted to fail on the agent.

Seen before: ``SIZE 99999999999999999999 DAYS`` was accepted and failed only when the query
started (an interval Spark cannot parse), and ``SLIDING(ts, SIZE 1000 DAYS, ADVANCE BY 1 MS)``
(86.4e9 windows per row) took the agent's Spark down with every other query on it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.error_codes import INVALID_STATEMENT
from streamctl.limits import MAX_WINDOW_MILLIS, MAX_WINDOWS_PER_ROW
from streamctl.planner import plan as ir
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick

SOURCE = [m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("ts", "UINT64", False)]
SINK = [
    m.ColumnSpec("start", "UINT64", False),
    m.ColumnSpec("end", "UINT64", False),
    m.ColumnSpec("id", "UINT64", False),
    m.ColumnSpec("c", "UINT64", False),
]
CATALOG = MemoryCatalog({"w": SOURCE}, [SinkInfo("ws", SINK, "VOID", {})])
UNITS = {"MS": 1, "SEC": 1000, "MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000}
AMOUNTS = st.one_of(st.integers(1, 10_000), st.integers(1, 10**22))


def _windows(plan: object) -> list[ir.Window]:
    found: list[ir.Window] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Window):
            found.append(node)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        elif hasattr(node, "__dataclass_fields__"):
            stack.extend(getattr(node, name) for name in node.__dataclass_fields__)
    return found


@settings(max_examples=300, deadline=None)
@given(
    size=st.tuples(AMOUNTS, st.sampled_from(sorted(UNITS))),
    slide=st.one_of(st.none(), st.tuples(AMOUNTS, st.sampled_from(sorted(UNITS)))),
)
def test_a_window_is_bound_within_bounds_or_refused(
    size: tuple[int, str], slide: tuple[int, str] | None
) -> None:
    window = f"SIZE {size[0]} {size[1]}"
    kind = "TUMBLING" if slide is None else "SLIDING"
    if slide is not None:
        window += f", ADVANCE BY {slide[0]} {slide[1]}"
    statement = (
        f"SELECT start, end, id, COUNT(ts) AS c FROM w GROUP BY id "
        f"WINDOW {kind}(ts, {window}) INTO ws"
    )
    size_ms = size[0] * UNITS[size[1]]
    slide_ms = size_ms if slide is None else slide[0] * UNITS[slide[1]]
    try:
        bound = bind_query(parse_query(statement), CATALOG)
    except PlannerError as error:
        assert error.code == INVALID_STATEMENT, error
        assert max(size_ms, slide_ms) > MAX_WINDOW_MILLIS or -(-size_ms // slide_ms) > (
            MAX_WINDOWS_PER_ROW
        ), error
        return
    assert max(size_ms, slide_ms) <= MAX_WINDOW_MILLIS
    assert -(-size_ms // slide_ms) <= MAX_WINDOWS_PER_ROW
    assert _windows(bound.plan), bound.plan
