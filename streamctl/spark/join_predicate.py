"""A window join's predicate (``ON ...``) as the Spark join runs it.

:func:`join_predicate` splits the predicate into its conjuncts (``a AND b AND ...``) and
makes of them:

* **Join keys**: each equality ``l = r`` between a value of each side, both of one type,
  becomes a pair of columns, one computed on each side before the join
  (:meth:`JoinPredicate.key_columns`), compared by :meth:`JoinPredicate.keys_equal`. Spark
  takes such equalities as the join's keys: rows are partitioned and kept in the join's state
  by them, and compared by their bytes. The columns hold a form of the value that Spark's
  equality compares as NebulaStream's ``=`` does and that is cheap to hash
  (:func:`join_key_value`).
* **The rest** (:attr:`JoinPredicate.rest`), each conjunct over one side only guarded by that
  side's window: Spark pushes such conjuncts into the side, and below its watermark, where they
  would drop the end-of-input marker of bounded input
  (:mod:`streamctl.spark.translate`), unless they read the event time, as the window does.

The window equality is the translator's (:meth:`streamctl.spark.translate._Translator.window_join`);
both parts are ANDed to it. Rows a conjunct makes NULL are not joined, as NebulaStream drops
a row whose predicate is NULL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from streamctl.nes_types import FLOAT_TYPES
from streamctl.planner import plan
from streamctl.spark import sql_text as S
from streamctl.spark.expression_columns import column, expression, from_long_bits, to_long_bits
from streamctl.spark.sql_text import Named, Sql

__all__ = ["JoinKey", "JoinPredicate", "join_key_value", "join_predicate"]

_KEY: Final = "nes#key"


@dataclass(frozen=True)
class JoinKey:
    """One equality of the predicate: the key's value on the left and on the right side."""

    index: int
    left: Sql
    right: Sql
    read_back: tuple[str | None, str | None] = (None, None)
    """The ``UINT64`` column whose 64-bit pattern each side's key is (a bare column), or None:
    after the join that column is read back from the key (:meth:`JoinPredicate.read_back`)."""

    def name(self, side: str) -> str:
        """The key's column on ``side`` (``left`` or ``right``)."""
        return f"{_KEY}#{side}#{self.index}"


@dataclass(frozen=True)
class JoinPredicate:
    keys: tuple[JoinKey, ...]
    rest: Sql | None
    """The conjuncts that are no key, guarded; None when there are none."""

    def key_columns(self, side: str) -> list[Named]:
        """The key columns ``side``'s rows get before the join."""
        return [
            (key.left if side == "left" else key.right).alias(key.name(side)) for key in self.keys
        ]

    def read_back(self, side: str) -> dict[str, Sql]:
        """``side``'s ``UINT64`` columns that a key holds the 64-bit pattern of, each as read
        back from its key after the join (exact: a joined row's key is not NULL, and the
        pattern is the value's, :func:`join_key_value`, which :func:`from_long_bits` inverts).
        Read so, the column is not in the join's state, which keeps a long instead of a
        ``DECIMAL(20,0)`` (a Java ``BigDecimal`` written and read again per row): the bench's
        windowed join takes 33 s hand-written with a ``DECIMAL(20,0)`` id against 24 s with a
        ``LONG`` one."""
        position = 0 if side == "left" else 1
        return {
            name: from_long_bits(column(key.name(side)), "UINT64")
            for key in self.keys
            if (name := key.read_back[position]) is not None
        }

    def keys_equal(self) -> Sql:
        """Every key equal on both sides (there is one key at least)."""
        equal = [column(key.name("left")) == column(key.name("right")) for key in self.keys]
        result = equal[0]
        for each in equal[1:]:
            result = result & each
        return result


def join_predicate(operator: plan.WindowJoin, left_window: str, right_window: str) -> JoinPredicate:
    """``operator``'s predicate as keys and guarded rest; ``left_window`` and ``right_window``
    are the sides' window struct columns."""
    left_names = {f.name for f in operator.left.fields}
    right_names = {f.name for f in operator.right.fields}
    keys: list[JoinKey] = []
    rest: Sql | None = None
    conjuncts = [] if operator.condition is None else _conjuncts(operator.condition)
    for conjunct in conjuncts:
        key = _key(conjunct, len(keys), left_names - right_names, right_names - left_names)
        if key is not None:
            keys.append(key)
            continue
        read = _columns_read(conjunct)
        translated = expression(conjunct)
        if read <= left_names:
            translated = S.when(column(left_window).isNotNull(), translated)
        elif read <= right_names:
            translated = S.when(column(right_window).isNotNull(), translated)
        rest = translated if rest is None else rest & translated
    return JoinPredicate(tuple(keys), rest)


def _key(
    conjunct: plan.Expr, index: int, left_only: set[str], right_only: set[str]
) -> JoinKey | None:
    """``conjunct`` as a key when it is ``l = r`` (either way round) with ``l`` reading left
    columns only, ``r`` right ones only, both of one type."""
    if not (isinstance(conjunct, plan.CallExpr) and conjunct.function == "eq"):
        return None
    first, second = conjunct.args
    for left, right in ((first, second), (second, first)):
        read_left, read_right = _columns_read(left), _columns_read(right)
        if (
            left.type == right.type
            and read_left
            and read_left <= left_only
            and read_right
            and read_right <= right_only
        ):
            return JoinKey(
                index,
                join_key_value(expression(left), left.type),
                join_key_value(expression(right), right.type),
                (_uint64_column(left), _uint64_column(right)),
            )
    return None


def join_key_value(value: Sql, type_name: str) -> Sql:
    """A value of ``type_name`` as a key whose Spark equality is NebulaStream's ``=`` between
    two values of that type: a ``UINT64`` (a ``DECIMAL(20,0)``, a Java ``BigDecimal`` made at
    every read) as its 64-bit pattern, a long (equal patterns are equal values; the bench's
    windowed join ran a fifth faster); a float NULL when NaN (IEEE: NaN equals nothing, where
    Spark's join takes NaN for equal to NaN; Spark's join normalises -0.0 to 0.0, equal as in
    IEEE); any other value as it is."""
    if type_name == "UINT64":
        return to_long_bits(value, type_name)
    if type_name in FLOAT_TYPES:
        return S.when(~S.call("isnan", value), value)
    return value


def _uint64_column(value: plan.Expr) -> str | None:
    """The name of ``value`` when it is a bare ``UINT64`` column (its key is its pattern)."""
    if isinstance(value, plan.ColumnExpr) and value.type == "UINT64":
        return value.name
    return None


def _conjuncts(predicate: plan.Expr) -> list[plan.Expr]:
    if isinstance(predicate, plan.CallExpr) and predicate.function == "and":
        return [part for arg in predicate.args for part in _conjuncts(arg)]
    return [predicate]


def _columns_read(expression_: plan.Expr) -> set[str]:
    if isinstance(expression_, plan.ColumnExpr):
        return {expression_.name}
    if isinstance(expression_, plan.CallExpr):
        return {name for arg in expression_.args for name in _columns_read(arg)}
    return set()
