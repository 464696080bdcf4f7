"""Expressions built as Spark SQL text (:mod:`streamctl.spark.sql_text`) are the expressions
pyspark's ``functions`` build, checked against those, evaluated by Spark itself:

* a literal of any Python value the connectors use (integers across ``BIGINT``, doubles with
  NaN, infinities, signed zeros and subnormals, integer decimals up to 20 digits, any text:
  quotes, backslashes, control characters, escapes Spark's parser would read, ``${...}`` that
  it would substitute, any plane of Unicode) has the value and the type ``F.lit`` gives it;
* a column of any name (backticks, dots, ``#``, reserved words, ``${...}``) is that column;
* a random tree of operators (``& | ~``, comparisons, ``+ - * %``, ``CASE``, ``IS NULL``,
  ``IN``, ``between``) over nullable columns evaluates as the same tree of pyspark Columns on
  random rows: so the parenthesising keeps Python's precedence and Spark's NULL rules.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.spark import sql_text as S
from streamctl.spark.spark_types import quote_identifier

LiteralValue = str | int | float | bool | Decimal | None

literals: st.SearchStrategy[LiteralValue] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([-(2**31), 2**31 - 1, -(2**31) - 1, 2**31, -(2**63), 2**63 - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e23, 2.0**63, math.nan, math.inf, -math.inf]),
    st.integers(0, 2**64 - 1).map(Decimal),
    st.integers(-(10**19), 0).map(Decimal),
    st.text(),
    st.sampled_from(["", "'", "\\", "\\'", "\\n", "\\u0041", "\\%", "\\_", "''", "a'b\\c", "\x00"]),
    # Spark's parser substitutes ${...} in the whole text (settings, environment, system)
    st.sampled_from(["${x}", "${env:HOME}", "${system:java.version}", "${spark.app.name}", "$"]),
    st.builds("".join, st.lists(st.sampled_from(["$", "{", "}", "\\", "'", "env:HOME", "a"]))),
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)  # NaN equals NaN, -0.0 differs from 0.0
    return bool(a == b and type(a) is type(b))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(literals, min_size=1, max_size=60))
def test_a_literal_has_the_value_and_type_f_lit_gives_it(spark: Any, values: list[Any]) -> None:
    from pyspark.sql import functions as F

    # with Spark's default variable substitution on (agents' sessions turn it off): literals
    # must not depend on the setting
    spark.conf.set("spark.sql.variable.substitute", "true")
    try:
        row = spark.range(1).select(
            *(F.lit(v).alias(f"f{i}") for i, v in enumerate(values)),
            *(S.lit(v).column(f"s{i}") for i, v in enumerate(values)),
        )
        types = dict(row.dtypes)
        got = row.collect()[0]
    finally:
        spark.conf.set("spark.sql.variable.substitute", "false")
    for i, value in enumerate(values):
        assert types[f"s{i}"] == types[f"f{i}"], (value, types[f"s{i}"], types[f"f{i}"])
        assert _same(got[f"s{i}"], got[f"f{i}"]), (value, got[f"s{i}"], got[f"f{i}"])


COLUMNS = ("a", "b", "c")


@st.composite
def integer_trees(draw: Any, depth: int = 3) -> tuple[Any, Any]:
    """An integer expression as (Sql, a function building the pyspark Column)."""
    from pyspark.sql import functions as F

    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            name = draw(st.sampled_from(COLUMNS))
            return S.col(name), lambda: F.col(name)
        number = draw(st.integers(-5, 5))
        return S.lit(number), lambda: F.lit(number)
    kind = draw(st.sampled_from(["+", "-", "*", "%", "neg", "case"]))
    left, make_left = draw(integer_trees(depth - 1))
    if kind == "neg":
        return -left, lambda: -make_left()
    if kind == "%":  # by a literal that is not 0 (ANSI: x % 0 fails the query)
        divisor = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        return left % divisor, lambda: make_left() % F.lit(divisor)
    right, make_right = draw(integer_trees(depth - 1))
    if kind == "case":
        test, make_test = draw(boolean_trees(depth - 1))
        return (
            S.when(test, left).otherwise(right),
            lambda: F.when(make_test(), make_left()).otherwise(make_right()),
        )
    operators: dict[str, Any] = {
        "+": lambda x, y: x + y,
        "-": lambda x, y: x - y,
        "*": lambda x, y: x * y,
    }
    op = operators[kind]
    return op(left, right), lambda: op(make_left(), make_right())


@st.composite
def boolean_trees(draw: Any, depth: int = 3) -> tuple[Any, Any]:
    """A boolean expression as (Sql, a function building the pyspark Column)."""
    from pyspark.sql import functions as F

    kind = draw(st.sampled_from(["cmp", "null", "in", "between", "&", "|", "~", "not_null"]))
    if depth == 0 or kind in ("cmp", "null", "not_null", "in", "between"):
        left, make_left = draw(integer_trees(max(depth - 1, 0)))
        if kind == "null":
            return left.isNull(), lambda: make_left().isNull()
        if kind == "not_null":
            return left.isNotNull(), lambda: make_left().isNotNull()
        if kind == "in":
            options = draw(st.lists(st.integers(-3, 3), min_size=1, max_size=3))
            return left.isin(*options), lambda: make_left().isin(*options)
        if kind == "between":
            low, high = draw(st.integers(-3, 3)), draw(st.integers(-3, 3))
            return left.between(low, high), lambda: make_left().between(F.lit(low), F.lit(high))
        right, make_right = draw(integer_trees(max(depth - 1, 0)))
        name = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
        comparisons: dict[str, Any] = {
            "==": lambda x, y: x == y,
            "!=": lambda x, y: x != y,
            "<": lambda x, y: x < y,
            "<=": lambda x, y: x <= y,
            ">": lambda x, y: x > y,
            ">=": lambda x, y: x >= y,
        }
        compare = comparisons[name]
        return compare(left, right), lambda: compare(make_left(), make_right())
    left, make_left = draw(boolean_trees(depth - 1))
    if kind == "~":
        return ~left, lambda: ~make_left()
    right, make_right = draw(boolean_trees(depth - 1))
    if kind == "&":
        return left & right, lambda: make_left() & make_right()
    return left | right, lambda: make_left() | make_right()


nullable_ints = st.one_of(st.none(), st.integers(-4, 4))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trees=st.lists(st.one_of(integer_trees(), boolean_trees()), min_size=1, max_size=8),
    rows=st.lists(st.tuples(nullable_ints, nullable_ints, nullable_ints), min_size=1, max_size=20),
)
def test_an_operator_tree_evaluates_as_the_same_tree_of_columns(
    spark: Any, trees: list[tuple[Any, Any]], rows: list[tuple[int | None, ...]]
) -> None:
    frame = spark.createDataFrame(rows, ", ".join(f"{name} int" for name in COLUMNS))
    selected = frame.select(
        *(make().alias(f"f{i}") for i, (_, make) in enumerate(trees)),
        *(tree.column(f"s{i}") for i, (tree, _) in enumerate(trees)),
    )
    for got in selected.collect():
        for i in range(len(trees)):
            assert got[f"s{i}"] == got[f"f{i}"], (trees[i][0], got)


NAMES = ["a${x}", "${env:HOME}", "b`c", "d.e", "nes#window", "end", "select", "f g", "$", "é"]


def test_a_column_of_any_name_is_that_column(spark: Any) -> None:
    frame = spark.createDataFrame([tuple(range(len(NAMES)))], [*NAMES])
    row = S.project(frame, [S.col(name).alias(f"out {name}") for name in NAMES]).collect()[0]
    assert list(row) == list(range(len(NAMES)))


def _column(name: str) -> Any:
    """The pyspark Column of the column ``name`` (quoted: a name, never a path)."""
    from pyspark.sql import functions as F

    return F.col(quote_identifier(name))


steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), integer_trees()),
        st.tuples(st.just("keep_base"), integer_trees()),
        st.tuples(st.just("where"), boolean_trees()),
        st.tuples(st.just("union"), boolean_trees()),
        st.tuples(st.just("drop_last"), boolean_trees()),
        st.tuples(st.just("rename_last"), boolean_trees()),
        st.tuples(st.just("reorder"), boolean_trees()),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chain=steps,
    rows=st.lists(st.tuples(nullable_ints, nullable_ints, nullable_ints), min_size=1, max_size=20),
    group_by=st.one_of(st.none(), integer_trees()),
)
def test_a_relation_is_its_steps_applied_as_dataframe_calls(
    spark: Any,
    chain: list[tuple[str, tuple[Any, Any]]],
    rows: list[tuple[int | None, ...]],
    group_by: tuple[Any, Any] | None,
) -> None:
    """Projections, filters, renamings and unions kept as one query's text
    (:class:`S.Relation`, its steps merged into few ``SELECT`` blocks) give the rows, the
    columns and their names that the same steps give as pyspark Column calls, for any column
    names, and so do the steps applied one by one (as on Spark Connect); the temporary views
    it queries are gone afterwards."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(rows, ", ".join(f"{name} int" for name in COLUMNS))
    relation, expected = S.Relation(frame), frame
    for index, (kind, (tree, make)) in enumerate(chain):
        name = f"{NAMES[index % len(NAMES)]} {index}"
        if kind == "where":
            relation, expected = relation.where(tree), expected.where(make())
        elif kind == "union":  # the rows so far, and the base's rows where the tree holds
            other = S.project(S.Relation(frame).where(tree), [S.col(c) for c in COLUMNS])
            padding = [S.lit(0).alias(c) for c in relation.columns[len(COLUMNS) :]]
            other = S.project(other, [*(S.col(c) for c in COLUMNS), *padding])
            relation = relation.union_all(other)
            padded = frame.where(make()).select(
                *COLUMNS, *(F.lit(0).alias(c) for c in expected.columns[len(COLUMNS) :])
            )
            expected = expected.union(padded)
        elif kind == "drop_last":
            if len(relation.columns) == len(COLUMNS):
                continue  # the base's columns stay: the trees read them
            relation = relation.drop(relation.columns[-1])
            expected = expected.drop(expected.columns[-1])
        elif kind == "rename_last":  # a projection of bare columns, one of them renamed
            if len(relation.columns) == len(COLUMNS):
                continue
            *kept, last = relation.columns
            relation = S.project(relation, [*map(S.col, kept), S.col(last).alias(name)])
            expected = expected.select(
                *map(_column, kept), F.col(quote_identifier(last)).alias(name)
            )
        elif kind == "reorder":  # the same columns, the last one added first of those added
            added = relation.columns[len(COLUMNS) :]
            if not added:
                continue
            order = [*COLUMNS, added[-1], *added[:-1]]
            relation = S.project(relation, [S.col(c) for c in order])
            expected = expected.select(*map(_column, order))
        elif kind == "add":
            relation = S.project(relation, ["*", tree.alias(name)])
            expected = expected.select("*", make().alias(name))
        else:
            relation = S.project(relation, [*(S.col(c) for c in COLUMNS), tree.alias(name)])
            expected = expected.select(*COLUMNS, make().alias(name))
    if group_by is not None:  # last: the groups' rows have none of the base's columns
        tree, make = group_by
        totals = [S.call("count", 1).alias("n"), S.call("sum", S.col("a")).alias("s a")]
        relation = relation.aggregate([(tree, "k ${x}")], totals)
        expected = expected.groupBy(make().alias("k ${x}")).agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col("a")).alias("s a")
        )
        # filtered and projected after: a HAVING and a projection of the groups
        relation = relation.where(S.col("n") > 1)
        relation = S.project(relation, [S.col("n").alias("m"), S.col("k ${x}")])
        expected = expected.where(F.col("n") > 1).select(F.col("n").alias("m"), "k ${x}")
    got, applied = relation.frame(), relation._applied()
    assert got.columns == applied.columns == expected.columns == relation.columns
    want = sorted((tuple(row) for row in expected.collect()), key=repr)
    assert sorted((tuple(row) for row in got.collect()), key=repr) == want
    assert sorted((tuple(row) for row in applied.collect()), key=repr) == want
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("streamctl_relation")]


@pytest.mark.quick
def test_steps_spark_would_merge_are_one_select_block() -> None:
    """Filters and projections over columns passed through, and selections and renamings of
    named items, join the block below (no subquery per step); computed items, groups, a
    watermark and a union nest it."""
    from streamctl.spark.relation_blocks import STAR, Item, Step, query_text

    def text(*steps: Step) -> str:
        return query_text("v", ("a", "b"), steps, iter(range(100)), lambda other: "")

    bare = (Item("`a`", "a", "a"), Item("`b`", "b", "b"))
    flat = text(
        Step("where", ("c1",), columns=("a", "b")),
        Step("project", items=bare, columns=("a", "b")),
        Step("where", ("c2",), columns=("a", "b")),
        Step("project", items=(STAR, Item("f(`a`)", "x")), columns=("a", "b", "x")),
        Step("project", items=(Item("`x`", "y", "x"), Item("`a`", "a", "a")), columns=("y", "a")),
    )
    assert flat == "SELECT f(`a`) AS `y`, `a` FROM `v` AS `_s0` WHERE (c1) AND (c2)"
    computed = Item("f(`a`)", "a")
    nested = text(
        Step("project", items=(computed, Item("`b`", "b", "b")), columns=("a", "b")),
        Step("where", ("c",), columns=("a", "b")),
    )
    assert nested == (
        "SELECT * FROM (SELECT f(`a`) AS `a`, `b` FROM `v` AS `_s0`) AS `_s1` WHERE (c)"
    )
    # a column taken twice would compute its expression twice: nested
    twice = text(
        Step("project", items=(computed,), columns=("a",)),
        Step("project", items=(Item("`a`", "a", "a"), Item("`a`", "b", "a")), columns=("a", "b")),
    )
    assert twice.count("SELECT") == 2
    # names equal ignoring case below: a name would resolve to another column there
    ambiguous = query_text(
        "v",
        ("a", "A"),
        (
            Step("project", items=(Item("`a`", "a", "a"),), columns=("a",)),
            Step("where", ("(`a` > 0)",), columns=("a",)),
        ),
        iter(range(100)),
        lambda other: "",
    )
    assert ambiguous.count("SELECT") == 2
