"""The NebulaStream suite for the planner's tests and harness: where it is (:mod:`conformance`,
``STREAMCTL_CONFORMANCE``), which files, and helpers over the product's reader
(:mod:`streamctl.systest.suite_files`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import suite_params, suite_testdata, systests_dir

from streamctl.systest.suite_files import Query, Statement, SystestFile
from streamctl.systest.suite_files import read_systest as _read

__all__ = [
    "TESTDATA",
    "Query",
    "Statement",
    "SystestFile",
    "read_systest",
    "suite_file_params",
    "suite_files",
]

SUITE_ROOT = systests_dir()
TESTDATA = suite_testdata()


def suite_files(*folders: str) -> list[Path]:
    """The suite's ``*.test`` files (of ``folders``, else all); none without the suite."""
    roots = [SUITE_ROOT / folder for folder in folders] if folders else [SUITE_ROOT]
    return sorted(path for root in roots if root.is_dir() for path in root.rglob("*.test"))


def suite_file_params(*folders: str) -> list[Any]:
    """:func:`suite_files` to parametrize over (``folder/name.test`` ids); without the suite
    one case that skips, saying where the suite was looked for."""
    return suite_params(
        lambda _root: suite_files(*folders), ids=lambda p: str(p.relative_to(p.parents[1]))
    )


def read_systest(path: Path) -> SystestFile:
    return _read(path, SUITE_ROOT)


def all_statement_texts(systest: SystestFile) -> Iterator[tuple[int, str]]:
    """Every statement text of a file (DDL, queries, differential queries) with its line."""
    for block in systest.blocks:
        yield block.line, block.text
        if isinstance(block, Query) and block.differential is not None:
            yield block.line, block.differential


@dataclass(frozen=True)
class CatalogColumnSpec:
    name: str
    type: str
    nullable: bool


def queries_with_catalog(systest: SystestFile) -> Iterator[tuple[Query, object]]:
    """Each query of a file with the catalog its preceding DDL statements built.

    The catalog is a :class:`streamctl.planner.catalog_lookup.MemoryCatalog` (a fresh copy per
    query)."""
    from streamctl.planner import ast
    from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
    from streamctl.planner.parser import parse_statements

    sources: dict[str, list[CatalogColumnSpec]] = {}
    sinks: dict[str, SinkInfo] = {}
    for block in systest.blocks:
        if isinstance(block, Query):
            yield block, MemoryCatalog(dict(sources), list(sinks.values()))
            continue
        for statement in parse_statements(block.text):
            if isinstance(statement, ast.CreateLogicalSource):
                sources[statement.name.casefold()] = [
                    CatalogColumnSpec(c.catalog_name, c.type, c.nullable) for c in statement.columns
                ]
                sources[statement.name] = sources.pop(statement.name.casefold())
            elif isinstance(statement, ast.CreateSink):
                sinks[statement.name.casefold()] = SinkInfo(
                    statement.name,
                    tuple(
                        CatalogColumnSpec(c.catalog_name, c.type, c.nullable)
                        for c in statement.columns
                    ),
                    statement.sink_type,
                    ast.options_to_config(statement.options),
                )
