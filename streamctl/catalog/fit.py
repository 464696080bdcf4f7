"""Whether a row's values fit its table's columns, checked before any statement is sent.

SQLite stores an out-of-range integer until Python's driver refuses it (``OverflowError``) and
never enforces a ``VARCHAR`` width; PostgreSQL refuses both, and then aborts the whole
transaction. Checking here first makes both databases behave alike and turns what would be a
failed pass into a :class:`ValueDoesNotFit` that names the column and the value, which the pass
answers to the one message that produced it.

Checked: integers against their column's range (``Integer`` 32 bits, ``BigInteger`` 64 bits),
text against its width, against NUL characters (PostgreSQL text cannot hold them) and against
lone surrogates (not encodable as UTF-8), floats against NaN and infinities. JSON columns are
written through :mod:`streamctl.compact_json`, which escapes what JSON text cannot hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, Integer, String, Table

from streamctl.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN


class ValueDoesNotFit(ValueError):
    """A value that its catalog column cannot hold."""

    def __init__(self, table: str, column: str, value: Any, reason: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{table}.{column} cannot hold {shown}: {reason}")
        self.table = table
        self.column = column


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None."""
    if "\x00" in value:
        return "it contains a NUL character"
    if value.isascii():  # a flag of the string: no lone surrogate, and no copy to find out
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "it contains a lone surrogate, which is not valid Unicode text"
    return None


Checker = Callable[[Any], "str | None"]
"""A function from a value to the reason it does not fit (None: it fits)."""


def _checker(column_type: Any) -> Checker | None:
    """The check of a column's values; None for a column that holds any value it is given."""
    if isinstance(column_type, Boolean):
        return None
    if isinstance(column_type, Integer):  # BigInteger and SmallInteger are Integers too
        low, high = (
            (INT64_MIN, INT64_MAX)
            if isinstance(column_type, BigInteger)
            else (INT32_MIN, INT32_MAX)
        )

        def integer(value: Any) -> str | None:
            if isinstance(value, int) and not low <= value <= high:
                return f"out of range ({low} to {high})"
            return None

        return integer
    if isinstance(column_type, Float):

        def floating(value: Any) -> str | None:
            if isinstance(value, float) and not math.isfinite(value):
                return "not a finite number"
            return None

        return floating
    if isinstance(column_type, String):  # Text is a String without a length
        width = column_type.length

        def text(value: Any) -> str | None:
            if not isinstance(value, str):
                return None
            if width is not None and len(value) > width:
                return f"longer than {width} characters"
            return text_problem(value)

        return text
    return None


_plans: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, str, Checker]]] = {}
"""Per table, key prefix and row keys: each key with a check, its column's name and the check
(a pass writes thousands of rows of a few shapes; keys whose column needs no check are left
out)."""


def _plan(table: Table, prefix: str, keys: tuple[str, ...]) -> list[tuple[str, str, Checker]]:
    plan = _plans.get((table.name, prefix, keys))
    if plan is None:
        plan = []
        for key in keys:
            name = key[len(prefix) :] if prefix else key
            column = table.c.get(name)
            checker = _checker(column.type) if column is not None else None
            if checker is not None:
                plan.append((key, name, checker))
        _plans[(table.name, prefix, keys)] = plan
    return plan


def check_rows_fit(table: Table, rows: Iterable[Mapping[str, Any]], prefix: str = "") -> None:
    """Raise :class:`ValueDoesNotFit` for the first value of ``rows`` its column cannot hold.

    ``prefix`` is stripped from the keys (bind names such as ``v_capacity``). Rows that all
    have the same keys, as a pass writes them in bulk, are checked a column at a time first
    (:func:`_columns_fit`); only where that finds a value that may not fit are they checked
    value by value, which names the first one that does not."""
    rows = rows if isinstance(rows, list) else list(rows)
    if rows and _columns_fit(table, prefix, rows):
        return
    keys: tuple[str, ...] = ()
    plan: list[tuple[str, str, Checker]] = []
    for row in rows:
        row_keys = tuple(row)
        if row_keys != keys:
            keys, plan = row_keys, _plan(table, prefix, row_keys)
        for key, name, checker in plan:
            value = row[key]
            if value is None:
                continue
            reason = checker(value)
            if reason is not None:
                raise ValueDoesNotFit(table.name, name, value, reason)


def _columns_fit(table: Table, prefix: str, rows: list[Mapping[str, Any]]) -> bool:
    """Whether every value of ``rows`` (all with the first row's keys) certainly fits, judged a
    column at a time: integers by their least and greatest, floats by their sum (finite
    unless one is not, or the sum overflows), text joined into one string (no NUL, ASCII or
    encodable as UTF-8, none longer than the width). False where the rows differ in keys,
    a column holds values of several types, or the column test fails: the caller then checks
    value by value. A pass writes thousands of rows of a few columns; a check per value was
    4% of its time."""
    keys = tuple(rows[0])
    if set(map(len, rows)) != {len(keys)}:
        return False
    for key, name, checker in _plan(table, prefix, keys):
        try:  # each row holds as many keys as the first: with this one, the same keys
            values = list(map(itemgetter(key), rows))
        except KeyError:
            return False
        kinds = set(map(type, values))
        if _NONE_TYPE in kinds:
            kinds.discard(_NONE_TYPE)
            values = [value for value in values if value is not None]
        if not kinds:
            continue
        if len(kinds) != 1:
            return False
        kind = kinds.pop()
        if kind is str:
            joined = "".join(values)
            if text_problem(joined) is not None:
                return False
            column_type = table.c[name].type
            width = column_type.length if isinstance(column_type, String) else None
            if width is not None and max(map(len, values)) > width:
                return False
        elif kind is int:
            if checker(min(values)) is not None or checker(max(values)) is not None:
                return False
        elif kind is float:
            if checker(sum(values)) is not None:
                return False
        elif any(checker(value) is not None for value in values):
            return False
    return True


_NONE_TYPE = type(None)
