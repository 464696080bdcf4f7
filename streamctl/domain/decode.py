"""Turning wire envelopes into typed messages, with errors that name the problem.

The workflow hands bodies through untouched; this is where a body meets its class. Every
failure becomes a :class:`DecodeError` with an error code, so a malformed request is answered
with that code and never raises further.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from streamctl.catalog.fit import text_problem
from streamctl.compact_json import dumps_bytes
from streamctl.error_codes import ErrorCode
from streamctl.limits import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_NESTING_DEPTH,
    MAX_REQUEST_BYTES,
)
from streamctl.protocol import messages as m

__all__ = ["DecodeError", "body_size", "decode", "prepare"]

NARROW_INTEGER_FIELDS = frozenset({"capacity", "load", "count"})
"""Fields stored in 32-bit columns (a worker's capacity and load) or added into them."""


class DecodeError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_adapters: dict[str, TypeAdapter[Any]] = {}
_allowed: dict[type[m.Message], frozenset[str]] = {}


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
    """The body keys ``cls`` takes, as a set, made once per class."""
    names = _allowed.get(cls)
    if names is None:
        names = _allowed[cls] = frozenset(m.field_names(cls))
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
    # Judged after validation, so a string or float that pydantic turned into an integer is
    # judged as the integer it became.
    problem = _out_of_bounds(message, kind, 0)
    if problem is not None:
        raise DecodeError(ErrorCode.INVALID_REQUEST, problem)
    return message


def _out_of_bounds(value: Any, where: str, depth: int) -> str | None:
    """Why a body value cannot be taken (it would not fit any column or payload), or None.

    ``value`` is the typed message, or anything in it: its fields and a nested dataclass's
    (a schema's ``ColumnSpec``) are read as the members of an object, so the body is judged as
    :meth:`~streamctl.protocol.messages.Message.body` writes it, without writing it.
    ``where`` names the field in the message (``RegisterWorker.capacity``). A member's name is
    built only for a member that is refused: a pass decodes thousands of bodies, nearly all of
    them fine."""
    if depth > MAX_NESTING_DEPTH:
        return f"{where} nests deeper than {MAX_NESTING_DEPTH} levels"
    if hasattr(value, "__dataclass_fields__"):
        # A dataclass's members are its fields, whose names are identifiers: storable keys.
        values = getattr(value, "__dict__", None) or {}  # a slotted dataclass has none
        for name in m.field_names(type(value)):
            item = values[name] if name in values else getattr(value, name)
            found = _member_problem(name, item, where, depth)
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key that is not a string"
            problem = text_problem(key)
            if problem is not None:
                return f"{where} has a key that cannot be stored: {problem}"
            found = _member_problem(key, item, where, depth)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if depth < MAX_NESTING_DEPTH and (type(item) in _SCALARS or not _is_container(item)):
                refusal = _scalar_problem(item, "")  # a list's items are never narrow fields
                if refusal is not None:
                    return f"{where}[{index}]{refusal}"
                continue
            found = _out_of_bounds(item, f"{where}[{index}]", depth + 1)
            if found is not None:
                return found
        return None
    refusal = _scalar_problem(value, _leaf(where))
    return None if refusal is None else f"{where}{refusal}"


_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})
"""The types of nearly every body value: never a container, judged by :func:`_scalar_problem`
without the container test (a subclass takes the general path)."""


def _member_problem(key: str, item: Any, where: str, depth: int) -> str | None:
    """:func:`_out_of_bounds` of the member ``key`` of an object at ``where``."""
    if depth < MAX_NESTING_DEPTH and (type(item) in _SCALARS or not _is_container(item)):
        refusal = _scalar_problem(item, key)
        return None if refusal is None else f"{where}.{key[:64]}{refusal}"
    return _out_of_bounds(item, f"{where}.{key[:64]}", depth + 1)


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple) or hasattr(value, "__dataclass_fields__")


def _scalar_problem(value: Any, leaf: str) -> str | None:
    """Why a value that is neither an object nor a list cannot be taken, as the words that
    follow its field's name (``" is 3000000000, outside the range ..."``), or None; ``leaf``
    is the field's own name (:data:`NARROW_INTEGER_FIELDS` are 32-bit)."""
    if type(value) is str:  # most values: no number tests
        problem = text_problem(value)
        return f": {problem}" if problem is not None else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        low, high = (
            (INT32_MIN, INT32_MAX) if leaf in NARROW_INTEGER_FIELDS else (INT64_MIN, INT64_MAX)
        )
        if not low <= value <= high:
            return f" is {value}, outside the range {low} to {high}"
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f" is {value}, not a finite number"
        if leaf in NARROW_INTEGER_FIELDS and not INT32_MIN <= value <= INT32_MAX:
            return f" is {value}, outside the range {INT32_MIN} to {INT32_MAX}"
        return None
    if isinstance(value, str):
        problem = text_problem(value)
        return f": {problem}" if problem is not None else None
    return None


def _leaf(where: str) -> str:
    return where.rsplit(".", 1)[-1]
