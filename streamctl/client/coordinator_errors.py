"""Typed errors of the client library: one class per coordinator error code, and the
client-side failures (:class:`ClientError` and its subclasses), where nothing was answered or
the answer could not be read."""

from __future__ import annotations

from streamctl.error_codes import INVALID_STATEMENT, PLANNER_ERROR_CODES, ErrorCode
from streamctl.protocol.messages import Response


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

    code = INVALID_STATEMENT


class InternalError(CoordinatorError):
    code = ErrorCode.INTERNAL


class ClientError(Exception):
    """A failure on the client's side: nothing was answered."""


class OutboxFull(ClientError):
    """``try_send``/``try_ask`` found the bounded outbox full."""


class CoordinatorUnavailable(ClientError):
    """The coordinator could not be reached, or refused the batch carrying the request."""


class RequestTimeout(CoordinatorUnavailable, TimeoutError):
    """No answer within the request's deadline (the client's ``request_timeout``, or a
    shorter ``timeout`` of the call).

    The request may or may not have been applied: asking again with the same request id gets
    its one answer (the coordinator stores answers by id), never a second application.
    """

    def __init__(self, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class UndecodableAnswer(ClientError):
    """The coordinator answered, but this client cannot read the answer (``cause`` says why:
    a payload codec or converter it lacks, a payload key it does not hold, a malformed
    answer). Retrying cannot help, so it is raised at once."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"cannot decode the coordinator's answer: {cause}")
        self.cause = cause


class MissingPayloadKey(UndecodableAnswer):
    """The answer is encrypted with a payload key this client does not hold; ``key_id`` is the
    one it needs (``held`` the ids it has), see :mod:`streamctl.workflows.payload_crypto`."""

    def __init__(self, key_id: str, held: tuple[str, ...]) -> None:
        super().__init__(
            f"it is encrypted with payload key {key_id}, and this client holds "
            f"{'key(s) ' + ', '.join(held) if held else 'no payload key'}: give it the "
            "stack's key (STREAMCTL_PAYLOAD_KEY, or the state dir's payload.key)"
        )
        self.key_id = key_id
        self.held = held


class ClientFailure(ClientError):
    """The client's own machinery failed while the message was under way (a bug, reported
    to the waiting caller with its cause instead of being lost in a background task)."""


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
    {code: InvalidQuery for code in PLANNER_ERROR_CODES if code != ErrorCode.NOT_SUPPORTED}
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
