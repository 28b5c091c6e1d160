"""Exceptions: one class per protocol error code, plus client-side failures.

Every exception the client raises is an :class:`IntentdError` with ``.code``,
``.message`` and ``.field`` (``None`` unless one argument is at fault).
Codes answered by the agent are the protocol's stable codes; the client adds
``unavailable`` (cannot reach the agent), ``timeout``, ``protocol_error`` (a
malformed answer) and ``in_flight`` (the action helper gave up waiting).

:class:`Retriable` and :class:`Terminal` are not raised by the client: your
code raises them inside an action to say how the provider call ended.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class IntentdError(Exception):
    """Base of every error of this package."""

    code = "error"

    def __init__(self, message: str = "", *, code: Optional[str] = None,
                 field: Optional[str] = None, response: Optional[dict] = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.field = field
        self.response = response

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        return f"{self.code}: {self.message}{where}"


# --- Errors answered by the agent (docs/protocol.md, "Error codes") -----------

class BadRequest(IntentdError):
    code = "bad_request"


class FrameTooLarge(IntentdError):
    code = "frame_too_large"


class UnknownOp(IntentdError):
    code = "unknown_op"


class UnknownActionType(IntentdError):
    code = "unknown_action_type"


class MissingField(IntentdError):
    code = "missing_field"


class InvalidField(IntentdError):
    code = "invalid_field"


class PayloadMismatch(IntentdError):
    code = "payload_mismatch"


class NotFound(IntentdError):
    code = "not_found"


class LeaseLost(IntentdError):
    """A newer attempt took the lease over: stop, it owns the outcome now."""
    code = "lease_lost"


class InvalidState(IntentdError):
    code = "invalid_state"


class Forbidden(IntentdError):
    code = "forbidden"


class Overloaded(IntentdError):
    code = "overloaded"


class StorageError(IntentdError):
    """The agent could not make a write durable; nothing was granted."""
    code = "storage_error"


class ShuttingDown(IntentdError):
    code = "shutting_down"


class Internal(IntentdError):
    code = "internal"


class PolicyRefused(IntentdError):
    """The agent's policy refuses this payload (an amount above a limit); the
    message names the rule and the allowance. Nothing was frozen: do not
    retry as is."""
    code = "policy_refused"


# --- Raised by the client itself ---------------------------------------------

class Unavailable(IntentdError, ConnectionError):
    """The agent cannot be reached (after reconnecting for reconnect_timeout),
    or the connection broke after a non-idempotent request was sent."""
    code = "unavailable"


class Timeout(IntentdError, TimeoutError):
    """The agent did not answer within the client's timeout."""
    code = "timeout"


class ProtocolError(IntentdError):
    """The agent's answer is not what the protocol promises."""
    code = "protocol_error"


class StillInFlight(IntentdError):
    """Another attempt still holds the action's lease after waiting.
    Redeliver the message later; ``retry_after_ms`` is the agent's hint."""
    code = "in_flight"

    def __init__(self, message: str, *, key: str, retry_after_ms: int):
        super().__init__(message)
        self.key = key
        self.retry_after_ms = retry_after_ms


class PendingApproval(IntentdError):
    """The agent's policy holds the intent for a person's approval (an
    amount above approval_above): nothing was granted and your code did not
    run. Tell the customer the charge is under review and stop; a later
    delivery (after an admin's ``intentd approve``) executes it, and after a
    denial it replays failed with the error code "denied". ``reason`` says
    why it waits; ``approval`` is the agent's approval object."""
    code = "pending_approval"

    def __init__(self, message: str, *, key: str, reason: str, approval: dict):
        super().__init__(message)
        self.key = key
        self.reason = reason
        self.approval = approval


ERRORS_BY_CODE: Dict[str, Type[IntentdError]] = {
    cls.code: cls for cls in (
        BadRequest, FrameTooLarge, UnknownOp, UnknownActionType, MissingField,
        InvalidField, PayloadMismatch, NotFound, LeaseLost, InvalidState,
        Forbidden, Overloaded, StorageError, ShuttingDown, Internal, PolicyRefused)
}


def error_from_response(response: dict) -> IntentdError:
    """The typed exception for an ``"ok": false`` response. An unknown code
    (from a newer agent) gives a plain IntentdError carrying that code."""
    err = response.get("error")
    if not isinstance(err, dict):
        return ProtocolError(f"error response without an error object: {response!r}",
                             response=response)
    code = err.get("code")
    message = err.get("message") if isinstance(err.get("message"), str) else ""
    field = err.get("field") if isinstance(err.get("field"), str) else None
    cls = ERRORS_BY_CODE.get(code) if isinstance(code, str) else None
    if cls is None:
        return IntentdError(message, code=str(code), field=field, response=response)
    return cls(message, field=field, response=response)


# --- Raised by your code inside an action ------------------------------------

class Retriable(Exception):
    """Raise inside an action when the provider call certainly did NOT take
    effect (refused before acting, validation, 5xx with a guarantee): the
    action is released (``fail`` with ``retriable: true``) and the next
    attempt executes again. The exception propagates to your code.

    ``error`` is the JSON value recorded; by default the exception's text."""

    def __init__(self, message: str = "", error: Any = None):
        super().__init__(message)
        self.error = error


class Terminal(Exception):
    """Raise inside an action when the provider refused for good (card
    declined, invalid destination): the failure is stored (``fail`` with
    ``retriable: false``) and replayed to every later attempt. The action
    helper does not re-raise it: check ``act.failed`` and ``act.error``."""

    def __init__(self, message: str = "", error: Any = None):
        super().__init__(message)
        self.error = error
