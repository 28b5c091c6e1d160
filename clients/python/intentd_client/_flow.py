"""The action flow's decisions, shared by the sync and asyncio helpers.

    begin ─┬─ execute / recover → your provider call (lease renewed meanwhile)
           │     returns            → complete(result)
           │     raises Retriable   → fail(retriable=True): released, re-raised
           │     raises Terminal    → fail(retriable=False): stored, act.failed
           │     raises anything else → outcome unknown: nothing recorded, the
           │                           lease is shortened so a redelivery can
           │                           recover soon; re-raised
           ├─ replay               → act.replayed, act.response / act.error
           ├─ in_flight            → wait (retry_after_ms, capped), begin again,
           │                         until the deadline → StillInFlight
           └─ pending_approval     → PendingApproval (the policy holds it for a
                                     person; your code does not run)
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any, Dict, List, Optional, Tuple, Type

from .errors import MissingField, PendingApproval, Retriable, StillInFlight, Terminal

MIN_LEASE_MS = 1000
_UNSET: Any = object()


class ActionOptions:
    """lease_ms: the lease asked at begin and at each renewal (default
        30000; 1000..3600000). The lease is renewed every lease_ms/3 while
        your call runs, so a short lease only matters when the process dies.
    wait: seconds to keep retrying while another attempt is in flight
        (default: the lease plus 5 s, so a dead holder's lease expires and
        this attempt recovers); then StillInFlight.
    poll_max: longest single sleep between in_flight retries (default 1 s);
        the agent's retry_after_ms is the time left on the holder's lease.
    renew: renew the lease in the background (default True).
    on_divergence: "use_frozen" (default) or "reject" (PayloadMismatch).
    retriable / terminal: extra exception classes your provider library
        raises that mean "did not happen" / "refused for good".
    """

    def __init__(self, *, lease_ms: int = 30000, wait: Optional[float] = None,
                 poll_max: float = 1.0, renew: bool = True,
                 on_divergence: Optional[str] = None,
                 retriable: Tuple[Type[BaseException], ...] = (),
                 terminal: Tuple[Type[BaseException], ...] = ()):
        if not isinstance(lease_ms, int) or not MIN_LEASE_MS <= lease_ms <= 3600000:
            raise ValueError("lease_ms must be an integer between 1000 and 3600000")
        self.lease_ms = lease_ms
        self.wait = wait if wait is not None else lease_ms / 1000 + 5.0
        self.poll_max = poll_max
        self.renew = renew
        self.on_divergence = on_divergence
        self.retriable = (Retriable,) + tuple(retriable)
        self.terminal = (Terminal,) + tuple(terminal)


class ActionState:
    """What an action helper knows. Read these after entering:

    decision: "execute", "recover" or "replay" (in_flight is waited out)
    should_call: True when your code must call the provider (execute/recover)
    recovering: True on recover: a previous attempt may have acted; repeat
        the call with the same key (the provider deduplicates) or ask the
        provider for the status of `txid`
    replayed: True when the action already ended; do not call anything
    key, txid: the idempotency key (Idempotency-Key header) and the Pix txid
    input: the frozen extraction, every member, as the first attempt sent
        it: build the provider call from it (and amounts from amount()),
        never from this attempt's own model output. None for an intent
        frozen by an agent that kept no inputs.
    money: {field: "180.00"}: the frozen amounts in whole units (amount()
        and amount_cents() read them)
    pix_key_types: {field: "cpf"}: the type each Pix key field was read as
        ("cpf", "cnpj", "phone", "email", "evp"; None under rules version 1)
    payload: the frozen NORMALIZED key fields ("valor": "18000" is cents):
        a key input, never what to send a provider
    extracted: True when this attempt called your payload function (the
        intent did not exist yet); False when it read a frozen one back
    diverged, diverged_fields: this attempt's payload differs from the frozen
    result: set it in your code; it becomes the stored response
    response: the stored response (replayed) or your result (completed)
    failed, error: the action ended in a terminal failure (now or before)
    status: the action's status after the flow ("completed", "failed",
        "released", "started" when the outcome is unknown)
    lease_lost: a renewal found that a newer attempt took over
    waited_polls: how many in_flight answers were waited out
    """

    def __init__(self, tenant_id: str, intent_ref: str, action_type: str,
                 payload: Optional[Dict[str, Any]], options: ActionOptions):
        self.tenant_id = tenant_id
        self.intent_ref = intent_ref
        self.action_type = action_type
        # A callable is the extraction: called only when the intent does
        # not exist yet (see _needs_payload).
        self._extract = payload if callable(payload) else None
        self._payload_in = None if callable(payload) else payload
        self.extracted = False
        self.options = options
        self.begin: Dict[str, Any] = {}
        self.decision: Optional[str] = None
        self.key: Optional[str] = None
        self.txid: Optional[str] = None
        self.payload: Optional[Dict[str, Any]] = None
        self.input: Optional[Dict[str, Any]] = None
        self.money: Dict[str, str] = {}
        self.pix_key_types: Dict[str, Optional[str]] = {}
        self.diverged = False
        self.diverged_fields: List[str] = []
        self.created = False
        self.attempt: Optional[int] = None
        self.lease_token: Optional[int] = None
        self.lease_until_ms: Optional[int] = None
        self.previous_lease_token: Optional[int] = None
        self.status: Optional[str] = None
        self.result: Any = _UNSET
        self.response: Any = None
        self.error: Any = None
        self.lease_lost = False
        self.waited_polls = 0

    @property
    def should_call(self) -> bool:
        return self.decision in ("execute", "recover")

    @property
    def recovering(self) -> bool:
        return self.decision == "recover"

    @property
    def replayed(self) -> bool:
        return self.decision == "replay"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def amount(self, field: str) -> Decimal:
        """The frozen amount of money field ``field`` in whole units, exact:
        ``Decimal("180.00")`` (never a float). Send the provider this, or
        ``str(act.amount("valor"))``; not ``act.payload["valor"]``, which is
        cents. Raises KeyError naming the money fields when ``field`` is not
        one of them."""
        if field not in self.money:
            known = ", ".join(sorted(self.money)) or "none"
            raise KeyError(f"{field!r} is not a money field of {self.action_type} "
                           f"(its money fields: {known})")
        return Decimal(self.money[field])

    def amount_cents(self, field: str) -> int:
        """The frozen amount of ``field`` as an integer count of cents
        (18000 for R$ 180,00), for providers that take cents."""
        return int(self.amount(field) * 100)

    def _needs_payload(self, error: BaseException) -> bool:
        """True when a begin sent without a payload found no intent, and
        the extraction function has not run yet: call it, send again."""
        return (self._extract is not None and not self.extracted
                and isinstance(error, MissingField) and error.field == "payload")

    def _set_extracted(self, payload: Any) -> None:
        if not isinstance(payload, dict):
            raise TypeError(f"the payload function of {self.intent_ref} returned "
                            f"{type(payload).__name__}, not a dict")
        self._payload_in = payload
        self.extracted = True

    def _begin_args(self) -> Dict[str, Any]:
        return dict(tenant_id=self.tenant_id, intent_ref=self.intent_ref,
                    action_type=self.action_type, payload=self._payload_in,
                    lease_ms=self.options.lease_ms, on_divergence=self.options.on_divergence)

    def _apply_begin(self, resp: Dict[str, Any]) -> None:
        if resp.get("decision") == "pending_approval":
            approval = resp.get("approval") if isinstance(resp.get("approval"), dict) else {}
            reason = str(approval.get("reason") or "")
            raise PendingApproval(
                f"{self.intent_ref}: waits for a person's approval ({reason}); nothing was "
                "done", key=resp.get("key"), reason=reason, approval=approval)
        self.begin = resp
        self.decision = resp.get("decision")
        self.key = resp.get("key")
        self.txid = resp.get("txid")
        self.payload = resp.get("payload")
        self.input = resp.get("input")
        money = resp.get("money")
        self.money = dict(money) if isinstance(money, dict) else {}
        key_types = resp.get("pix_key_types")
        self.pix_key_types = dict(key_types) if isinstance(key_types, dict) else {}
        self.diverged = bool(resp.get("diverged"))
        self.diverged_fields = list(resp.get("diverged_fields") or [])
        self.created = self.created or bool(resp.get("created"))
        self.attempt = resp.get("attempt")
        self.lease_token = resp.get("lease_token")
        self.lease_until_ms = resp.get("lease_until_ms")
        self.previous_lease_token = resp.get("previous_lease_token")
        if self.decision == "replay":
            self.status = resp.get("status")
            self.response = resp.get("response")
            self.error = resp.get("error")
        elif self.should_call:
            self.status = "started"

    def _in_flight_sleep(self, resp: Dict[str, Any], remaining: float) -> float:
        """Seconds to sleep before the next begin, or raises StillInFlight."""
        retry_after_ms = int(resp.get("retry_after_ms") or 0)
        if remaining <= 0:
            raise StillInFlight(
                f"{self.intent_ref}: another attempt still holds the lease after "
                f"{self.options.wait:g} s (retry in {retry_after_ms} ms)",
                key=resp.get("key"), retry_after_ms=retry_after_ms)
        self.waited_polls += 1
        hint = max(retry_after_ms / 1000.0, 0.01)
        step = min(hint, self.options.poll_max, remaining)
        # A little jitter so that redeliveries of one message do not march in step.
        return step * random.uniform(0.8, 1.0) if step < hint else step

    def _outcome(self, exc: Optional[BaseException]) -> Tuple[str, Any]:
        """("complete", response) | ("fail_retriable", error) |
        ("fail_terminal", error) | ("unknown", None)."""
        if exc is None:
            return "complete", None if self.result is _UNSET else self.result
        if isinstance(exc, self.options.retriable):
            return "fail_retriable", _error_value(exc)
        if isinstance(exc, self.options.terminal):
            return "fail_terminal", _error_value(exc)
        return "unknown", None

    def __repr__(self) -> str:
        return (f"<Action {self.tenant_id}/{self.intent_ref}/{self.action_type} "
                f"decision={self.decision} status={self.status} key={self.key}>")


def _error_value(exc: BaseException) -> Any:
    given = getattr(exc, "error", None)
    if given is not None:
        return given
    return {"type": type(exc).__name__, "message": str(exc)}
