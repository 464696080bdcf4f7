"""The gateway's errors: every error is an RFC 9457 problem (``application/problem+json``)
whose ``code`` is the coordinator's error code or the gateway's own."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi import Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamctl.client.coordinator_errors import ClientError, CoordinatorError
from streamctl.error_codes import ErrorCode

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

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


_UNPARSABLE_BODY = "There was an error parsing the body"
"""FastAPI's detail for a body its JSON parser raised on other than a syntax error."""


def install_error_handlers(app: FastAPI) -> None:
    async def on_validation(request: HttpRequest, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        items = _field_problems(error, request.headers.get("content-type", ""))
        detail = "the request does not validate: " + "; ".join(map(_describe, items))
        return problem(422, ErrorCode.INVALID_REQUEST, detail, errors=items)

    async def on_http(request: HttpRequest, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        phrase = HTTPStatus(error.status_code).phrase
        detail = str(error.detail)
        if error.status_code == 400 and detail == _UNPARSABLE_BODY:
            # FastAPI's answer to a body its JSON parser gave up on other than by a syntax
            # error (nested past the parser's recursion, an integer of thousands of digits):
            # a body that does not validate, as documented.
            reason = "it nests too deeply or holds a number too long to read"
            items = [{"pointer": "#", "detail": f"the body cannot be read as JSON: {reason}"}]
            detail = "the request does not validate: " + "; ".join(map(_describe, items))
            return problem(422, ErrorCode.INVALID_REQUEST, detail, errors=items)
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
