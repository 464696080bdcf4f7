"""How the binder sees the catalog: the :class:`CatalogLookup` protocol and what it returns.

The binder reads a catalog snapshot only through :class:`CatalogLookup` (the pass builds one
from its view of the catalog; tests and tools use :class:`MemoryCatalog`), so the planner
never imports the catalog package. Lookups are case-insensitive and return None when absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from streamctl.planner.scopes import _fold

__all__ = ["CatalogColumn", "CatalogLookup", "LogicalSourceInfo", "MemoryCatalog", "SinkInfo"]


class CatalogColumn(Protocol):
    """A catalog column (e.g. ``streamctl.protocol.messages.ColumnSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def nullable(self) -> bool: ...


@dataclass(frozen=True)
class LogicalSourceInfo:
    """A catalog logical source: its name as the catalog spells it, and its columns."""

    name: str
    columns: Sequence[CatalogColumn]


@dataclass(frozen=True)
class SinkInfo:
    """A catalog sink: its columns (names as the catalog stores them, e.g. ``STREAM$ID``), its
    type and its config."""

    name: str
    columns: Sequence[CatalogColumn]
    type: str
    config: Mapping[str, Any] = field(default_factory=dict)


class CatalogLookup(Protocol):
    """What the binder needs from a catalog snapshot. Lookups are case-insensitive (the binder
    passes names upper-cased when they were written unquoted) and return None when absent."""

    def logical_source(self, name: str) -> LogicalSourceInfo | None: ...

    def sink(self, name: str) -> SinkInfo | None: ...


class MemoryCatalog:
    """A :class:`CatalogLookup` over dicts (tests, tools): names compared case-insensitively."""

    def __init__(
        self,
        sources: Mapping[str, Sequence[CatalogColumn]] | None = None,
        sinks: Sequence[SinkInfo] = (),
    ) -> None:
        self._sources = {
            _fold(name): LogicalSourceInfo(name, tuple(columns))
            for name, columns in (sources or {}).items()
        }
        self._sinks = {_fold(info.name): info for info in sinks}

    def add_source(self, name: str, columns: Sequence[CatalogColumn]) -> None:
        self._sources[_fold(name)] = LogicalSourceInfo(name, tuple(columns))

    def add_sink(self, info: SinkInfo) -> None:
        self._sinks[_fold(info.name)] = info

    def logical_source(self, name: str) -> LogicalSourceInfo | None:
        return self._sources.get(_fold(name))

    def sink(self, name: str) -> SinkInfo | None:
        return self._sinks.get(_fold(name))
