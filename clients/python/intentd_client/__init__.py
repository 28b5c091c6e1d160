"""intentd_client: the Python client of the intentd agent (standard library only).

    from intentd_client import Client, Retriable

    client = Client()                      # $INTENTD_SOCKET or /run/intentd/intentd.sock
    with client.action("acme", "FAT-2026-000123", "pix.cobranca", extract) as act:
        if act.should_call:                # execute or recover
            act.result = psp.charge(idempotency_key=act.key, txid=act.txid,
                                    amount=act.amount("valor"),   # Decimal("180.00")
                                    description=act.input.get("descricao"))
    print(act.replayed, act.response)

``extract``: the payload, or a function returning it (the model call), run
only when the intent is not frozen yet. Charge from ``act.input`` and
``act.amount()``; ``act.payload`` is the normalized key input (cents).

The asyncio twin is intentd_client.AsyncClient. Tools that AI agents call
(function calling, MCP): intentd_client.tools.guarded_tool. Wire protocol:
docs/protocol.md.
"""

from typing import Any

from .action import Action
from .client import Client
from .errors import (ERRORS_BY_CODE, BadRequest, Forbidden, FrameTooLarge, IntentdError,
                     Internal, InvalidField, InvalidState, LeaseLost, MissingField, NotFound,
                     Overloaded, PayloadMismatch, PendingApproval, PolicyRefused,
                     ProtocolError, Retriable,
                     ShuttingDown, StillInFlight, StorageError, Terminal, Timeout, Unavailable,
                     UnknownActionType, UnknownOp, error_from_response)

__version__ = "0.1.0"

__all__ = [
    "Action", "AsyncAction", "AsyncClient", "Client", "ERRORS_BY_CODE", "BadRequest",
    "Forbidden", "FrameTooLarge", "IntentdError", "Internal", "InvalidField", "InvalidState",
    "LeaseLost", "MissingField", "NotFound", "Overloaded", "PayloadMismatch", "PendingApproval",
    "PolicyRefused",
    "ProtocolError", "Retriable", "ShuttingDown", "StillInFlight", "StorageError", "Terminal", "Timeout",
    "Unavailable", "UnknownActionType", "UnknownOp", "error_from_response",
]


def __getattr__(name: str) -> Any:
    # asyncio is imported only by those who use it: short-lived bot
    # processes start faster without it.
    if name in ("AsyncClient", "AsyncAction"):
        from . import aio
        return getattr(aio, name)
    raise AttributeError(f"module 'intentd_client' has no attribute {name!r}")
