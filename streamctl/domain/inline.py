"""Inline sources and sinks: ``FROM File(...)`` and ``INTO File()`` as catalog objects owned by
their query.

Protocol
--------
A query may define its sources and its sink inside the statement, as NebulaStream allows:
``FROM File(...)``, ``FROM Generator(...)``, ``INTO File()``, ``INTO Print()``, ``INTO Void()``,
``INTO Checksum()``. When the coordinator creates such a query (``CreateQuery``, or ``SELECT
... INTO`` in ``ExecuteStatement``), the pass

1. binds the statement with its inline parts: column types, the sink's schema (given with
   ``SCHEMA(...) AS `SINK`.`SCHEMA``` or else the query's own) and the connector options are
   checked exactly as for catalog objects;
2. confines file paths exactly as for catalog objects (:mod:`streamctl.domain.paths`: a
   relative ``FILE_PATH`` resolves against the files directory, every path must lie under a
   file root), refusing with ``INVALID_STATEMENT`` and the part's position. A File or
   Checksum sink without a path writes under ``<files dir>/sinks/<sink name>``;
3. creates them, in the same pass, a logical source and its physical source for each inline source
   (``query<id>.source<n>``) and a sink for an inline sink (``query<id>.sink``);
4. rewrites the plan to scan those logical sources, so an agent only ever runs a plan over
   catalog sources into a catalog sink, whatever the statement looked like.

Guarantees
----------
* The objects' names hold a ``.``, which no name a user can create holds: they never collide.
* They live exactly as long as their query: dropping the query (directly or by ``CASCADE``)
  drops them, and they cannot be dropped on their own (``INVALID_REQUEST`` naming the query).
* Every check runs before the first object is created: a refused query creates nothing.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from streamctl import config
from streamctl.catalog.rows import LogicalSourceRow, PhysicalSourceRow, SinkRow
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.paths import confine_sink_options, confine_source_options
from streamctl.domain.validate import checked_kind, checked_schema, connector_options
from streamctl.error_codes import INVALID_STATEMENT, UNKNOWN_WORKER, ErrorCode
from streamctl.nes_types import SINK_TYPES, SOURCE_TYPES
from streamctl.planner import ast
from streamctl.planner import plan as ir
from streamctl.planner.binder import BoundQuery
from streamctl.planner.options import normalize_sink_options, normalize_source_options
from streamctl.planner.placement import pop_pinned_worker
from streamctl.protocol import messages as m

_OWNED = re.compile(r"^query(\d+)\.(?:source\d+|sink)$")
PATH_OPTION = "file_path"
"""The canonical option that names a file or directory, for File sources and File and
Checksum sinks."""


def source_name(query_id: int, number: int) -> str:
    return f"query{query_id}.source{number}"


def sink_name(query_id: int) -> str:
    return f"query{query_id}.sink"


def owner_of(name: str) -> int | None:
    """The query an inline logical source or sink belongs to; ``None`` for catalog objects."""
    found = _OWNED.match(name)
    return int(found.group(1)) if found else None


def refuse_drop(description: str, name: str) -> None:
    """Refuse dropping an object that belongs to a query (it goes when its query goes);
    ``name`` is the object's name or its logical source's."""
    owner = owner_of(name)
    if owner is not None:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST,
            f"{description} was defined inline in query {owner} and goes with it; "
            f"drop query {owner} instead",
        )


@dataclasses.dataclass(frozen=True)
class InlineSource:
    """An inline source as the logical source (``name``, ``schema``) and the one physical
    source (``type``, canonical ``config``, pinned ``worker``) it becomes."""

    name: str
    type: str
    config: dict[str, Any]
    worker: str | None
    schema: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class InlineObjects:
    """The catalog objects a query's inline parts become, checked but not created yet.
    ``bound`` is the query bound to them (it scans ``sources`` and writes ``sink``)."""

    bound: BoundQuery
    sources: list[InlineSource]
    sink: SinkRow | None


def prepare(
    ctx: PassContext, statement: ast.QueryStatement, bound: BoundQuery, query_id: int
) -> InlineObjects:
    """Check ``bound``'s inline sources and sink as query ``query_id``'s (nothing changes)."""
    positions = [
        f"line {node.line}, column {node.column}: "
        for node in ast.find_all(statement, ast.InlineSource)
    ]
    if len(positions) != len(bound.inline_sources):
        positions = [""] * len(bound.inline_sources)
    sources = [
        _checked_source(ctx, scan, source_name(query_id, number), where)
        for number, (scan, where) in enumerate(
            zip(bound.inline_sources, positions, strict=True), start=1
        )
    ]
    version = ctx.view.version
    sink = None if bound.inline_sink is None else _checked_sink(bound, sink_name(query_id), version)
    renamed = {
        scan.id: source.name for scan, source in zip(bound.inline_sources, sources, strict=True)
    }
    rebound = dataclasses.replace(
        bound,
        plan=ir.QueryPlan(_scan_catalog_sources(bound.plan.root, renamed)),
        logical_sources=tuple(sorted((*bound.logical_sources, *renamed.values()))),
        inline_sources=(),
        sink_name=bound.sink_name if sink is None else sink.name,
        inline_sink=None,
    )
    return InlineObjects(rebound, sources, sink)


def materialize(ctx: PassContext, objects: InlineObjects, query_id: int) -> BoundQuery:
    """Create the catalog objects :func:`prepare` checked for query ``query_id``; return the
    query bound to them."""
    version = ctx.view.version
    reason = f"defined inline in query {query_id}"
    for source in objects.sources:
        ctx.view.logical_sources.add(LogicalSourceRow(source.name, source.schema, version, version))
        ctx.record("logical_source", source.name, "create", reason)
        ctx.view.load_physical_sources_of([source.name])
        physical = PhysicalSourceRow(
            id=ctx.view.next_id("physical_source"),
            logical_source=source.name,
            type=source.type,
            config=source.config,
            worker=source.worker,
            created_version=version,
            updated_version=version,
        )
        ctx.view.physical_sources.add(physical)
        ctx.record("physical_source", physical.id, "create", reason)
    if objects.sink is not None:
        ctx.view.sinks.add(objects.sink)
        ctx.record("sink", objects.sink.name, "create", reason)
    return objects.bound


def drop_owned(ctx: PassContext, query_id: int, reason: str) -> None:
    """Drop the inline sources and sink of a query that is being dropped."""
    number = 1
    while (logical := ctx.view.logical_sources.get(source_name(query_id, number))) is not None:
        for physical in ctx.view.physical_sources_of(logical.name):
            ctx.view.physical_sources.remove(physical.id)
            ctx.record("physical_source", physical.id, "drop", reason)
        ctx.view.logical_sources.remove(logical.name)
        ctx.record("logical_source", logical.name, "drop", reason)
        number += 1
    if ctx.view.sinks.get(sink_name(query_id)) is not None:
        ctx.view.sinks.remove(sink_name(query_id))
        ctx.record("sink", sink_name(query_id), "drop", reason)


# --- checks ---------------------------------------------------------------------------------


def _checked_source(ctx: PassContext, scan: ir.InlineScan, name: str, where: str) -> InlineSource:
    source_type = checked_kind(scan.source_type, SOURCE_TYPES, "inline source")
    options = scan.config_dict()
    worker = pop_pinned_worker(options)
    if worker is not None and ctx.view.workers.get(worker) is None:
        raise RequestFailed(
            UNKNOWN_WORKER,
            f"{where}the inline {source_type} source is placed on worker {worker!r}, which does "
            "not exist (SOURCE.HOST names a worker: see SHOW WORKERS)",
        )
    options = confine_source_options(
        source_type,
        connector_options(normalize_source_options, source_type, options),
        f"{where}the inline {source_type} source's",
        INVALID_STATEMENT,
    )
    columns = tuple(
        m.ColumnSpec(column, field.type, field.nullable)
        for column, field in zip(scan.source_columns, scan.fields, strict=True)
    )
    return InlineSource(name, source_type, options, worker, checked_schema(columns))


def _checked_sink(bound: BoundQuery, name: str, version: int) -> SinkRow:
    assert bound.inline_sink is not None
    sink_type = checked_kind(bound.inline_sink.sink_type, SINK_TYPES, "inline sink")
    options = connector_options(
        normalize_sink_options,
        sink_type,
        {k: v for k, v in bound.inline_sink.config_dict().items() if not _is_schema(k)},
    )
    options = confine_sink_options(
        sink_type, options, f"the inline {sink_type} sink's", INVALID_STATEMENT
    )
    if sink_type in ("FILE", "CHECKSUM") and not options.get(PATH_OPTION):
        options[PATH_OPTION] = str(config.files_dir() / "sinks" / name)
    columns = tuple(m.ColumnSpec(c.name, c.type, c.nullable) for c in bound.output_schema)
    return SinkRow(name, checked_schema(columns), sink_type, options, version, version)


def _is_schema(key: str) -> bool:
    return key.upper().rsplit(".", 1)[-1] == "SCHEMA"


def _scan_catalog_sources(operator: ir.Operator, renamed: dict[str, str]) -> ir.Operator:
    """The plan with every inline scan reading the logical source it was materialized as."""
    if isinstance(operator, ir.InlineScan):
        return ir.Scan(renamed[operator.id], operator.source_columns, operator.fields)
    if isinstance(operator, ir.Scan):
        return operator
    if isinstance(operator, ir.Union | ir.WindowJoin):
        return dataclasses.replace(
            operator,
            left=_scan_catalog_sources(operator.left, renamed),
            right=_scan_catalog_sources(operator.right, renamed),
        )
    return dataclasses.replace(operator, input=_scan_catalog_sources(operator.input, renamed))
