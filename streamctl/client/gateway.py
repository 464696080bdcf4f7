"""The REST gateway (``streamctl gateway``): the coordinator's requests and statements over HTTP.

Protocol
--------
A FastAPI application; the OpenAPI document is served at ``/openapi.json`` and rendered at
``/docs``. Every route under ``/v1`` turns one HTTP call into one typed request of
:mod:`streamctl.workflows.messages` and answers the coordinator's result as JSON:

=======================================  ======================================  ============
route                                    request                                 success
=======================================  ======================================  ============
``POST /v1/statements`` ``{"text"}``     ``ExecuteStatement``                    200
``POST /v1/logical-sources``             ``CreateLogicalSource``                 201
``GET /v1/logical-sources[/{name}]``     ``ListLogicalSources``/``Get...``       200
``DELETE /v1/logical-sources/{name}``    ``DropLogicalSource`` (``?cascade``)    200
``POST /v1/physical-sources``            ``CreatePhysicalSource``                201
``GET /v1/physical-sources[/{id}]``      ``ListPhysicalSources`` (``?logical_source``)/``Get``
``DELETE /v1/physical-sources/{id}``     ``DropPhysicalSource`` (``?cascade``)   200
``POST /v1/sinks``, ``GET``, ``DELETE``  ``CreateSink``, ``List/GetSink``, ``DropSink``
``POST /v1/queries`` ``{"statement"}``   ``CreateQuery``                         201
``GET /v1/queries[/{id}]``               ``ListQueries``/``GetQuery``            200
``POST /v1/queries/{id}/start|stop``     ``StartQuery``/``StopQuery``            200
``DELETE /v1/queries/{id}``              ``DropQuery``                           200
``GET /v1/workers[/{name}]``             ``ListWorkers``/``GetWorker``           200
``GET /healthz``                         none: the gateway process is up         200
=======================================  ======================================  ============

A create answers ``201 Created`` with a ``Location`` header naming the new item.

Auth
----
Every route except ``/healthz`` and the OpenAPI document (``/openapi.json``, ``/docs``) needs
``Authorization: Bearer <token>``, the token given by ``--token`` or
``STREAMCTL_GATEWAY_TOKEN``. The check runs before routing and before the body is read, so a
caller without the token learns nothing (not even which routes exist): a missing or wrong token
is ``401`` with ``WWW-Authenticate: Bearer``. Without a token the gateway refuses to start,
unless ``--insecure-no-auth`` is given, and then it listens on a loopback address only.

Errors
------
Every error is an RFC 9457 problem, ``Content-Type: application/problem+json``::

    {"type": "about:blank", "title": "Not Found", "status": 404,
     "detail": "sink 'out' does not exist", "code": "NOT_FOUND"}

``code`` is what clients switch on: the coordinator's error code (``streamctl.client.errors``)
for refusals, ``INVALID_REQUEST`` for a body or parameter that does not validate (with
``errors``: one entry per field, a JSON pointer into the body or the parameter's name),
``UNAUTHORIZED``, ``COORDINATOR_UNAVAILABLE`` (503: Temporal or the coordinator workflow did
not answer in time), ``INTERNAL`` (500) and the HTTP status name for routing errors
(``NOT_FOUND``, ``METHOD_NOT_ALLOWED``). Coordinator codes map onto statuses by
:data:`STATUS_OF_CODE`; any code not listed there (invalid names, schemas, statements and
the planner's codes) is 422.

Guarantees
----------
* The gateway only formulates messages: it never opens the catalog, never parses statements
  and checks only the JSON shape of a body. Whatever the coordinator checks (names, types,
  connector options, statements) it refuses with its own code, which the problem carries.
* One :class:`~streamctl.client.client.CoordinatorClient` per gateway process, connected at
  startup and closed at shutdown, so concurrent HTTP calls are coalesced into few Temporal
  updates exactly like any other client's; a request id is never reused, so an HTTP call is
  applied at most once.
* Result fields the coordinator adds later pass through (the response models allow extra
  fields); the documented ones are always there.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Security
from fastapi import Request as HttpRequest
from fastapi import Response as HttpResponse
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from streamctl.client.client import CoordinatorClient
from streamctl.client.errors import ClientError, CoordinatorError
from streamctl.workflows import messages as m
from streamctl.workflows.coordinator import COORDINATOR_WORKFLOW_ID
from streamctl.workflows.messages import ErrorCode

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
OPEN_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
"""Paths served without a token: liveness and the API's own description."""

COORDINATOR_UNAVAILABLE = "COORDINATOR_UNAVAILABLE"
UNAUTHORIZED = "UNAUTHORIZED"

STATUS_OF_CODE: dict[str, int] = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.HAS_DEPENDENTS: 409,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}
"""HTTP status of a coordinator error code; every other code is a request the coordinator
understood and refused as invalid: 422."""


API_DESCRIPTION = """\
Every call under `/v1` is one request to the streamctl coordinator; the coordinator checks it
and answers. Send `Authorization: Bearer <token>`. Errors are RFC 9457 problems
(`application/problem+json`) whose `code` is the coordinator's error code
(`NOT_FOUND`, `ALREADY_EXISTS`, `HAS_DEPENDENTS`, `INVALID_NAME`, `SYNTAX_ERROR`, ...) or
`INVALID_REQUEST` (the body or a parameter does not validate; `errors` names the fields),
`UNAUTHORIZED`, `COORDINATOR_UNAVAILABLE`, `INTERNAL`.
"""


class GatewayRefused(Exception):
    """The gateway will not start with these settings (the message says why and what to do)."""


@dataclass(frozen=True)
class GatewaySettings:
    address: str
    namespace: str = "default"
    workflow_id: str = COORDINATOR_WORKFLOW_ID
    token: str | None = None
    """None serves without auth: only :func:`serve` with ``insecure_no_auth`` passes that."""
    request_timeout: float = 30.0
    """How long one call waits for the coordinator before a 503 (the client's own default is
    minutes, far longer than an HTTP caller waits)."""


# --- models: what the OpenAPI document describes ---------------------------------------------


class _Body(BaseModel):
    """A request body: unknown fields are a mistake of the caller, refused with their name."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _Result(BaseModel):
    """A coordinator result: fields it adds later pass through."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Column(BaseModel):
    name: str
    type: str = Field(description="NebulaStream type name, e.g. UINT64, INT32, FLOAT64, VARSIZED")
    nullable: bool = True


class StatementSpec(_Body):
    text: str = Field(description="NebulaStream statements, separated by ';'.")


class StatementOutcome(_Result):
    statement: str = Field(description="What ran, e.g. 'CREATE SINK' or 'SHOW QUERIES'.")
    line: int
    column: int
    result: Any = Field(description="The result of the request the statement stands for.")


class StatementResults(_Result):
    statements: list[StatementOutcome]


class LogicalSourceSpec(_Body):
    name: str
    columns: list[Column] = Field(alias="schema")


class LogicalSource(_Result):
    name: str
    columns: list[Column] = Field(alias="schema")
    created_version: int


class LogicalSourceDropped(_Result):
    logical_sources: list[str]
    physical_sources: list[int]
    queries: list[int]


class PhysicalSourceSpec(_Body):
    logical_source: str
    type: str = Field(description="Connector type, e.g. File, TCP, Generator.")
    config: dict[str, Any] = Field(default_factory=dict)
    worker: str | None = Field(default=None, description="Pin the source to this worker.")


class PhysicalSource(_Result):
    id: int
    logical_source: str
    type: str
    config: dict[str, Any]
    worker: str | None
    created_version: int


class PhysicalSourceDropped(_Result):
    physical_sources: list[int]


class SinkSpec(_Body):
    name: str
    columns: list[Column] = Field(alias="schema")
    type: str = Field(description="Connector type, e.g. File, Print, Void, Checksum.")
    config: dict[str, Any] = Field(default_factory=dict)


class Sink(_Result):
    name: str
    columns: list[Column] = Field(alias="schema")
    type: str
    config: dict[str, Any]
    created_version: int


class SinkDropped(_Result):
    sinks: list[str]
    queries: list[int]


class QuerySpec(_Body):
    statement: str = Field(description="SELECT ... INTO sink, in the NebulaStream dialect.")
    sink: str | None = Field(default=None, description="Must match the statement's INTO.")


class QueryInfo(_Result):
    id: int
    statement: str
    sink: str
    desired_state: str
    current_state: str
    worker: str | None
    error: str | None
    run: int
    restarts: int
    retry_at: float | None
    statistics: dict[str, Any] | None
    statistics_at: float | None
    created_version: int


class QueryDetail(QueryInfo):
    sources: list[str]
    plan: str


class QueryDropped(_Result):
    queries: list[int]


class Worker(_Result):
    name: str
    state: str
    capacity: int
    load: int
    task_queue: str
    address: str
    draining: bool
    last_heartbeat_at: float
    heartbeats: int
    created_version: int


class Change(_Result):
    version: int = Field(description="The snapshot version that made the change.")
    seq: int
    entity: str
    key: str
    action: str
    reason: str
    message_id: str


class QuarantinedMessage(_Result):
    reference: str = Field(description="Named by the message's error answer and the log.")
    message_id: str
    kind: str
    version: int = Field(description="The snapshot version when it was set aside.")
    error: str
    body: str = Field(description="The message as it was kept (cut to 2,000 characters).")
    created_at: float


class Decision(_Result):
    query: int
    reason: str
    restart: str | None = Field(None, description="The agent a failed query restarts on.")
    move: dict[str, str] | None = Field(None, description="``from`` and ``to`` agents.")


class ReoptimizeResult(_Result):
    decisions: list[Decision]


class Health(BaseModel):
    status: str


class FieldProblem(BaseModel):
    """One field that did not validate: ``pointer`` into the body, or ``parameter`` ``in``
    the path, query or a header."""

    detail: str
    pointer: str | None = None
    parameter: str | None = None
    location: str | None = Field(default=None, alias="in")


class Problem(BaseModel):
    """An RFC 9457 problem; ``code`` is the stable error code."""

    type: str = Field(description="Always about:blank: ``code`` says which problem it is.")
    title: str = Field(description="The HTTP status phrase.")
    status: int
    detail: str = Field(description="What went wrong, readable.")
    code: str = Field(description="The coordinator's error code, or the gateway's own.")
    errors: list[FieldProblem] = Field(
        default_factory=list, description="The fields that did not validate (422 only)."
    )


# --- problems --------------------------------------------------------------------------------


def problem(
    status: int,
    code: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    errors: Sequence[dict[str, Any]] = (),
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = list(errors)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


def _pointer(path: Sequence[Any]) -> str:
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _field_problems(error: RequestValidationError, content_type: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for entry in error.errors():
        where, *path = entry.get("loc", ("body",))
        message = str(entry.get("msg", "invalid"))
        if entry.get("type") == "json_invalid":
            reason = (entry.get("ctx") or {}).get("error", "")
            position = path[0] if path else "?"
            items.append(
                {"pointer": "#", "detail": f"invalid JSON at position {position}: {reason}"}
            )
        elif where == "body":
            if not path and "json" not in content_type:
                message = f"{message} (send a JSON object with Content-Type: application/json)"
            items.append({"pointer": _pointer(path), "detail": message})
        else:
            items.append({"parameter": ".".join(map(str, path)), "in": where, "detail": message})
    return items


def _describe(item: dict[str, Any]) -> str:
    where = item.get("parameter") or item.get("pointer", "#")
    return f"{where}: {item['detail']}"


def _install_error_handlers(app: FastAPI) -> None:
    async def on_validation(request: HttpRequest, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        items = _field_problems(error, request.headers.get("content-type", ""))
        detail = "the request does not validate: " + "; ".join(map(_describe, items))
        return problem(422, ErrorCode.INVALID_REQUEST, detail, errors=items)

    async def on_http(request: HttpRequest, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        phrase = HTTPStatus(error.status_code).phrase
        detail = str(error.detail)
        if detail == phrase:
            detail = f"{request.method} {request.url.path}: {phrase}"
        code = HTTPStatus(error.status_code).name
        return problem(error.status_code, code, detail, headers=error.headers)

    async def on_refusal(_request: HttpRequest, error: Exception) -> JSONResponse:
        assert isinstance(error, CoordinatorError)
        return problem(STATUS_OF_CODE.get(error.code, 422), error.code, error.message)

    async def on_client_error(_request: HttpRequest, error: Exception) -> JSONResponse:
        return problem(503, COORDINATOR_UNAVAILABLE, f"the coordinator did not answer: {error}")

    async def on_crash(request: HttpRequest, error: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=error)
        return problem(500, ErrorCode.INTERNAL, "the gateway failed on this request; see its log")

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(CoordinatorError, on_refusal)
    app.add_exception_handler(ClientError, on_client_error)
    app.add_exception_handler(Exception, on_crash)


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI declarations of a route's error responses (401, 422, 500, 503 always)."""
    declared = sorted({401, 422, 500, 503, *statuses})
    return {
        status: {"model": Problem, "description": HTTPStatus(status).phrase} for status in declared
    }


# --- auth ------------------------------------------------------------------------------------


class BearerAuth:
    """ASGI middleware: every path but :data:`OPEN_PATHS` needs the bearer token.

    A middleware rather than a route dependency so that the check comes first: FastAPI reads
    and parses a body before it runs dependencies, which would answer 422 to a caller without
    a token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        scheme, _, credentials = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            response = problem(
                401,
                UNAUTHORIZED,
                "this route needs a bearer token: send 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": 'Bearer realm="streamctl"'},
            )
        elif not secrets.compare_digest(credentials.strip().encode(), self.token):
            response = problem(
                401,
                UNAUTHORIZED,
                "the bearer token is not valid",
                headers={"WWW-Authenticate": 'Bearer realm="streamctl", error="invalid_token"'},
            )
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


_bearer_doc = HTTPBearer(
    auto_error=False,
    description="The gateway's token (--token or STREAMCTL_GATEWAY_TOKEN).",
)
"""Declares the scheme in the OpenAPI document; :class:`BearerAuth` does the checking."""


# --- routes ----------------------------------------------------------------------------------


def _client(request: HttpRequest) -> CoordinatorClient:
    client: CoordinatorClient = request.app.state.client
    return client


Client = Annotated[CoordinatorClient, Depends(_client)]
Cascade = Annotated[
    bool, Query(description="Also drop (and stop) what depends on it, as SQL's CASCADE.")
]
Name = Annotated[str, Path(description="The entity's name.")]
Id = Annotated[int, Path(description="The entity's id.")]


def _columns(columns: Sequence[Column]) -> tuple[m.ColumnSpec, ...]:
    return tuple(m.ColumnSpec(c.name, c.type, c.nullable) for c in columns)


def _created(request: HttpRequest, response: HttpResponse, route: str, **key: Any) -> None:
    response.headers["Location"] = str(request.url_for(route, **key))


def _v1_router(documented_auth: bool) -> APIRouter:
    router = APIRouter(
        prefix="/v1",
        dependencies=[Security(_bearer_doc)] if documented_auth else [],
    )

    @router.post(
        "/statements",
        response_model=StatementResults,
        responses=_problems(404, 409, 413),
        tags=["statements"],
    )
    async def execute_statement(spec: StatementSpec, client: Client) -> Any:
        """Run NebulaStream statements in order (``ExecuteStatement``); the first one that fails
        stops the rest, and the problem says how many before it were applied."""
        return await client.ask(m.ExecuteStatement(spec.text))

    # --- logical sources
    @router.post(
        "/logical-sources",
        status_code=201,
        response_model=LogicalSource,
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
        response_model=list[LogicalSource],
        responses=_problems(),
        tags=["logical sources"],
    )
    async def list_logical_sources(client: Client) -> Any:
        return await client.ask(m.ListLogicalSources())

    @router.get(
        "/logical-sources/{name}",
        response_model=LogicalSource,
        responses=_problems(404),
        tags=["logical sources"],
    )
    async def get_logical_source(name: Name, client: Client) -> Any:
        return await client.ask(m.GetLogicalSource(name))

    @router.delete(
        "/logical-sources/{name}",
        response_model=LogicalSourceDropped,
        responses=_problems(404, 409),
        tags=["logical sources"],
    )
    async def drop_logical_source(name: Name, client: Client, cascade: Cascade = False) -> Any:
        return await client.ask(m.DropLogicalSource(name, cascade))

    # --- physical sources
    @router.post(
        "/physical-sources",
        status_code=201,
        response_model=PhysicalSource,
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
        response_model=list[PhysicalSource],
        responses=_problems(),
        tags=["physical sources"],
    )
    async def list_physical_sources(
        client: Client,
        logical_source: Annotated[
            str | None, Query(description="Only the physical sources of this logical source.")
        ] = None,
    ) -> Any:
        return await client.ask(m.ListPhysicalSources(logical_source))

    @router.get(
        "/physical-sources/{id}",
        response_model=PhysicalSource,
        responses=_problems(404),
        tags=["physical sources"],
    )
    async def get_physical_source(id: Id, client: Client) -> Any:
        return await client.ask(m.GetPhysicalSource(id))

    @router.delete(
        "/physical-sources/{id}",
        response_model=PhysicalSourceDropped,
        responses=_problems(404, 409),
        tags=["physical sources"],
    )
    async def drop_physical_source(id: Id, client: Client, cascade: Cascade = False) -> Any:
        return await client.ask(m.DropPhysicalSource(id, cascade))

    # --- sinks
    @router.post(
        "/sinks",
        status_code=201,
        response_model=Sink,
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

    @router.get("/sinks", response_model=list[Sink], responses=_problems(), tags=["sinks"])
    async def list_sinks(client: Client) -> Any:
        return await client.ask(m.ListSinks())

    @router.get("/sinks/{name}", response_model=Sink, responses=_problems(404), tags=["sinks"])
    async def get_sink(name: Name, client: Client) -> Any:
        return await client.ask(m.GetSink(name))

    @router.delete(
        "/sinks/{name}", response_model=SinkDropped, responses=_problems(404, 409), tags=["sinks"]
    )
    async def drop_sink(name: Name, client: Client, cascade: Cascade = False) -> Any:
        return await client.ask(m.DropSink(name, cascade))

    # --- queries
    @router.post(
        "/queries",
        status_code=201,
        response_model=QueryInfo,
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

    @router.get("/queries", response_model=list[QueryInfo], responses=_problems(), tags=["queries"])
    async def list_queries(client: Client) -> Any:
        return await client.ask(m.ListQueries())

    @router.get(
        "/queries/{id}", response_model=QueryDetail, responses=_problems(404), tags=["queries"]
    )
    async def get_query(id: Id, client: Client) -> Any:
        return await client.ask(m.GetQuery(id))

    @router.post(
        "/queries/{id}/start",
        response_model=QueryInfo,
        responses=_problems(404),
        tags=["queries"],
    )
    async def start_query(id: Id, client: Client) -> Any:
        """Start a stopped, finished or failed query again (503 ``UNAVAILABLE`` when no agent
        has room now)."""
        return await client.ask(m.StartQuery(id))

    @router.post(
        "/queries/{id}/stop", response_model=QueryInfo, responses=_problems(404), tags=["queries"]
    )
    async def stop_query(id: Id, client: Client) -> Any:
        """Stop a query; it keeps its checkpoint and can start again."""
        return await client.ask(m.StopQuery(id))

    @router.delete(
        "/queries/{id}", response_model=QueryDropped, responses=_problems(404), tags=["queries"]
    )
    async def drop_query(id: Id, client: Client) -> Any:
        """Stop the query if it runs and remove it from the catalog."""
        return await client.ask(m.DropQuery(id))

    # --- workers
    @router.get("/workers", response_model=list[Worker], responses=_problems(), tags=["workers"])
    async def list_workers(client: Client) -> Any:
        return await client.ask(m.ListWorkers())

    @router.get(
        "/workers/{name}", response_model=Worker, responses=_problems(404), tags=["workers"]
    )
    async def get_worker(name: Name, client: Client) -> Any:
        return await client.ask(m.GetWorker(name))

    @router.post(
        "/workers/{name}/drain", response_model=Worker, responses=_problems(404), tags=["workers"]
    )
    async def drain_worker(name: Name, client: Client) -> Any:
        """Place no new queries on this worker."""
        return await client.ask(m.DrainWorker(name))

    # --- operations
    @router.post(
        "/reoptimize", response_model=ReoptimizeResult, responses=_problems(), tags=["operations"]
    )
    async def reoptimize(client: Client) -> Any:
        """Restart retryable failed queries, move queries off lagging or SUSPECT agents and
        rebalance now; answers the decisions and their reasons."""
        return await client.ask(m.Reoptimize())

    @router.get("/changes", response_model=list[Change], responses=_problems(), tags=["operations"])
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
        response_model=list[QuarantinedMessage],
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


# --- the application -------------------------------------------------------------------------


def _operation_id(route: APIRoute) -> str:
    return route.name


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with every error response under ``application/problem+json``
    (FastAPI files a response model under the route's own media type, ``application/json``)."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            separate_input_output_schemas=app.separate_input_output_schemas,
        )
        for path_item in document.get("paths", {}).values():
            for operation in path_item.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if status.isdigit() and int(status) >= 400 and "application/json" in content:
                        content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")
        app.openapi_schema = document
    return app.openapi_schema


def create_app(settings: GatewaySettings) -> FastAPI:
    """The gateway application; its coordinator client lives as long as the app runs."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = CoordinatorClient(
            settings.address,
            namespace=settings.namespace,
            workflow_id=settings.workflow_id,
            request_timeout=settings.request_timeout,
        )
        try:
            await client.connect()
        except Exception as error:
            await asyncio.to_thread(client.close, 0)
            raise GatewayRefused(
                f"cannot connect to Temporal at {settings.address}: {error}"
            ) from error
        app.state.client = client
        try:
            yield
        finally:
            await asyncio.to_thread(client.close)

    app = FastAPI(
        title="streamctl gateway",
        version="1",
        summary="The coordinator's requests and NebulaStream statements over HTTP.",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        redoc_url=None,
        separate_input_output_schemas=False,
        generate_unique_id_function=_operation_id,
    )
    _install_error_handlers(app)
    if settings.token is not None:
        app.add_middleware(BearerAuth, token=settings.token)
    app.include_router(_v1_router(documented_auth=settings.token is not None))

    @app.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> Health:
        """The gateway process is up (it does not ask the coordinator)."""
        return Health(status="ok")

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def checked_settings(
    settings: GatewaySettings, host: str, insecure_no_auth: bool
) -> GatewaySettings:
    """The settings the gateway may start with, or :class:`GatewayRefused` saying why not."""
    if settings.token is not None:
        return settings
    if not insecure_no_auth:
        raise GatewayRefused(
            "no bearer token: set STREAMCTL_GATEWAY_TOKEN (or --token), or pass "
            "--insecure-no-auth to serve without one on a loopback address"
        )
    if not _loopback(host):
        raise GatewayRefused(
            f"--insecure-no-auth serves on a loopback address only, not {host!r}: "
            "set a token to listen elsewhere"
        )
    return settings


def serve(settings: GatewaySettings, host: str, port: int, insecure_no_auth: bool) -> int:
    """Run the gateway with uvicorn until interrupted; the exit code of the process."""
    import uvicorn

    app = create_app(checked_settings(settings, host, insecure_no_auth))
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info"))
    server.run()
    return 0 if server.started else 3
