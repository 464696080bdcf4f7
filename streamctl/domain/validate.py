"""Checks of request fields, each raising :class:`RequestFailed` with the code a client sees.

Handlers call these before they change anything, so a refused request leaves the catalog as
it was (see :mod:`streamctl.domain.passes`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamctl.domain.context import RequestFailed
from streamctl.error_codes import ErrorCode
from streamctl.nes_types import (
    InvalidName,
    SchemaError,
    check_identifier,
    check_kind,
    normalize_schema,
)
from streamctl.planner.options import ConnectorOptionError
from streamctl.protocol import messages as m


def checked_name(value: str, what: str) -> str:
    try:
        return check_identifier(value, what)
    except InvalidName as error:
        raise RequestFailed(ErrorCode.INVALID_NAME, str(error)) from None


def checked_schema(columns: tuple[m.ColumnSpec, ...]) -> list[dict[str, Any]]:
    try:
        return normalize_schema(columns)
    except SchemaError as error:
        raise RequestFailed(ErrorCode.INVALID_SCHEMA, str(error)) from None


def checked_kind(value: str, allowed: frozenset[str], what: str) -> str:
    try:
        return check_kind(value, allowed, what)
    except SchemaError as error:
        raise RequestFailed(ErrorCode.INVALID_REQUEST, str(error)) from None


def connector_options(
    normalize: Callable[[str, Mapping[str, Any]], dict[str, Any]],
    type_name: str,
    raw: Mapping[str, Any],
) -> dict[str, Any]:
    """The connector options in canonical form (what agents build their connectors from)."""
    try:
        return normalize(type_name, raw if isinstance(raw, Mapping) else {})
    except ConnectorOptionError as error:
        raise RequestFailed(ErrorCode.INVALID_REQUEST, str(error)) from None


def not_found(what: str, key: object) -> RequestFailed:
    return RequestFailed(ErrorCode.NOT_FOUND, f"{what} {key!r} does not exist")
