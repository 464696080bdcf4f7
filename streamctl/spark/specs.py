"""What an agent is given to build a source or a sink (pure Python, no pyspark).

The coordinator builds these from catalog rows (a physical source's id, type and config with
its logical source's schema; a sink's name, type, config and schema) and sends them to the
agent that runs the query. Constructing a spec normalizes it again with the options table, so
a connector only ever sees canonical keys and typed values, whoever built the spec;
normalization is idempotent on canonical configs. Invalid specs raise
:class:`~streamctl.planner.options.ConnectorOptionError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamctl.planner.options import (
    ConnectorOptionError,
    normalize_sink_options,
    normalize_source_options,
    redact,
)
from streamctl.spark.spark_types import column_fields

__all__ = ["Column", "ConnectorError", "SinkSpec", "SourceSpec"]


class ConnectorError(RuntimeError):
    """A connector that cannot run where it was started (missing file, jar, server...).

    Raised by ``read_source``/``start_sink`` on the agent; the message says what to fix.
    """


Column = Mapping[str, Any]
"""A catalog column: ``{"name": str, "type": NES type name, "nullable": bool}``."""


def _canonical_columns(schema: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    columns = []
    for column in schema:
        try:
            name, type_name, nullable = column_fields(column)
        except (KeyError, AttributeError, ValueError) as error:
            raise ConnectorOptionError(f"invalid schema column {column!r}: {error}") from None
        columns.append({"name": name, "type": type_name, "nullable": nullable})
    if not columns:
        raise ConnectorOptionError("a connector needs a schema with at least one column")
    return tuple(columns)


@dataclass(frozen=True)
class SourceSpec:
    """A physical source: catalog id, source type, canonical config, logical source schema."""

    id: int | str
    type: str
    config: Mapping[str, Any]
    schema: Sequence[Column]

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", str(self.type).strip().upper())
        object.__setattr__(self, "config", normalize_source_options(self.type, self.config))
        object.__setattr__(self, "schema", _canonical_columns(self.schema))

    def describe(self) -> str:
        """For logs and errors: the source with its secrets redacted."""
        return f"{self.type} source {self.id} {redact(self.type, self.config)}"


@dataclass(frozen=True)
class SinkSpec:
    """A sink: catalog name, sink type, canonical config, schema of the rows written."""

    name: str
    type: str
    config: Mapping[str, Any]
    schema: Sequence[Column]

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", str(self.type).strip().upper())
        object.__setattr__(self, "config", normalize_sink_options(self.type, self.config))
        object.__setattr__(self, "schema", _canonical_columns(self.schema))

    def describe(self) -> str:
        """For logs and errors: the sink with its secrets redacted."""
        return f"{self.type} sink {self.name!r} {redact(self.type, self.config)}"
