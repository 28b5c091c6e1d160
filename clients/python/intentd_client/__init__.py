"""intentd_client: the Python client of the intentd agent (standard library only).

    from intentd_client import Client, Retriable

    client = Client()                      # $INTENTD_SOCKET or /run/intentd/intentd.sock
    with client.action("acme", "FAT-2026-000123", "pix.cobranca", payload) as act:
        if act.should_call:                # execute or recover
            act.result = psp.charge(idempotency_key=act.key, txid=act.txid, **act.payload)
    print(act.replayed, act.response)

The asyncio twin is intentd_client.AsyncClient. Wire protocol: PROTOCOL.md.
"""

from .action import Action
from .aio import AsyncAction, AsyncClient
from .client import Client
from .errors import (ERRORS_BY_CODE, BadRequest, Forbidden, FrameTooLarge, IntentdError,
                     Internal, InvalidField, InvalidState, LeaseLost, MissingField, NotFound,
                     Overloaded, PayloadMismatch, ProtocolError, Retriable, ShuttingDown,
                     StillInFlight, StorageError, Terminal, Timeout, Unavailable,
                     UnknownActionType, UnknownOp, error_from_response)

__version__ = "0.1.0"

__all__ = [
    "Action", "AsyncAction", "AsyncClient", "Client", "ERRORS_BY_CODE", "BadRequest",
    "Forbidden", "FrameTooLarge", "IntentdError", "Internal", "InvalidField", "InvalidState",
    "LeaseLost", "MissingField", "NotFound", "Overloaded", "PayloadMismatch", "ProtocolError",
    "Retriable", "ShuttingDown", "StillInFlight", "StorageError", "Terminal", "Timeout",
    "Unavailable", "UnknownActionType", "UnknownOp", "error_from_response",
]
