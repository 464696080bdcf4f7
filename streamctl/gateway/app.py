"""The gateway application: its settings, its assembly (error handlers, auth, routes, the
OpenAPI document) and :func:`serve`, which runs it."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from streamctl.client.client import CoordinatorClient
from streamctl.gateway.auth import BearerAuth
from streamctl.gateway.bodies import Health
from streamctl.gateway.problems import PROBLEM_MEDIA_TYPE, install_error_handlers
from streamctl.gateway.routes import v1_router
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID

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
    install_error_handlers(app)
    if settings.token is not None:
        app.add_middleware(BearerAuth, token=settings.token)
    app.include_router(v1_router(documented_auth=settings.token is not None))

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
