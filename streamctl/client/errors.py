"""Typed errors of the client library, one class per coordinator error code."""

from __future__ import annotations

from streamctl.planner import errors as planner_errors
from streamctl.workflows.messages import ErrorCode, Response


class CoordinatorError(Exception):
    """A request the coordinator answered with an error (``code`` + readable ``message``)."""

    code: str = ErrorCode.INTERNAL

    def __init__(
        self, message: str, code: str | None = None, request_id: str | None = None
    ) -> None:
        super().__init__(f"{code or self.code}: {message}")
        self.message = message
        if code is not None:
            self.code = code
        self.request_id = request_id


class InvalidRequest(CoordinatorError):
    code = ErrorCode.INVALID_REQUEST


class UnknownKind(CoordinatorError):
    code = ErrorCode.UNKNOWN_KIND


class UnsupportedVersion(CoordinatorError):
    code = ErrorCode.UNSUPPORTED_VERSION


class TooLarge(CoordinatorError):
    code = ErrorCode.TOO_LARGE


class InvalidName(CoordinatorError):
    code = ErrorCode.INVALID_NAME


class InvalidSchema(CoordinatorError):
    code = ErrorCode.INVALID_SCHEMA


class NotFound(CoordinatorError):
    code = ErrorCode.NOT_FOUND


class AlreadyExists(CoordinatorError):
    code = ErrorCode.ALREADY_EXISTS


class HasDependents(CoordinatorError):
    code = ErrorCode.HAS_DEPENDENTS


class NotSupported(CoordinatorError):
    code = ErrorCode.NOT_SUPPORTED


class Unavailable(CoordinatorError):
    code = ErrorCode.UNAVAILABLE


class InvalidQuery(CoordinatorError):
    """A statement the planner refused; ``code`` is the planner's (e.g. ``UNKNOWN_COLUMN``) and
    the message points at the line and column."""

    code = planner_errors.INVALID_STATEMENT


class InternalError(CoordinatorError):
    code = ErrorCode.INTERNAL


class ClientError(Exception):
    """A failure on the client's side: nothing was answered."""


class OutboxFull(ClientError):
    """``try_send``/``try_ask`` found the bounded outbox full."""


class CoordinatorUnavailable(ClientError):
    """The coordinator could not be reached within the request's deadline."""


class ClientClosed(ClientError):
    """The client was closed before the message was delivered."""


_BY_CODE: dict[str, type[CoordinatorError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        UnknownKind,
        UnsupportedVersion,
        TooLarge,
        InvalidName,
        InvalidSchema,
        NotFound,
        AlreadyExists,
        HasDependents,
        NotSupported,
        Unavailable,
        InternalError,
    )
}
_BY_CODE.update(
    {code: InvalidQuery for code in planner_errors.ERROR_CODES if code != ErrorCode.NOT_SUPPORTED}
)


def error_for(response: Response) -> CoordinatorError:
    code = response.error_code or ErrorCode.INTERNAL
    cls = _BY_CODE.get(code, CoordinatorError)
    return cls(response.error_message or "no message", code=code, request_id=response.id)


def unwrap(response: Response) -> object:
    """The result of a successful response; the typed error of a failed one."""
    if not response.ok:
        raise error_for(response)
    return response.result
