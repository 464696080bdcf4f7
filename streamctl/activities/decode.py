"""Turning wire envelopes into typed messages, with errors that name the problem.

The workflow hands bodies through untouched; this is where a body meets its class. Every
failure becomes a :class:`DecodeError` with an error code, so a malformed request is answered
with that code and never raises further.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from pydantic import TypeAdapter, ValidationError

from streamctl.compact_json import dumps_bytes
from streamctl.workflows import messages as m
from streamctl.workflows.messages import ErrorCode

MAX_REQUEST_BYTES = 256 * 1024
"""A single request's encoded body may not be larger than this."""


class DecodeError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_adapters: dict[str, TypeAdapter[Any]] = {}
_field_names: dict[type[m.Message], frozenset[str]] = {}


def _adapter(cls: type[m.Message]) -> TypeAdapter[Any]:
    """Building a TypeAdapter costs milliseconds; build one per message class, once."""
    key = f"{cls.__module__}.{cls.__qualname__}"
    adapter = _adapters.get(key)
    if adapter is None:
        adapter = _adapters[key] = TypeAdapter(cls)
    return adapter


def prepare() -> None:
    """Build every message class's adapter now (a process that will decode pays it up
    front, not in its first pass)."""
    for cls in (*m.REQUEST_TYPES.values(), *m.EVENT_TYPES.values()):
        _adapter(cls)
        _allowed_fields(cls)


def _allowed_fields(cls: type[m.Message]) -> frozenset[str]:
    """``dataclasses.fields`` is slow enough to matter once per request; ask once per class."""
    names = _field_names.get(cls)
    if names is None:
        names = _field_names[cls] = frozenset(f.name for f in fields(cls))
    return names


def body_size(body: Any) -> int:
    return len(dumps_bytes(body))


def decode(envelope: m.Envelope, types: dict[str, type[m.Message]], size: int) -> m.Message:
    """The typed message of ``envelope``, or :class:`DecodeError`.

    ``size`` is the body's size as the workflow measured it when the message arrived; the pass
    does not serialize every body again just to check the limit.
    """
    kind = envelope.kind
    cls = types.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(sorted(types))
        raise DecodeError(ErrorCode.UNKNOWN_KIND, f"unknown message kind {kind!r}; known: {known}")
    if envelope.v != m.MESSAGE_VERSION:
        raise DecodeError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"{kind} version {envelope.v!r} is not supported (this coordinator speaks "
            f"version {m.MESSAGE_VERSION})",
        )
    body = envelope.body
    if not isinstance(body, dict):
        raise DecodeError(ErrorCode.INVALID_REQUEST, f"{kind} body must be an object")
    if size > MAX_REQUEST_BYTES:
        raise DecodeError(
            ErrorCode.TOO_LARGE,
            f"{kind} is {size} bytes; the limit for one request is {MAX_REQUEST_BYTES} bytes",
        )
    allowed = _allowed_fields(cls)
    unknown = sorted(body.keys() - allowed)
    if unknown:
        raise DecodeError(
            ErrorCode.INVALID_REQUEST,
            f"{kind} has unknown field(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed)) or 'none'}",
        )
    try:
        message: m.Message = _adapter(cls).validate_python(body, strict=False)
    except ValidationError as error:
        problems = "; ".join(
            f"field '{'.'.join(str(part) for part in issue['loc'])}': {issue['msg']}"
            for issue in error.errors()[:5]
        )
        raise DecodeError(ErrorCode.INVALID_REQUEST, f"{kind}: {problems}") from None
    return message
