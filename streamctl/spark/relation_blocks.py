"""A :class:`~streamctl.spark.sql_text.Relation`'s steps as few nested ``SELECT`` blocks.

Why: Spark's analyser resolves a query in fixed-point iterations over the whole plan, and a
plan nested one subquery per step (a source's parsing, the end-of-input marker, the event
time, the watermark, a window, a sink's formatting: ~18 levels) takes 13 iterations and
~100 ms to analyse, each micro-batch's optimiser another share: most of what a planned
query's start costs above the same query written by hand. Steps that Spark would merge
itself (``CollapseProject``, ``CombineFilters``) are merged here, in the text, where the
merged text is the same query:

* a block is ``SELECT items FROM source [WHERE c1 AND c2 ...] [GROUP BY ...]``; its items
  are ``*`` (none given), or projection items (:class:`Item`);
* a filter on a block that passes its source's columns through as they are (``*``, or
  bare columns named as themselves) joins its ``WHERE``: its names resolve to the same
  columns in the source (``(c1) AND (c2)`` is the condition ``CombineFilters`` makes);
* a projection on such a block becomes its items (``*`` in it: the block's columns);
* a projection of bare columns (a selection, a renaming) on a block of named items takes
  those items, renamed, when each is taken at most once (no expression is computed twice);
* anything else (a filter or a projection over computed items or over groups, a watermark,
  a union, an aggregate's groups) nests the block as a subquery.

Names resolve in Spark without regard to case: a merge that moves a name's resolution to
another scope is made only where that scope's names differ ignoring case (:func:`_distinct`),
so that it resolves to the same column there; exact names are matched exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from streamctl.spark.spark_types import quote_identifier

__all__ = ["Item", "Step", "query_text"]

RelationT = TypeVar("RelationT")
"""What a union appends: this module only renders it, through ``query_text``'s ``text_of``
(for :mod:`streamctl.spark.sql_text`, its ``Relation``)."""


@dataclass(frozen=True)
class Item:
    """A projection item: ``*`` (``name`` None), or ``expression`` named ``name``;
    ``reference`` is the column the expression is, when it is a bare column."""

    expression: str
    name: str | None = None
    reference: str | None = None

    @property
    def text(self) -> str:
        if self.name is None or self.reference == self.name:
            return self.expression
        return f"{self.expression} AS {quote_identifier(self.name)}"

    @property
    def passes_through(self) -> bool:
        """``*``, or a bare column named as itself."""
        return self.name is None or self.reference == self.name


STAR: Item = Item("*")


@dataclass(frozen=True)
class Step(Generic[RelationT]):
    """One step of a :class:`~streamctl.spark.sql_text.Relation`: ``project`` (``items``),
    ``where`` (``texts``: the condition), ``watermark`` (``texts``: the event-time column's
    name and the delay in milliseconds), ``union`` (``other``: the relation appended) or
    ``aggregate`` (``keys``: the grouping expressions and their names, ``items``: the
    aggregates); ``columns``: the relation's columns after it."""

    kind: Literal["project", "where", "watermark", "union", "aggregate"]
    texts: tuple[str, ...] = ()
    items: tuple[Item, ...] = ()
    other: RelationT | None = None
    keys: tuple[tuple[str, str], ...] = ()
    columns: tuple[str, ...] = ()


def _distinct(names: Sequence[str]) -> bool:
    """No two of ``names`` are equal ignoring case, as Spark's resolver compares them
    (per character, upper or lower case equal: the dotless i and ``i`` are, so upper case
    first, then folded)."""
    return len({name.upper().casefold() for name in names}) == len(names)


@dataclass
class _Block:
    source: str
    """The relation after ``FROM``, with its alias."""
    source_columns: tuple[str, ...]
    items: list[Item] | None = None
    """None: ``*``."""
    conditions: list[str] = field(default_factory=list)
    grouping: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        items = ", ".join(i.text for i in self.items) if self.items is not None else "*"
        query = f"SELECT {items} FROM {self.source}"
        if self.conditions:
            query += " WHERE " + " AND ".join(f"({c})" for c in self.conditions)
        if self.grouping:
            query += " GROUP BY " + ", ".join(self.grouping)
        return query

    @property
    def passes_columns_through(self) -> bool:
        """Its columns are its source's, by the same names: a filter or a projection on it
        reads the same columns in its source."""
        if self.grouping:
            return False
        if self.items is None:
            return True
        return all(i.passes_through for i in self.items) and _distinct(self.source_columns)

    def expanded(self, items: Sequence[Item]) -> list[Item]:
        """``items`` with ``*`` as this block's items (when it has them)."""
        if self.items is None:
            return list(items)
        return [mine for item in items for mine in (self.items if item == STAR else [item])]

    def selection(self, items: Sequence[Item], columns: Sequence[str]) -> list[Item] | None:
        """This block's items taken and renamed by ``items``, all bare columns, each item
        at most once; None where that is not the same projection."""
        if self.grouping or self.items is None or any(i == STAR for i in self.items):
            return None
        if any(i.reference is None for i in items) or not _distinct(columns):
            return None
        mine = {item.name: item for item in self.items}
        references = [i.reference for i in items]
        if len(set(references)) != len(references) or not set(references) <= mine.keys():
            return None
        return [dataclasses.replace(mine[i.reference], name=i.name) for i in items]


def query_text(
    base: str,
    base_columns: Sequence[str],
    steps: Sequence[Step[RelationT]],
    aliases: Iterator[int],
    text_of: Callable[[RelationT], str],
) -> str:
    """The query of ``steps`` over the view ``base`` (its columns ``base_columns``), its
    subqueries aliased by numbers from ``aliases``; a union's other relation is
    ``text_of`` it."""

    def alias() -> str:
        """A name for the next subquery, unique in the whole text."""
        return quote_identifier(f"_s{next(aliases)}")

    def nested(block: _Block, columns: Sequence[str]) -> _Block:
        return _Block(f"({block.text}) AS {alias()}", tuple(columns))

    block = _Block(f"{quote_identifier(base)} AS {alias()}", tuple(base_columns))
    columns: Sequence[str] = base_columns  # the block's columns, the last step's
    for step in steps:
        if step.kind == "where":
            if not block.passes_columns_through:
                block = nested(block, columns)
            block.conditions.append(step.texts[0])
        elif step.kind == "project":
            items = list(step.items)
            if block.passes_columns_through:
                block.items = block.expanded(items)
            elif (selected := block.selection(items, columns)) is not None:
                block.items = selected
            else:
                block = nested(block, columns)
                block.items = items
        elif step.kind == "aggregate":
            # The keys are computed below and grouped by name: an integer literal in
            # GROUP BY would be taken for a position in the select list.
            hidden = [f"nes#group#{i}" for i in range(len(step.keys))]
            keyed = [Item(text, h) for (text, _), h in zip(step.keys, hidden, strict=True)]
            if not block.passes_columns_through:
                block = nested(block, columns)
            block.items = block.expanded([STAR, *keyed])
            block = nested(block, [*columns, *hidden])
            names = [name for _text, name in step.keys]
            named = [Item(quote_identifier(h), n, h) for n, h in zip(names, hidden, strict=True)]
            block.items = [*named, *step.items]
            block.grouping = [quote_identifier(h) for h in hidden]
        elif step.kind == "watermark":
            name, delay_ms = step.texts
            watermarked = (
                f"({block.text}) WATERMARK {quote_identifier(name)} "
                f"DELAY OF INTERVAL {delay_ms} MILLISECONDS AS {alias()}"
            )
            block = _Block(watermarked, tuple(columns))
        else:
            assert step.other is not None
            appended = text_of(step.other)
            block = _Block(f"(({block.text}) UNION ALL ({appended})) AS {alias()}", tuple(columns))
        columns = step.columns
    return block.text
