"""Sinks (stage 2): create, drop, get, list.

Every answer that shows a sink is built here (:func:`sink_json`), the one place where its secret
option values are masked: the catalog keeps them (agents need them) but no answer, listing or
frontend ever shows them."""

from __future__ import annotations

from streamctl.catalog.rows import (
    SinkRow,
)
from streamctl.domain import inline
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.listing import listing
from streamctl.domain.paths import confine_sink_options
from streamctl.domain.validate import checked_kind as _kind
from streamctl.domain.validate import checked_name as _name
from streamctl.domain.validate import checked_schema as _schema
from streamctl.domain.validate import connector_options as _options
from streamctl.domain.validate import not_found as _not_found
from streamctl.error_codes import ErrorCode
from streamctl.nes_types import SINK_TYPES
from streamctl.planner.options import (
    normalize_sink_options,
    redact,
)
from streamctl.protocol import answers
from streamctl.protocol import messages as m


def sink_json(row: SinkRow) -> answers.Sink:
    return {
        "name": row.name,
        "schema": row.schema,
        "type": row.type,
        "config": redact(row.type, row.config),
        "created_version": row.created_version,
    }


def create_sink(ctx: PassContext, request: m.CreateSink) -> answers.Sink:
    name = _name(request.name, "sink name")
    schema = _schema(request.schema)
    sink_type = _kind(request.type, SINK_TYPES, "sink")
    if ctx.view.sinks.get(name) is not None:
        raise RequestFailed(ErrorCode.ALREADY_EXISTS, f"sink {name!r} already exists")
    options = confine_sink_options(
        sink_type,
        _options(normalize_sink_options, sink_type, request.config),
        f"the {sink_type} sink {name!r}: its",
    )
    row = SinkRow(
        name=name,
        schema=schema,
        type=sink_type,
        config=options,
        created_version=ctx.view.version,
        updated_version=ctx.view.version,
    )
    ctx.view.sinks.add(row)
    ctx.record("sink", name, "create", "CreateSink")
    return sink_json(row)


def drop_sink(ctx: PassContext, request: m.DropSink) -> answers.SinkDropped:
    row = ctx.view.sinks.get(request.name)
    if row is None:
        raise _not_found("sink", request.name)
    inline.refuse_drop(f"sink {row.name!r}", row.name)
    queries = ctx.view.queries_writing(row.name)
    if queries and not request.cascade:
        raise RequestFailed(
            ErrorCode.HAS_DEPENDENTS,
            f"sink {row.name!r} is written by {len(queries)} query(ies); "
            "drop them first or ask for CASCADE",
        )
    dropped = queries_stage.drop_queries(ctx, queries, f"CASCADE from sink {row.name!r}")
    ctx.view.sinks.remove(row.name)
    ctx.record("sink", row.name, "drop", "DropSink")
    return {"sinks": [row.name], "queries": dropped}


def get_sink(ctx: PassContext, request: m.GetSink) -> answers.Sink:
    row = ctx.view.sinks.get(request.name)
    if row is None:
        raise _not_found("sink", request.name)
    return sink_json(row)


def list_sinks(ctx: PassContext, request: m.ListSinks) -> list[answers.Sink] | answers.Page:
    return listing(ctx.view.sinks, request.limit, request.after, sink_json, request.kind)
