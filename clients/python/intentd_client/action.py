"""The blocking action helper (``with client.action(...) as act:``)."""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Dict, Optional

from ._flow import MIN_LEASE_MS, ActionOptions, ActionState
from .errors import IntentdError, InvalidState, LeaseLost, MissingField


class Action(ActionState):
    """Usage::

        with client.action("acme", "FAT-1", "pix.cobranca", extract) as act:
            if act.should_call:
                act.result = psp.charge(idempotency_key=act.key, txid=act.txid,
                                        amount=act.amount("valor"),   # Decimal("180.00")
                                        description=act.input.get("descricao"))
        use(act.response)   # replayed or just stored

    ``extract`` may be the payload dict, or a function that returns it (the
    model call): it is called only when the intent does not exist yet, so
    a redelivery of a frozen intent never pays for the model again
    (``act.extracted`` says whether it ran). Either way build the provider
    call from ``act.input`` (the first extraction, in full) and
    ``act.amount(field)``, never from this attempt's own output, and never
    from ``act.payload`` (normalized key fields: its "valor" is cents).

    Entering begins (waiting out in_flight); leaving completes or fails for
    you (see intentd_client._flow). The body runs in every case: guard the
    provider call with ``if act.should_call`` — or use client.run_action,
    which only calls your function when it must.

    begin/complete is what protects the money (one provider call per
    intent). For an inbound webhook, ``seen`` (intentd_client.webhook) in
    front of the model call saves the model call a redelivery would cost;
    it does not replace the action.

    When to rely on reconcile: a bot that dies during a provider call that
    may have acted (or raises anything but Retriable/Terminal) leaves an
    uncertain action (started, lease run out, nothing recorded). With
    ``intentd reconcile`` configured for its action type (``--once`` from a
    timer, or ``serve --reconcile-every``), the agent resolves it from the
    provider's own record: charged -> completed, the next delivery replays
    it; not charged -> released, the next delivery executes with the same
    key and txid; the provider cannot say -> nothing recorded, asked again
    later (a delivery meanwhile sees in_flight while the reconciler holds
    the lease). Without it, the next delivery gets recover
    (``act.recovering``) and must itself check with the provider (by
    ``act.txid`` / ``act.key``), or repeat the call with the same key where
    the provider deduplicates, before charging again. Handle
    ``act.recovering`` either way: a delivery may get there first.
    """

    def __init__(self, client: Any, tenant_id: str, intent_ref: str, action_type: str,
                 payload: Any, **options: Any):
        super().__init__(tenant_id, intent_ref, action_type, payload, ActionOptions(**options))
        self._client = client
        self._stop = threading.Event()
        self._renewer: Optional[threading.Thread] = None

    def _begin_once(self) -> Dict[str, Any]:
        try:
            return self._client.begin(**self._begin_args())
        except MissingField as e:
            if not self._needs_payload(e):
                raise
        assert self._extract is not None
        payload = self._extract()
        if inspect.isawaitable(payload):
            close = getattr(payload, "close", None)
            if close is not None:
                close()  # never awaited: no "coroutine was never awaited" warning
            raise TypeError(f"the payload function of {self.intent_ref} is async: use "
                            "AsyncClient, or pass a plain function")
        self._set_extracted(payload)
        return self._client.begin(**self._begin_args())

    def __enter__(self) -> "Action":
        deadline = time.monotonic() + self.options.wait
        while True:
            resp = self._begin_once()
            if resp.get("decision") != "in_flight":
                break
            time.sleep(self._in_flight_sleep(resp, deadline - time.monotonic()))
        self._apply_begin(resp)
        if self.should_call and self.options.renew:
            self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                             name=f"intentd-renew-{self.intent_ref}")
            self._renewer.start()
        return self

    def _renew_loop(self) -> None:
        interval = self.options.lease_ms / 3000.0
        while not self._stop.wait(interval):
            try:
                resp = self._client.renew(self.tenant_id, self.key, self.lease_token,
                                          lease_ms=self.options.lease_ms)
                self.lease_until_ms = resp.get("lease_until_ms", self.lease_until_ms)
            except (LeaseLost, InvalidState):
                self.lease_lost = True
                return
            except IntentdError:
                continue  # agent unreachable for now: try again next interval

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        self._stop_renewing()
        if not self.should_call:
            return False
        what, value = self._outcome(exc)
        c = self._client
        if what == "complete":
            c.complete(self.tenant_id, self.key, self.lease_token, value)
            self.status, self.response = "completed", value
            return False
        if what == "fail_retriable":
            resp = c.fail(self.tenant_id, self.key, self.lease_token, value, retriable=True)
            self.status, self.error = resp.get("status", "released"), value
            return False  # re-raise: the work is not done, redeliver
        if what == "fail_terminal":
            resp = c.fail(self.tenant_id, self.key, self.lease_token, value, retriable=False)
            self.status, self.error = resp.get("status", "failed"), value
            return True  # recorded and replayed from now on: see act.failed
        # Unknown outcome: leave the action started, but let the lease run
        # out soon so that a redelivery recovers instead of waiting.
        try:
            c.renew(self.tenant_id, self.key, self.lease_token, lease_ms=MIN_LEASE_MS)
        except IntentdError:
            pass
        return False
