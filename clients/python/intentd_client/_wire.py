"""What the sync and asyncio clients share: framing, ids, backoff, defaults."""

from __future__ import annotations

import json
import os
import random
from decimal import Decimal
from typing import Any, Dict, List, Optional

from .errors import FrameTooLarge, IntentdError, ProtocolError, error_from_response

DEFAULT_SOCKET = "/run/intentd/intentd.sock"
DEFAULT_MAX_FRAME_BYTES = 65536
# Answers may carry up to 1000 uncertain actions or a 32 KiB stored response.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024

# Requests that may be sent again when the connection broke after sending:
# repeating them changes nothing (complete/fail/renew repeat with the same
# token, freeze is put-if-absent) or at worst turns an unseen `execute` into
# `in_flight`, which never executes twice. `amend` is the exception: a second
# amend after an unseen first one would be refused, so it is not resent.
# Neither is `seen`: if the first one was recorded, the resend answers
# first=false and the event would be dropped although nobody handled it (a
# claim's resend answers "processing" until the lost claim's lease expires).
# `done` and `release` repeat with the same token; `forget` of a dropped record answers
# forgotten=false and drops nothing more.
RESENDABLE_OPS = frozenset({
    "ping", "derive", "freeze", "begin", "complete", "fail", "renew", "status",
    "lookup", "uncertain", "stats", "done", "release", "forget",
})
# Error codes that mean "not processed, try again shortly".
RETRY_CODES = frozenset({"overloaded", "shutting_down"})


def socket_path_from(path: Optional[str]) -> str:
    """The argument, else $INTENTD_SOCKET, else the packaged default."""
    return path or os.environ.get("INTENTD_SOCKET") or DEFAULT_SOCKET


class _JsonNull:
    """Sent as JSON null. Arguments whose value is None are left out of a
    request, but `response` and `error` are required and may be null."""


JSON_NULL = _JsonNull()


def or_json_null(value: Any) -> Any:
    return JSON_NULL if value is None else value


def _json_default(value: Any) -> Any:
    if value is JSON_NULL:
        return None
    if isinstance(value, Decimal):
        # Money as its exact decimal text: the agent normalizes "180.00".
        if not value.is_finite():
            raise ValueError(f"cannot send {value} as JSON")
        return format(value, "f")
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def encode_request(op: str, request_id: int, args: Dict[str, Any],
                   max_frame_bytes: Optional[int]) -> bytes:
    """One request line. Arguments whose value is None are left out."""
    msg: Dict[str, Any] = {"id": request_id, "op": op}
    msg.update({k: v for k, v in args.items() if v is not None})
    try:
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as e:
        raise IntentdError(f"{op}: arguments are not valid JSON: {e}",
                           code="invalid_argument") from None
    line = text.encode("utf-8")
    if max_frame_bytes is not None and len(line) > max_frame_bytes:
        raise FrameTooLarge(f"{op} request is {len(line)} bytes; the frame limit is "
                            f"{max_frame_bytes} (send a smaller payload or response)")
    return line + b"\n"


def decode_response(line: bytes, request_id: int) -> Dict[str, Any]:
    """The members of a successful answer (without `id` and `ok`), or raises
    the typed error. A malformed answer or a wrong `id` is ProtocolError: the
    caller must drop the connection, its framing can no longer be trusted."""
    try:
        resp = json.loads(line)
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"the agent sent a line that is not JSON: {e}") from None
    if not isinstance(resp, dict) or not isinstance(resp.get("ok"), bool):
        raise ProtocolError(f"the agent sent an answer without ok: {line[:200]!r}")
    if resp.get("id") != request_id:
        # A frame_too_large or bad_request answer may come without our id.
        if not (resp["ok"] is False and "id" not in resp):
            raise ProtocolError(f"answer id {resp.get('id')!r} does not match request "
                                f"id {request_id}")
    if not resp["ok"]:
        raise error_from_response(resp)
    resp.pop("id", None)
    resp.pop("ok", None)
    return resp


def seen_entries(messages: Any) -> List[Dict[str, Any]]:
    """The `messages` of a batch `seen`: each a message id (str), or a dict
    ``{"message_id": ..., "meta": {...}}`` sent as it is."""
    if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
        raise TypeError("seen_batch: messages must be a list of message ids or of "
                        "{'message_id': ..., 'meta': ...} dicts")
    entries: List[Dict[str, Any]] = []
    for m in messages:
        if isinstance(m, str):
            entries.append({"message_id": m})
        elif isinstance(m, dict):
            entries.append(m)
        else:
            raise TypeError(f"seen_batch: a message must be an id (str) or a dict with "
                            f"message_id, not {type(m).__name__}")
    return entries


def lost_after_sending(op: str, args: Optional[Dict[str, Any]] = None) -> str:
    """The message of Unavailable when the connection broke after sending a
    request that is not resent."""
    if op == "seen" and args and args.get("lease_ms") is not None:
        hint = ("the agent may have recorded the claim: a later seen with lease_ms answers "
                "first=false (processing, retry_after_ms) until that lease expires, then "
                "first=true with the next lease_token")
    elif op == "seen":
        hint = ("the agent may have recorded the message as seen: a later seen answers "
                "first=false, so handle this one now or accept losing it")
    else:
        hint = "check with lookup"
    return f"{op}: connection lost after sending; the outcome is unknown ({hint})"


def backoff_delay(attempt: int, initial: float, cap: float) -> float:
    """Capped exponential backoff with equal jitter: half fixed, half random,
    so reconnecting clients spread out yet never spin."""
    ceiling = min(cap, initial * (2 ** min(attempt, 30)))
    return ceiling / 2 + random.uniform(0, ceiling / 2)
