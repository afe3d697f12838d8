"""Typed exceptions for the server's error replies and for a lost connection."""

from __future__ import annotations

from typing import Any


class HeraldError(Exception):
    """An error reply from the server: nothing was stored.

    `code` is the stable snake_case code of docs/protocol.md, `title` says what
    happened and `detail` why and what to change.
    """

    def __init__(self, code: str, title: str = "", detail: str = "") -> None:
        super().__init__(f"{code}: {title}" + (f" — {detail}" if detail else ""))
        self.code = code
        self.title = title
        self.detail = detail


class AuthenticationError(HeraldError):
    """The hello was refused (`invalid_token`, `too_many_refused_hellos`, `hello_required`)."""


class ForbiddenError(HeraldError):
    """The connection's grant does not allow this op, app or consumer name."""


class ValidationError(HeraldError):
    """The request itself is wrong: a missing, mistyped or out-of-range field."""


class NotFoundError(HeraldError):
    """The request names something the server does not know (`unknown_notification`, `unknown_consumer`)."""


class ClockError(HeraldError):
    """A `clock` request the server cannot apply."""


class RetryableError(HeraldError):
    """Nothing was committed and the same request may be sent again (`store_unavailable`)."""


class ConnectionError_(HeraldError):
    """The server closed the connection for a reason of its own (busy, revoked grant, …)."""


class ClientClosedError(HeraldError):
    """The client was closed before the request was answered."""

    def __init__(self, detail: str = "The client was closed before this request was answered.") -> None:
        super().__init__("client_closed", "The client is closed", detail)


_BY_CODE: dict[str, type[HeraldError]] = {
    "invalid_token": AuthenticationError,
    "too_many_refused_hellos": AuthenticationError,
    "hello_required": AuthenticationError,
    "hello_timeout": AuthenticationError,
    "forbidden": ForbiddenError,
    "forbidden_app": ForbiddenError,
    "forbidden_consumer": ForbiddenError,
    "grant_revoked": ConnectionError_,
    "busy": ConnectionError_,
    "evicted_before_hello": ConnectionError_,
    "partition_reassigned": ConnectionError_,
    "line_too_long": ConnectionError_,
    "not_owner": ConnectionError_,
    "unknown_notification": NotFoundError,
    "unknown_consumer": NotFoundError,
    "clock_not_manual": ClockError,
    "clock_backwards": ClockError,
    "store_unavailable": RetryableError,
}


def error_class(code: str) -> type[HeraldError]:
    """The exception class for an error code (`ValidationError` for the request-checking codes)."""
    return _BY_CODE.get(code, ValidationError)


def error_from_reply(reply: dict[str, Any]) -> HeraldError:
    """Builds the typed exception for an `{"ok":false,"error":{…}}` line."""
    err = reply.get("error")
    if not isinstance(err, dict):
        return HeraldError("unknown_error", "The server sent an error without details", repr(reply))
    code = str(err.get("code", "unknown_error"))
    title = str(err.get("title", err.get("message", "")))
    detail = str(err.get("detail", ""))
    return error_class(code)(code, title, detail)
