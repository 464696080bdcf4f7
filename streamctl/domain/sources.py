"""Logical and physical sources (stage 2): create, drop, get, list.

Every answer that shows a physical source is built here (:func:`physical_source_json`), the one
place where its secret option values are masked: the catalog keeps them (agents need them) but
no answer, listing or frontend ever shows them."""

from __future__ import annotations

from operator import attrgetter

from streamctl.catalog.rows import (
    LogicalSourceRow,
    PhysicalSourceRow,
)
from streamctl.domain import inline
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.listing import check_page, listing, page_of
from streamctl.domain.paths import confine_source_options
from streamctl.domain.validate import checked_kind as _kind
from streamctl.domain.validate import checked_name as _name
from streamctl.domain.validate import checked_schema as _schema
from streamctl.domain.validate import connector_options as _options
from streamctl.domain.validate import not_found as _not_found
from streamctl.error_codes import ErrorCode
from streamctl.nes_types import SOURCE_TYPES
from streamctl.planner.options import (
    normalize_source_options,
    redact,
)
from streamctl.protocol import answers
from streamctl.protocol import messages as m


def logical_source_json(row: LogicalSourceRow) -> answers.LogicalSource:
    return {"name": row.name, "schema": row.schema, "created_version": row.created_version}


def physical_source_json(row: PhysicalSourceRow) -> answers.PhysicalSource:
    return {
        "id": row.id,
        "logical_source": row.logical_source,
        "type": row.type,
        "config": redact(row.type, row.config),
        "worker": row.worker,
        "created_version": row.created_version,
    }


def create_logical_source(
    ctx: PassContext, request: m.CreateLogicalSource
) -> answers.LogicalSource:
    name = _name(request.name, "logical source name")
    schema = _schema(request.schema)
    if ctx.view.logical_sources.get(name) is not None:
        raise RequestFailed(ErrorCode.ALREADY_EXISTS, f"logical source {name!r} already exists")
    row = LogicalSourceRow(
        name=name,
        schema=schema,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.logical_sources.add(row)
    ctx.record("logical_source", name, "create", "CreateLogicalSource")
    return logical_source_json(row)


def drop_logical_source(
    ctx: PassContext, request: m.DropLogicalSource
) -> answers.LogicalSourceDropped:
    row = ctx.view.logical_sources.get(request.name)
    if row is None:
        raise _not_found("logical source", request.name)
    inline.refuse_drop(f"logical source {row.name!r}", row.name)
    physical = ctx.view.physical_sources_of(row.name)
    queries = ctx.view.queries_reading(row.name)
    if (physical or queries) and not request.cascade:
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"logical source {row.name!r} has {len(physical)} physical source(s) and "
            f"{len(queries)} query(ies); drop them first or ask for CASCADE",
        )
    dropped = queries_stage.drop_queries(ctx, queries, f"CASCADE from logical source {row.name!r}")
    for source in physical:
        ctx.view.physical_sources.remove(source.id)
        ctx.record("physical_source", source.id, "drop", f"CASCADE from {row.name!r}")
    ctx.view.logical_sources.remove(row.name)
    ctx.record("logical_source", row.name, "drop", "DropLogicalSource")
    return {
        "logical_sources": [row.name],
        "physical_sources": sorted(source.id for source in physical),
        "queries": dropped,
    }


def get_logical_source(ctx: PassContext, request: m.GetLogicalSource) -> answers.LogicalSource:
    row = ctx.view.logical_sources.get(request.name)
    if row is None:
        raise _not_found("logical source", request.name)
    return logical_source_json(row)


def list_logical_sources(
    ctx: PassContext, request: m.ListLogicalSources
) -> list[answers.LogicalSource] | answers.Page:
    return listing(
        ctx.view.logical_sources, request.limit, request.after, logical_source_json, request.kind
    )


def create_physical_source(
    ctx: PassContext, request: m.CreatePhysicalSource
) -> answers.PhysicalSource:
    source_type = _kind(request.type, SOURCE_TYPES, "physical source")
    if ctx.view.logical_sources.get(request.logical_source) is None:
        raise _not_found("logical source", request.logical_source)
    if request.worker is not None and ctx.view.workers.get(request.worker) is None:
        raise _not_found("worker", request.worker)
    options = confine_source_options(
        source_type,
        _options(normalize_source_options, source_type, request.config),
        f"the {source_type} source's",
    )
    ctx.view.load_physical_sources_of([request.logical_source])
    row = PhysicalSourceRow(
        id=ctx.view.next_id("physical_source"),
        logical_source=request.logical_source,
        type=source_type,
        config=options,
        worker=request.worker,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.physical_sources.add(row)
    ctx.record(
        "physical_source", row.id, "create", f"CreatePhysicalSource for {row.logical_source!r}"
    )
    return physical_source_json(row)


def drop_physical_source(
    ctx: PassContext, request: m.DropPhysicalSource
) -> answers.PhysicalSourceDropped:
    row = ctx.view.physical_sources.get(request.id)
    if row is None:
        raise _not_found("physical source", request.id)
    inline.refuse_drop(f"physical source {row.id} (of {row.logical_source!r})", row.logical_source)
    ctx.view.physical_sources.remove(row.id)
    ctx.record("physical_source", row.id, "drop", "DropPhysicalSource")
    return {"physical_sources": [row.id]}


def get_physical_source(ctx: PassContext, request: m.GetPhysicalSource) -> answers.PhysicalSource:
    row = ctx.view.physical_sources.get(request.id)
    if row is None:
        raise _not_found("physical source", request.id)
    return physical_source_json(row)


def list_physical_sources(
    ctx: PassContext, request: m.ListPhysicalSources
) -> list[answers.PhysicalSource] | answers.Page:
    if request.logical_source is None:
        return listing(
            ctx.view.physical_sources,
            request.limit,
            request.after,
            physical_source_json,
            request.kind,
        )
    check_page(request.limit, request.after, request.kind)
    if ctx.view.logical_sources.get(request.logical_source) is None:
        raise _not_found("logical source", request.logical_source)
    # the physical sources of one logical source are loaded together; paged in memory
    rows = sorted(ctx.view.physical_sources_of(request.logical_source), key=lambda r: r.id)
    if request.limit is None:
        return [physical_source_json(row) for row in rows]
    after = request.after
    following = [row for row in rows if after is None or row.id > after]
    return page_of(following, request.limit, physical_source_json, attrgetter("id"))
