"""Generated cases for differential testing: a schema, bounded data and a NebulaStream query.

A :class:`Case` is one or more sources (columns and rows) and a query over them, written with
placeholders ``@S0@``, ``@S1@``... for the source names, so that a runner can give every case
sources of its own (:meth:`Case.statement`). Queries come from NebulaStream's grammar
(nes-docs/query_api.md): projection, selection, arithmetic and functions, UNION, tumbling and
sliding windows (with gaps: advance > size), GROUP BY over 0-3 keys in the grammar's forms,
COUNT/SUM/MIN/MAX/AVG/MEDIAN, windows without aggregates, 2-way window joins; stacked windows
and 3-way joins are the shapes of :data:`EXTRA_SHAPES`.

Data: integer types INT8..UINT64, FLOAT32/64, BOOLEAN, VARSIZED, nullable or not; NULLs,
duplicates (values drawn mostly from a small set), out-of-order and equal event times, empty
windows (gaps in time), values at their type's bounds, infinities and NaN now and then.
Every source has an event-time column ``ts`` (UINT64, milliseconds). Strings avoid what NES's
unquoted CSV cannot carry (the delimiter, quotes, line breaks, the empty string, ``NULL``).

Generation protocol: the generator draws through a :class:`Chooser`;
:class:`RandomChooser` (a seeded :class:`random.Random`: the same seed, the same cases) serves
the benchmark, :func:`cases` wraps the same generator as a hypothesis strategy (so hypothesis
can shrink what it drew). Every case's query binds (:func:`bind_case`); a query the planner
refuses as ``NOT_SUPPORTED`` is kept (the runner counts it as refused), any other planner
error makes the generator draw again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol, TypeVar

from hypothesis import strategies as st

from streamctl.error_codes import NOT_SUPPORTED
from streamctl.nes_types import integer_range
from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol.messages import ColumnSpec

__all__ = [
    "BASE_SHAPES",
    "EXTRA_SHAPES",
    "Case",
    "Chooser",
    "Column",
    "RandomChooser",
    "Source",
    "bind_case",
    "cases",
    "generate_case",
    "generate_cases",
]

T = TypeVar("T")

INTEGER_TYPES: Final = ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")
FLOAT_TYPES: Final = ("FLOAT32", "FLOAT64")
VALUE_TYPES: Final = (*INTEGER_TYPES, *FLOAT_TYPES, "BOOLEAN", "VARSIZED")
BASE_SHAPES: Final = ("projection", "selection", "union", "window", "window_join")
EXTRA_SHAPES: Final = ("stacked_window", "join3")
"""Shapes over other windows' output and 3-way joins: enabled when the product runs them."""

_WORDS: Final = ("a", "b", "ab", "Zz", "x y", " lead", "trail ", "ü", "a;b", "0", "-1")
_FLOAT32_MAX: Final = 3.4028234663852886e38
_FLOAT64_MAX: Final = 1.7976931348623157e308
_MAX_ATTEMPTS: Final = 50
PLACEHOLDER: Final = "@S{}@"


# --- drawing ---------------------------------------------------------------------------------


class Chooser(Protocol):
    def integer(self, low: int, high: int) -> int: ...

    def choice(self, options: Sequence[T]) -> T: ...

    def chance(self, percent: int) -> bool: ...


class RandomChooser:
    """Draws from a seeded :class:`random.Random`."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.random.randint(low, high)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.random.randrange(len(options))]

    def chance(self, percent: int) -> bool:
        return self.random.randrange(100) < percent


class _HypothesisChooser:
    """Draws through hypothesis (``st.composite``'s ``draw``), so its cases shrink."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return int(self.draw(st.integers(low, high)))

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self.draw(st.integers(0, len(options) - 1)))]

    def chance(self, percent: int) -> bool:
        return bool(self.draw(st.integers(0, 99)) < percent)


# --- cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True

    def spec(self) -> ColumnSpec:
        return ColumnSpec(self.name, self.type, self.nullable)


@dataclass(frozen=True)
class Source:
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Case:
    """Sources (``@S<i>@`` in :attr:`query` names source ``i``) and a query ``INTO File()``."""

    shape: str
    sources: tuple[Source, ...]
    query: str
    seed: str = ""

    def names(self, prefix: str) -> list[str]:
        return [f"{prefix}_{i}" for i in range(len(self.sources))]

    def statement(self, names: Sequence[str]) -> str:
        text = self.query
        for i, name in enumerate(names):
            text = text.replace(PLACEHOLDER.format(i), name)
        return text

    def describe(self) -> dict[str, Any]:
        """The case as JSON: query, schemas and rows."""
        return {
            "shape": self.shape,
            "seed": self.seed,
            "query": self.statement(self.names("s")),
            "sources": {
                name: {
                    "schema": [
                        f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}"
                        for c in source.columns
                    ],
                    "rows": [list(map(_json_value, row)) for row in source.rows],
                }
                for name, source in zip(self.names("s"), self.sources, strict=True)
            },
        }


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def bind_case(case: Case, names: Sequence[str] | None = None) -> plan.QueryPlan:
    """The case's query bound by the product's planner (raises its :class:`PlannerError`)."""
    names = list(names or case.names("s"))
    lookup = MemoryCatalog(
        {
            name: [c.spec() for c in source.columns]
            for name, source in zip(names, case.sources, strict=True)
        }
    )
    return bind_query(parse_query(case.statement(names)), lookup).plan


# --- values ----------------------------------------------------------------------------------


def _float32(value: float) -> float:
    import struct

    if not math.isfinite(value):
        return value
    return float(struct.unpack("f", struct.pack("f", value))[0])


def draw_value(c: Chooser, type_name: str) -> Any:
    """A value of ``type_name``: mostly small and repeated, sometimes at its bounds."""
    if type_name in INTEGER_TYPES:
        low, high = integer_range(type_name)
        pick = c.integer(0, 99)
        if pick < 70:
            return max(low, min(high, c.integer(-3, 5)))
        if pick < 82:
            return c.choice((low, high, low + 1, high - 1))
        return c.integer(low, high)
    if type_name in FLOAT_TYPES:
        top = _FLOAT32_MAX if type_name == "FLOAT32" else _FLOAT64_MAX
        pick = c.integer(0, 99)
        if pick < 75:
            return c.integer(-40, 40) / 4
        if pick < 88:
            value = c.integer(-(10**6), 10**6) / 1000
        elif pick < 96:
            value = c.choice((top, -top, 1e-30, 1e30, -1e30))
        else:
            value = c.choice((math.inf, -math.inf, math.nan))
        return _float32(value) if type_name == "FLOAT32" else value
    if type_name == "BOOLEAN":
        return c.chance(50)
    return c.choice(_WORDS)


def _draw_time(c: Chooser, span: int) -> int:
    pick = c.integer(0, 99)
    if pick < 94:
        return c.integer(0, span)
    if pick < 97:
        return c.choice((0, span, span + 1))
    return c.integer(10**9, 10**12)


def draw_source(
    c: Chooser, letter: str, types: Sequence[tuple[str, bool]] | None = None, span: int = 1000
) -> Source:
    """``ts`` and 1-4 columns ``<letter>1``... (of ``types`` when given), 0-20 rows."""
    if types is None:
        types = [(c.choice(VALUE_TYPES), c.chance(70)) for _ in range(c.integer(1, 4))]
    ts_nullable = c.chance(5)
    columns = (
        Column("ts", "UINT64", ts_nullable),
        *(Column(f"{letter}{i + 1}", t, n) for i, (t, n) in enumerate(types)),
    )
    rows = []
    for _ in range(c.integer(0, 20)):
        row: list[Any] = []
        for column in columns:
            if column.nullable and c.chance(12):
                row.append(None)
            elif column.name == "ts":
                row.append(_draw_time(c, span))
            else:
                row.append(draw_value(c, column.type))
        rows.append(tuple(row))
    return Source(columns, tuple(rows))


# --- expressions -----------------------------------------------------------------------------


def _kind(type_name: str) -> str:
    if type_name in INTEGER_TYPES or type_name in FLOAT_TYPES:
        return "number"
    return "boolean" if type_name == "BOOLEAN" else "string"


def _literal(c: Chooser, type_name: str) -> str:
    if type_name in INTEGER_TYPES:
        low, high = integer_range(type_name)
        return f"{type_name}({max(low, min(high, c.integer(-3, 5)))})"
    if type_name in FLOAT_TYPES:
        return f"{type_name}({c.integer(-12, 12) / 4})"
    if type_name == "BOOLEAN":
        return f"BOOLEAN({c.choice(('TRUE', 'FALSE'))})"
    return f'VARSIZED("{c.choice(_WORDS)}")'


@dataclass
class _Scope:
    """The columns an expression may use: (name as written, NES type)."""

    columns: list[tuple[str, str]] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[tuple[str, str]]:
        return [(n, t) for n, t in self.columns if _kind(t) == kind]


def numeric_expr(c: Chooser, scope: _Scope, depth: int = 0) -> str:
    numbers = scope.of_kind("number")
    pick = c.integer(0, 99)
    if not numbers or pick < 10:
        return _literal(c, c.choice((*INTEGER_TYPES, *FLOAT_TYPES)))
    name, type_name = c.choice(numbers)
    if depth >= 2 or pick < 45:
        return name
    if pick < 75:
        op = c.choice(("+", "-", "*", "/", "%", "+", "*"))
        right = _literal(c, type_name) if c.chance(50) else numeric_expr(c, scope, depth + 1)
        return f"({numeric_expr(c, scope, depth + 1)} {op} {right})"
    if pick < 88:
        function = c.choice(("ABS", "FLOOR", "CEIL", "SQRT", "ROUND"))
        return f"{function}({numeric_expr(c, scope, depth + 1)})"
    return f"{c.choice(VALUE_TYPES[:-2])}({name})"


def predicate(c: Chooser, scope: _Scope, depth: int = 0) -> str:
    pick = c.integer(0, 99)
    if depth < 1 and pick < 20:
        op = c.choice(("AND", "OR"))
        return f"({predicate(c, scope, depth + 1)} {op} {predicate(c, scope, depth + 1)})"
    if depth < 2 and 20 <= pick < 26:
        return f"NOT {predicate(c, scope, depth + 1)}"
    if pick < 36 and scope.columns:
        return f"ISNULL({c.choice(scope.columns)[0]})"
    booleans = scope.of_kind("boolean")
    if pick < 44 and booleans:
        return c.choice(booleans)[0]
    strings = scope.of_kind("string")
    if pick < 52 and strings:
        return f"{c.choice(strings)[0]} {c.choice(('==', '!='))} {_literal(c, 'VARSIZED')}"
    comparison = c.choice(("==", "!=", "<", "<=", ">", ">="))
    return f"{numeric_expr(c, scope, 1)} {comparison} {numeric_expr(c, scope, 1)}"


def _any_expr(c: Chooser, scope: _Scope) -> str:
    pick = c.integer(0, 99)
    strings = scope.of_kind("string")
    if pick < 10 and strings:
        return f"CONCAT({c.choice(strings)[0]}, {_literal(c, 'VARSIZED')})"
    if pick < 25:
        return predicate(c, scope, 1)
    return numeric_expr(c, scope)


def _scope(source: Source) -> _Scope:
    return _Scope([(col.name, col.type) for col in source.columns])


# --- windows ---------------------------------------------------------------------------------


def draw_window(c: Chooser, time_column: str = "ts") -> str:
    size = c.choice((10, 50, 100, 100, 250, 1000))
    pick = c.integer(0, 99)
    unit_size = "1 SEC" if size == 1000 else f"{size} MS"
    if pick < 45:
        return f"WINDOW TUMBLING({time_column}, SIZE {unit_size})"
    if pick < 75:
        advance = c.choice([a for a in (5, 10, 25, 30, 50, 70) if a < size] or [size // 2 or 1])
    else:
        advance = size + c.choice((5, 10, 50, 100, 150, size))  # gaps between windows
    return f"WINDOW SLIDING({time_column}, SIZE {unit_size}, ADVANCE BY {advance} MS)"


def _group_by(c: Chooser, keys: Sequence[str]) -> str:
    if not keys:
        return ""
    if len(keys) > 1 and c.chance(30):
        return f"GROUP BY ({', '.join(keys)})"
    return f"GROUP BY {', '.join(keys)}"


def _aggregates(c: Chooser, scope: _Scope, count: int) -> list[str]:
    items = []
    numbers = scope.of_kind("number")
    for i in range(count):
        function = c.choice(("COUNT", "SUM", "MIN", "MAX", "AVG", "MEDIAN", "COUNT", "SUM"))
        if function == "COUNT" and (c.chance(40) or not scope.columns):
            argument = "*"
        elif function == "COUNT":
            argument = c.choice(scope.columns)[0]
        elif numbers and c.chance(80):
            argument = c.choice(numbers)[0]
            if c.chance(20):
                argument = numeric_expr(c, scope, 1)
        else:
            argument = numeric_expr(c, scope, 1)
        items.append(f"{function}({argument}) AS g{i}")
    return items


# --- query shapes ----------------------------------------------------------------------------


def _projection(c: Chooser) -> Case:
    source = draw_source(c, "a")
    scope = _scope(source)
    if c.chance(15):
        items = "*"
    else:
        chosen = []
        for i in range(c.integer(1, 4)):
            if c.chance(40):
                chosen.append(c.choice(scope.columns)[0])
            else:
                chosen.append(f"{_any_expr(c, scope)} AS e{i}")
        items = ", ".join(dict.fromkeys(chosen))
    return Case("projection", (source,), f"SELECT {items} FROM @S0@ INTO File()")


def _selection(c: Chooser) -> Case:
    source = draw_source(c, "a")
    scope = _scope(source)
    columns = "*" if c.chance(40) else ", ".join(n for n, _ in scope.columns[: c.integer(1, 5)])
    return Case(
        "selection",
        (source,),
        f"SELECT {columns} FROM @S0@ WHERE {predicate(c, scope)} INTO File()",
    )


def _union(c: Chooser) -> Case:
    first = draw_source(c, "a")
    second = draw_source(c, "b", [(col.type, col.nullable) for col in first.columns[1:]])
    width = c.integer(1, len(first.columns))
    picks = [c.integer(0, len(first.columns) - 1) for _ in range(width)]

    def side(source: Source, placeholder: str) -> str:
        items = ", ".join(f"{source.columns[p].name} AS u{i}" for i, p in enumerate(picks))
        where = f" WHERE {predicate(c, _scope(source))}" if c.chance(40) else ""
        return f"SELECT {items} FROM {placeholder}{where}"

    query = f"{side(first, '@S0@')} UNION ({side(second, '@S1@')}) INTO File()"
    return Case("union", (first, second), query)


def _key_candidates(scope: _Scope) -> list[str]:
    return [n for n, t in scope.columns if n != "ts" and t not in FLOAT_TYPES]


def _window_query(c: Chooser, source: Source, placeholder: str) -> tuple[str, list[str]]:
    """A windowed aggregation over ``placeholder`` and its output columns."""
    scope = _scope(source)
    candidates = _key_candidates(scope)
    keys = [c.choice(candidates) for _ in range(c.integer(0, min(3, len(candidates))))]
    keys = list(dict.fromkeys(keys))
    aggregates = [] if c.chance(8) else _aggregates(c, scope, c.integer(1, 3))
    where = f" WHERE {predicate(c, scope)}" if c.chance(25) else ""
    window = draw_window(c)
    group = _group_by(c, keys)
    clauses = f"{group} {window}" if c.chance(60) else f"{window} {group}"
    having = ""
    counts = [a.split(" AS ")[1] for a in aggregates if a.startswith("COUNT")]
    if counts and c.chance(20):
        having = f" HAVING {c.choice(counts)} > UINT64({c.integer(0, 2)})"
    elif c.chance(4):  # an aggregate in HAVING, as query_api.md's example writes it
        having = f" HAVING COUNT(*) >= UINT64({c.integer(1, 3)})"
    items = ", ".join(["start", "end", *keys, *aggregates])
    query = f"SELECT {items} FROM {placeholder}{where} {clauses.strip()}{having}"
    outputs = ["start", "end", *keys, *(a.split(" AS ")[1] for a in aggregates)]
    return query, outputs


def _window(c: Chooser) -> Case:
    source = draw_source(c, "a")
    query, _ = _window_query(c, source, "@S0@")
    return Case("window", (source,), f"{query} INTO File()")


def _join_sources(c: Chooser, count: int) -> list[Source]:
    """Sources sharing a key type in their first value column, so rows match."""
    key_type = c.choice(("INT32", "UINT8", "INT64", "VARSIZED", "BOOLEAN", "INT16"))
    sources = []
    for letter in "abc"[:count]:
        rest = [(c.choice(VALUE_TYPES), c.chance(70)) for _ in range(c.integer(0, 2))]
        sources.append(draw_source(c, letter, [(key_type, c.chance(50)), *rest], span=600))
    return sources


def _join_condition(c: Chooser, left: str, right: str, left_source: Source) -> str:
    condition = f"{left} = {right}"
    numbers = _scope(left_source).of_kind("number")
    if numbers and c.chance(20):
        condition += f" AND {c.choice(numbers)[0]} >= {_literal(c, 'INT8')}"
    return condition


def _window_join(c: Chooser) -> Case:
    a, b = _join_sources(c, 2)
    if c.chance(40):
        items = "*"
    else:
        names = [col.name for col in (*a.columns[1:], *b.columns[1:])]
        items = ", ".join(["start", "end", *dict.fromkeys(c.choice(names) for _ in range(3))])
    query = (
        f"SELECT {items} FROM @S0@ INNER JOIN (SELECT * FROM @S1@) "
        f"ON {_join_condition(c, 'a1', 'b1', a)} {draw_window(c)} INTO File()"
    )
    return Case("window_join", (a, b), query)


def _stacked_window(c: Chooser) -> Case:
    source = draw_source(c, "a", span=2000)
    inner, outputs = _window_query(c, source, "@S0@")
    scope = _Scope([(name, "INT64") for name in outputs if name not in ("start", "end")])
    keys = [n for n in outputs[2:] if not n.startswith("g")]
    outer_keys = keys[: c.integer(0, len(keys))]
    aggregates = _aggregates(c, scope, c.integer(1, 2)) if scope.columns else ["COUNT(*) AS g0"]
    aggregates = [a.replace(" AS g", " AS h") for a in aggregates]
    size = c.choice((200, 500, 1000))
    time_column = c.choice(("start", "start", "end"))
    window = (
        f"WINDOW TUMBLING({time_column}, SIZE {size} MS)"
        if c.chance(70)
        else f"WINDOW SLIDING({time_column}, SIZE {size} MS, ADVANCE BY {size // 2} MS)"
    )
    items = ", ".join(["start", "end", *outer_keys, *aggregates])
    query = f"SELECT {items} FROM ({inner}) {_group_by(c, outer_keys)} {window} INTO File()"
    return Case("stacked_window", (source,), " ".join(query.split()))


def _join3(c: Chooser) -> Case:
    a, b, third = _join_sources(c, 3)
    window = draw_window(c)
    query = (
        "SELECT * FROM @S0@ INNER JOIN (SELECT * FROM @S1@) ON a1 = b1 "
        f"{window} INNER JOIN (SELECT * FROM @S2@) ON a1 = c1 {window} INTO File()"
    )
    return Case("join3", (a, b, third), query)


_SHAPES: Final[dict[str, Callable[[Chooser], Case]]] = {
    "projection": _projection,
    "selection": _selection,
    "union": _union,
    "window": _window,
    "window_join": _window_join,
    "stacked_window": _stacked_window,
    "join3": _join3,
}


def generate_case(c: Chooser, shapes: Sequence[str] = BASE_SHAPES) -> Case:
    """One case of a shape drawn from ``shapes`` whose query binds or is refused as
    ``NOT_SUPPORTED`` (other planner errors mean the generator drew an ill-typed query: it
    draws again)."""
    last: PlannerError | None = None
    for _ in range(_MAX_ATTEMPTS):
        case = _SHAPES[c.choice(shapes)](c)
        try:
            bind_case(case)
        except PlannerError as error:
            if error.code == NOT_SUPPORTED:
                return case
            last = error
            continue
        return case
    raise RuntimeError(f"no case binds after {_MAX_ATTEMPTS} attempts; last: {last}")


def generate_cases(count: int, seed: int, shapes: Sequence[str] = BASE_SHAPES) -> list[Case]:
    """``count`` cases; case ``i`` depends only on ``seed`` and ``i``."""
    return [
        replace(generate_case(RandomChooser(seed * 1_000_003 + i), shapes), seed=f"{seed}:{i}")
        for i in range(count)
    ]


@st.composite
def cases(
    draw: Callable[[st.SearchStrategy[Any]], Any], shapes: Sequence[str] = BASE_SHAPES
) -> Case:
    """The generator as a hypothesis strategy."""
    return generate_case(_HypothesisChooser(draw), shapes)
