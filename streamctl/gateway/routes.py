"""The gateway's ``/v1`` routes: one HTTP call, one typed request to the coordinator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Security
from fastapi import Request as HttpRequest
from fastapi import Response as HttpResponse

from streamctl.client.client import CoordinatorClient
from streamctl.gateway.auth import bearer_doc
from streamctl.gateway.bodies import (
    ColumnSpec,
    LogicalSourceSpec,
    PhysicalSourceSpec,
    Problem,
    QuerySpec,
    SinkSpec,
    StatementSpec,
)
from streamctl.limits import MAX_PAGE_ROWS
from streamctl.protocol import answers as a
from streamctl.protocol import messages as m


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI declarations of a route's error responses (401, 422, 500, 503 always)."""
    declared = sorted({401, 422, 500, 503, *statuses})
    return {
        status: {"model": Problem, "description": HTTPStatus(status).phrase} for status in declared
    }


PageLimit = Annotated[
    int | None,
    Query(
        ge=1,
        le=MAX_PAGE_ROWS,
        description="Answer one page of at most this many items, in key order; the Link "
        'header (rel="next") names the next page while there is one.',
    ),
]
NameAfter = Annotated[
    str | None,
    Query(description="With limit: the page after this name (the last of the page before)."),
]
IdAfter = Annotated[
    int | None,
    Query(description="With limit: the page after this id (the last of the page before)."),
]


@dataclass(frozen=True)
class _Paging:
    """The ``?limit`` and ``?after`` of a collection's GET, and the HTTP exchange they page."""

    request: HttpRequest
    response: HttpResponse
    limit: int | None
    after: Any
    """A name (NamePaging) or an id (IdPaging), as the listing's key is."""

    async def answer(self, client: CoordinatorClient, listing: m.Request) -> Any:
        """The listing's answer: the whole list, or with ``limit`` one page's items and a
        ``Link: <...>; rel="next"`` header while more follow (RFC 8288)."""
        answer = await client.ask(listing)
        if self.limit is None:
            return answer
        if answer["next"] is not None:
            following = self.request.url.include_query_params(after=answer["next"])
            self.response.headers["Link"] = f'<{following}>; rel="next"'
        return answer["items"]


def _name_paging(
    request: HttpRequest, response: HttpResponse, limit: PageLimit = None, after: NameAfter = None
) -> _Paging:
    return _Paging(request, response, limit, after)


def _id_paging(
    request: HttpRequest, response: HttpResponse, limit: PageLimit = None, after: IdAfter = None
) -> _Paging:
    return _Paging(request, response, limit, after)


NamePaging = Annotated[_Paging, Depends(_name_paging)]
IdPaging = Annotated[_Paging, Depends(_id_paging)]


def _client(request: HttpRequest) -> CoordinatorClient:
    client: CoordinatorClient = request.app.state.client
    return client


Client = Annotated[CoordinatorClient, Depends(_client)]
Cascade = Annotated[
    bool, Query(description="Also drop (and stop) what depends on it, as SQL's CASCADE.")
]
Name = Annotated[str, Path(description="The entity's name.")]
Id = Annotated[int, Path(description="The entity's id.")]


def _columns(columns: Sequence[ColumnSpec]) -> tuple[m.ColumnSpec, ...]:
    return tuple(m.ColumnSpec(c.name, c.type, c.nullable) for c in columns)


def _created(request: HttpRequest, response: HttpResponse, route: str, **key: Any) -> None:
    response.headers["Location"] = str(request.url_for(route, **key))


def v1_router(documented_auth: bool) -> APIRouter:
    router = APIRouter(
        prefix="/v1",
        dependencies=[Security(bearer_doc)] if documented_auth else [],
    )

    @router.post(
        "/statements",
        response_model=a.StatementResults,
        responses=_problems(404, 409, 413),
        tags=["statements"],
    )
    async def execute_statement(spec: StatementSpec, client: Client) -> Any:
        """Run NebulaStream statements in order (``ExecuteStatement``); the first one that fails
        stops the rest, and the problem says how many before it were applied."""
        return await client.ask(m.ExecuteStatement(spec.text, spec.limit, spec.after))

    # --- logical sources
    @router.post(
        "/logical-sources",
        status_code=201,
        response_model=a.LogicalSource,
        responses=_problems(409, 413),
        tags=["logical sources"],
    )
    async def create_logical_source(
        spec: LogicalSourceSpec, client: Client, request: HttpRequest, response: HttpResponse
    ) -> Any:
        result = await client.ask(m.CreateLogicalSource(spec.name, _columns(spec.columns)))
        _created(request, response, "get_logical_source", name=result["name"])
        return result

    @router.get(
        "/logical-sources",
        response_model=list[a.LogicalSource],
        responses=_problems(),
        tags=["logical sources"],
    )
    async def list_logical_sources(client: Client, page: NamePaging) -> Any:
        return await page.answer(client, m.ListLogicalSources(page.limit, page.after))

    @router.get(
        "/logical-sources/{name}",
        response_model=a.LogicalSource,
        responses=_problems(404),
        tags=["logical sources"],
    )
    async def get_logical_source(name: Name, client: Client) -> Any:
        return await client.ask(m.GetLogicalSource(name))

    @router.delete(
        "/logical-sources/{name}",
        response_model=a.LogicalSourceDropped,
        responses=_problems(404, 409),
        tags=["logical sources"],
    )
    async def drop_logical_source(name: Name, client: Client, cascade: Cascade = False) -> Any:
        return await client.ask(m.DropLogicalSource(name, cascade))

    # --- physical sources
    @router.post(
        "/physical-sources",
        status_code=201,
        response_model=a.PhysicalSource,
        responses=_problems(404, 409, 413),
        tags=["physical sources"],
    )
    async def create_physical_source(
        spec: PhysicalSourceSpec, client: Client, request: HttpRequest, response: HttpResponse
    ) -> Any:
        result = await client.ask(
            m.CreatePhysicalSource(spec.logical_source, spec.type, spec.config, spec.worker)
        )
        _created(request, response, "get_physical_source", id=result["id"])
        return result

    @router.get(
        "/physical-sources",
        response_model=list[a.PhysicalSource],
        responses=_problems(),
        tags=["physical sources"],
    )
    async def list_physical_sources(
        client: Client,
        page: IdPaging,
        logical_source: Annotated[
            str | None, Query(description="Only the physical sources of this logical source.")
        ] = None,
    ) -> Any:
        listing = m.ListPhysicalSources(logical_source, page.limit, page.after)
        return await page.answer(client, listing)

    @router.get(
        "/physical-sources/{id}",
        response_model=a.PhysicalSource,
        responses=_problems(404),
        tags=["physical sources"],
    )
    async def get_physical_source(id: Id, client: Client) -> Any:
        return await client.ask(m.GetPhysicalSource(id))

    @router.delete(
        "/physical-sources/{id}",
        response_model=a.PhysicalSourceDropped,
        responses=_problems(404, 409),
        tags=["physical sources"],
    )
    async def drop_physical_source(id: Id, client: Client, cascade: Cascade = False) -> Any:
        return await client.ask(m.DropPhysicalSource(id, cascade))

    # --- sinks
    @router.post(
        "/sinks",
        status_code=201,
        response_model=a.Sink,
        responses=_problems(409, 413),
        tags=["sinks"],
    )
    async def create_sink(
        spec: SinkSpec, client: Client, request: HttpRequest, response: HttpResponse
    ) -> Any:
        result = await client.ask(
            m.CreateSink(spec.name, _columns(spec.columns), spec.type, spec.config)
        )
        _created(request, response, "get_sink", name=result["name"])
        return result

    @router.get("/sinks", response_model=list[a.Sink], responses=_problems(), tags=["sinks"])
    async def list_sinks(client: Client, page: NamePaging) -> Any:
        return await page.answer(client, m.ListSinks(page.limit, page.after))

    @router.get("/sinks/{name}", response_model=a.Sink, responses=_problems(404), tags=["sinks"])
    async def get_sink(name: Name, client: Client) -> Any:
        return await client.ask(m.GetSink(name))

    @router.delete(
        "/sinks/{name}", response_model=a.SinkDropped, responses=_problems(404, 409), tags=["sinks"]
    )
    async def drop_sink(name: Name, client: Client, cascade: Cascade = False) -> Any:
        return await client.ask(m.DropSink(name, cascade))

    # --- queries
    @router.post(
        "/queries",
        status_code=201,
        response_model=a.Query,
        responses=_problems(404, 409, 413),
        tags=["queries"],
    )
    async def create_query(
        spec: QuerySpec, client: Client, request: HttpRequest, response: HttpResponse
    ) -> Any:
        """Create a query and start it as soon as an agent has room."""
        result = await client.ask(m.CreateQuery(spec.statement, spec.sink))
        _created(request, response, "get_query", id=result["id"])
        return result

    @router.get("/queries", response_model=list[a.Query], responses=_problems(), tags=["queries"])
    async def list_queries(client: Client, page: IdPaging) -> Any:
        return await page.answer(client, m.ListQueries(page.limit, page.after))

    @router.get(
        "/queries/{id}", response_model=a.QueryDetail, responses=_problems(404), tags=["queries"]
    )
    async def get_query(id: Id, client: Client) -> Any:
        return await client.ask(m.GetQuery(id))

    @router.post(
        "/queries/{id}/start",
        response_model=a.Query,
        responses=_problems(404),
        tags=["queries"],
    )
    async def start_query(id: Id, client: Client) -> Any:
        """Start a stopped, finished or failed query again (503 ``UNAVAILABLE`` when no agent
        has room now)."""
        return await client.ask(m.StartQuery(id))

    @router.post(
        "/queries/{id}/stop", response_model=a.Query, responses=_problems(404), tags=["queries"]
    )
    async def stop_query(id: Id, client: Client) -> Any:
        """Stop a query; it keeps its checkpoint and can start again."""
        return await client.ask(m.StopQuery(id))

    @router.delete(
        "/queries/{id}", response_model=a.QueryDropped, responses=_problems(404), tags=["queries"]
    )
    async def drop_query(id: Id, client: Client) -> Any:
        """Stop the query if it runs and remove it from the catalog."""
        return await client.ask(m.DropQuery(id))

    # --- workers
    @router.get("/workers", response_model=list[a.Worker], responses=_problems(), tags=["workers"])
    async def list_workers(client: Client, page: NamePaging) -> Any:
        return await page.answer(client, m.ListWorkers(page.limit, page.after))

    @router.get(
        "/workers/{name}", response_model=a.Worker, responses=_problems(404), tags=["workers"]
    )
    async def get_worker(name: Name, client: Client) -> Any:
        return await client.ask(m.GetWorker(name))

    @router.post(
        "/workers/{name}/drain", response_model=a.Worker, responses=_problems(404), tags=["workers"]
    )
    async def drain_worker(name: Name, client: Client) -> Any:
        """Place no new queries on this worker."""
        return await client.ask(m.DrainWorker(name))

    # --- operations
    @router.post(
        "/reoptimize", response_model=a.ReoptimizeResult, responses=_problems(), tags=["operations"]
    )
    async def reoptimize(client: Client) -> Any:
        """Restart retryable failed queries, move queries off lagging or SUSPECT agents and
        rebalance now; answers the decisions and their reasons."""
        return await client.ask(m.Reoptimize())

    @router.get(
        "/changes", response_model=list[a.Change], responses=_problems(), tags=["operations"]
    )
    async def list_changes(
        client: Client,
        entity: Annotated[str | None, Query(description="Only changes of this entity.")] = None,
        key: Annotated[str | None, Query(description="Only changes of this key.")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000, description="The newest N.")] = 100,
    ) -> Any:
        """The changelog: what changed and why, oldest of the newest ``limit`` first."""
        return await client.ask(m.ListChanges(entity, key, limit))

    @router.get(
        "/quarantine",
        response_model=list[a.QuarantinedMessage],
        responses=_problems(),
        tags=["operations"],
    )
    async def list_quarantined(
        client: Client,
        limit: Annotated[int, Query(ge=1, le=1000, description="The newest N.")] = 100,
    ) -> Any:
        """Messages the coordinator set aside because applying them failed, oldest of the
        newest ``limit`` first."""
        return await client.ask(m.ListQuarantined(limit))

    return router
