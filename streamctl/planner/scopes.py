"""Scopes of the binder: the columns an expression may name, and how names compare.

A :class:`_Bound` relation is the operator producing it and its columns; a :class:`_Scope` is
the columns an expression may use; a :class:`_Column` is one of them, with its plan field and
its NebulaStream name (``STREAM$ID``). Names compare case-insensitively (:func:`_fold`), and
:class:`_Names` allocates the internal field names of a plan's operators.

The names keep their leading underscore: they are the binder's internals, shared only by the
planner's binding modules (:mod:`.binder`, :mod:`.expressions`, :mod:`.sink_checks`,
:mod:`.catalog_lookup`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streamctl.planner import ast
from streamctl.planner import plan as ir

_INTERNAL_NAME: Final = re.compile(r"[^A-Za-z0-9_$]")


@dataclass(frozen=True)
class _Column:
    """A column visible to expressions: its plan field and its NebulaStream name."""

    field: ir.Field
    qualifier: str | None
    name: str
    aliases: tuple[str, ...] = ()
    generated: bool = False
    display: str | None = None

    @property
    def nes_name(self) -> str:
        return f"{self.qualifier}${self.name}" if self.qualifier else self.name

    @property
    def shown(self) -> str:
        return self.display or self.nes_name

    def with_field(self, new_field: ir.Field) -> _Column:
        return _Column(
            new_field, self.qualifier, self.name, self.aliases, self.generated, self.display
        )


@dataclass(frozen=True)
class _Bound:
    """A bound relation: the operator producing it and its columns (in field order)."""

    operator: ir.Operator
    columns: tuple[_Column, ...]


@dataclass
class _Scope:
    """Columns an expression may use; ``aggregates`` maps aggregate calls (in a windowed select
    list) to the window's output columns."""

    columns: tuple[_Column, ...]
    description: str
    aggregates: dict[ast.FunctionCall, ir.ColumnExpr] | None = None
    aggregate_hint: str | None = None


def _fold(name: str) -> str:
    return name.casefold()


def _unqualified(name: str) -> str:
    """The last part of a NebulaStream or catalog column name (``STREAM$ID``, ``stream.id``)."""
    return re.split(r"[$.]", name)[-1]


class _Names:
    """Allocates internal field names: sanitized, unique case-insensitively within one output."""

    def __init__(self, taken: Sequence[str] = ()) -> None:
        self._taken = {_fold(name) for name in taken}

    def allocate(self, wanted: str) -> str:
        base = _INTERNAL_NAME.sub("_", wanted) or "_"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "_" + base
        candidate, counter = base, 1
        while _fold(candidate) in self._taken:
            counter += 1
            candidate = f"{base}_{counter}"
        self._taken.add(_fold(candidate))
        return candidate


def _column_expr(column: _Column) -> ir.ColumnExpr:
    return ir.ColumnExpr(column.field.name, column.field.type, column.field.nullable)


def _find_column(columns: Sequence[_Column], internal: str) -> _Column:
    return next(column for column in columns if column.field.name == internal)


def _qualifies(column: _Column, qualifier: Sequence[str]) -> bool:
    if len(qualifier) != 1:
        return False
    wanted = _fold(qualifier[0])
    return (column.qualifier is not None and _fold(column.qualifier) == wanted) or any(
        _fold(alias) == wanted for alias in column.aliases
    )


def _describe(bound: _Bound) -> str:
    qualifiers = {c.qualifier for c in bound.columns}
    if len(qualifiers) == 1 and None not in qualifiers:
        return f"source {next(iter(qualifiers))!r}"
    return "the query's input"


def _column_list(columns: Sequence[_Column]) -> str:
    return ", ".join(f"{c.nes_name} {c.field.type}" for c in columns)


def _matches(columns: Sequence[_Column], parts: Sequence[str]) -> list[_Column]:
    """The columns a reference ``parts`` names, the one NebulaStream picks first.

    NebulaStream resolves a field name in an operator's input schema (``Schema::getFieldByName``
    of its data-types module, used by the type inference of every field access): a fully
    qualified name (``STREAM$ID``) matching exactly wins; otherwise every field whose name after
    the qualifier (``STREAM$``) equals the name matches, and when several do -- a column shared
    by joined sources (``ts`` of ``t`` and ``u``), or by a window's output and a join's -- it
    logs "Ambiguous field name" and takes the *first* in schema order: a join's output lists
    the left input's fields before the right's (after the window's START and END), so the left
    (first-joined) source's column wins. Fields without a qualifier (aliases made by ``AS``)
    match only exactly. ``q.name`` names ``Q$NAME`` (or a column of the relation aliased ``q``);
    several of those (a source joined with itself) resolve to the first too. Nothing is
    ambiguous: the binder follows this and never refuses a name as ambiguous."""
    if len(parts) == 1:
        wanted = _fold(parts[0])
        exact = [c for c in columns if _fold(c.nes_name) == wanted]
        found = exact or [c for c in columns if c.qualifier is not None and _fold(c.name) == wanted]
    elif len(parts) == 2:
        found = [
            c for c in columns if _fold(c.name) == _fold(parts[1]) and _qualifies(c, parts[:1])
        ]
    else:
        found = []
    return list({c.field.name: c for c in found}.values())
