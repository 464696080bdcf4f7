"""The gateway's bearer token: checked before routing, declared in the OpenAPI document."""

from __future__ import annotations

import secrets

from fastapi.security import HTTPBearer
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from streamctl.gateway.problems import UNAUTHORIZED, problem

OPEN_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
"""Paths served without a token: liveness and the API's own description."""


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


bearer_doc = HTTPBearer(
    auto_error=False,
    description="The gateway's token (--token or STREAMCTL_GATEWAY_TOKEN).",
)
"""Declares the scheme in the OpenAPI document; :class:`BearerAuth` does the checking."""
