"""``x [NOT] BETWEEN low AND high`` and ``x [NOT] IN (a, b, ...)``, the predicates of newer
NebulaStream grammars, against SQL's own definition of them.

The parser writes them as comparisons (``x >= low AND x <= high``; ``x = a OR x = b``); the
property runs the bound plan on the reference engine (DuckDB, over our translation) and the
same predicate written natively in DuckDB's SQL, whose BETWEEN and IN follow the standard
(three-valued logic: a NULL operand makes the predicate NULL unless the other terms decide
it), on the same generated rows, NULLs and extreme values included."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.error_codes import SYNTAX_ERROR
from streamctl.limits import MAX_IN_LIST_VALUES
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol.messages import ColumnSpec
from streamctl.reference import run_reference

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SOURCE = [("ts", "UINT64", False), ("x", "INT32", True), ("a", "INT32", True), ("b", "INT32", True)]

values = st.one_of(
    st.none(),
    st.integers(INT32_MIN, INT32_MAX),
    st.integers(-3, 3),  # small values, so that rows meet their bounds and each other
    st.sampled_from([INT32_MIN, INT32_MAX]),
)
rows = st.lists(st.tuples(values, values, values), max_size=25).map(
    lambda triples: [(ts, *triple) for ts, triple in enumerate(triples)]
)


def _ours(predicate: str, data: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    catalog = MemoryCatalog({"s": [ColumnSpec(*column) for column in SOURCE]})
    statement = parse_query(f"SELECT ts FROM s WHERE {predicate} INTO File()")
    return run_reference(bind_query(statement, catalog).plan, {"s": data})


def _standard(predicate: str, data: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    connection = duckdb.connect(":memory:")
    try:
        connection.execute("CREATE TABLE s (ts UBIGINT, x INTEGER, a INTEGER, b INTEGER)")
        if data:
            connection.executemany("INSERT INTO s VALUES (?, ?, ?, ?)", data)
        return connection.execute(f"SELECT ts FROM s WHERE {predicate} ORDER BY ts").fetchall()
    finally:
        connection.close()


def _typed(value: int) -> str:
    return f"INT32({value})"


@settings(max_examples=60, deadline=None)
@given(rows, st.booleans())
def test_between_is_sqls_between(data: list[tuple[Any, ...]], negated: bool) -> None:
    predicate = f"x {'NOT ' if negated else ''}BETWEEN a AND b"
    assert _ours(predicate, data) == _standard(predicate, data)


@settings(max_examples=60, deadline=None)
@given(
    rows,
    st.booleans(),
    st.lists(st.integers(-3, 3) | st.sampled_from([INT32_MIN, INT32_MAX]), min_size=1, max_size=4),
    st.booleans(),
)
def test_in_is_sqls_in(
    data: list[tuple[Any, ...]], negated: bool, constants: list[int], with_column: bool
) -> None:
    # A list of constants, and one that also names a (nullable) column.
    ours_list = ", ".join([_typed(c) for c in constants] + (["a"] if with_column else []))
    standard_list = ", ".join([str(c) for c in constants] + (["a"] if with_column else []))
    keyword = "NOT IN" if negated else "IN"
    assert _ours(f"x {keyword} ({ours_list})", data) == _standard(
        f"x {keyword} ({standard_list})", data
    )


@pytest.mark.quick
def test_between_binds_tighter_than_and() -> None:
    """The AND of BETWEEN belongs to it; a following AND is the query's."""
    data = [(0, 1, 0, 2), (1, 5, 0, 2), (2, 1, None, 2)]
    predicate = "x BETWEEN a AND b AND x > INT32(0)"
    assert _ours(predicate, data) == _standard(predicate.replace("INT32(0)", "0"), data)


@pytest.mark.quick
def test_a_long_in_list_binds_and_matches_its_members() -> None:
    """The ORs of an IN list form a balanced tree: as a chain, 350 members passed the parser
    and hit the binder's recursion ("nested too deeply")."""
    members = range(0, 3000, 3)
    data = [(ts, value, None, None) for ts, value in enumerate([-1, 0, 1, 3, 2997, 2998, 3000])]
    listed = ", ".join(_typed(member) for member in members)
    assert _ours(f"x IN ({listed})", data) == _standard(
        f"x IN ({', '.join(map(str, members))})", data
    )


@pytest.mark.quick
def test_an_in_list_past_its_limit_is_refused_when_parsed() -> None:
    """12,000 values took the agent's Spark down while it planned the query."""
    values = ", ".join(str(n) for n in range(MAX_IN_LIST_VALUES + 1))
    with pytest.raises(PlannerError) as refused:
        parse_query(f"SELECT * FROM src WHERE a IN ({values}) INTO out")
    assert refused.value.code == SYNTAX_ERROR
    assert str(MAX_IN_LIST_VALUES) in str(refused.value)
