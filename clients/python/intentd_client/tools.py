"""Guarded tools: a money-moving function an AI agent calls, behind intentd.

Framework-neutral: a decorated function is called with the model's arguments
and your server-side context, and returns a ToolOutcome whose ``text`` is
the tool message for the model. Sync functions take a Client, ``async def``
ones an AsyncClient::

    from intentd_client import Client
    from intentd_client.tools import Anchor, AnchorRefused, guarded_tool

    def anchor(args, context):            # never from the model alone
        invoice = db.invoice(context["tenant_id"], args["invoice_id"])
        if invoice is None:
            raise AnchorRefused(f"there is no invoice {args['invoice_id']!r}")
        return Anchor(context["tenant_id"], invoice.id, payload=dict(args, cliente_id=invoice.customer))

    @guarded_tool(Client(), "pix.cobranca", anchor=anchor,
                  status=lambda call: psp.find_charge(call.txid))
    def create_pix_charge(input, call):   # input: the frozen arguments
        return psp.create_charge(txid=call.txid, valor=call.amount("valor"),  # Decimal("180.00")
                                 description=input.get("descricao"), ...)

    outcome = create_pix_charge(args, context={"tenant_id": "acme"})
    messages.append({"role": "tool", "tool_call_id": tool_call_id, "content": outcome.text})

Each call: anchor → begin →
    execute              → your function with the frozen input → executed
    recover              → status(call) first when given: found → recovered;
                           else your function again, same txid → executed
    replay               → replayed (or failed, when it failed for good)
    in_flight            → waits up to in_flight_wait s, then as above, or
                           in_progress ("do not retry")
    pending_approval     → pending_approval: the payment policy holds it for a
                           person ("do not retry"); your function never runs
    your function raises Retriable → released; Terminal → failed; anything
    else → unknown (the next call resumes the same action)

The anchor never comes from the model alone: a key drawn from the model's
output (its arguments, the tool_call_id, a fresh uuid) changes on every
retry, and the retry charges again. The anchor function maps the arguments
and server-side context (the session's authenticated tenant, your database)
to the business reference that existed before the model ran, and may refuse
(raise AnchorRefused: nothing is frozen). docs/agents.md says more.
"""

from __future__ import annotations

import functools
import inspect
from decimal import Decimal
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple, Type

from ._tool_outcome import OUTCOMES, ToolOutcome
from .errors import IntentdError, PendingApproval, Retriable, StillInFlight, Terminal

__all__ = ["Anchor", "AnchorRefused", "CallInfo", "GuardedTool", "OUTCOMES", "ToolOutcome",
           "frozen_input", "guarded_tool"]

TXID_LENGTH = 35  # a txid is the key's first 35 characters


class AnchorRefused(Exception):
    """Raise from the anchor function to refuse a call (an unknown invoice,
    another tenant's): the tool answers ``refused`` with this message, and
    nothing is frozen (``begin`` is never sent)."""

    code = "anchor_refused"


class Anchor(NamedTuple):
    """What the anchor function returns: the business reference of the
    call. payload defaults to the model's arguments."""
    tenant_id: str
    intent_ref: str
    payload: Optional[Dict[str, Any]] = None


class CallInfo(NamedTuple):
    """Passed to your function and to ``status``: key and txid (the Pix
    txid, the key's first 35 characters) to give the provider; recovering
    when an earlier attempt died mid-call; args and context of this call;
    money: the frozen amounts in whole units ({"valor": "180.00"}), read
    with amount()."""
    tenant_id: str
    intent_ref: str
    action_type: str
    key: str
    txid: str
    recovering: bool
    attempt: Optional[int]
    args: Any
    context: Any
    money: Mapping[str, str] = {}

    def amount(self, field: str) -> Decimal:
        """The frozen amount of money field ``field``, exact, in whole
        units: ``Decimal("180.00")`` whether the model wrote 180, "180.0"
        or 180.00. Give the provider this rather than ``input[field]``."""
        if field not in self.money:
            known = ", ".join(sorted(self.money)) or "none"
            raise KeyError(f"{field!r} is not a money field of {self.action_type} "
                           f"(its money fields: {known})")
        return Decimal(self.money[field])


def frozen_input(answer: Mapping[str, Any],
                 request_payload: Any) -> Optional[Tuple[Any, str]]:
    """The arguments to give the provider: the payload exactly as first sent.

    (input, "intentd") when the begin answer carries ``input`` (the payload
    object as first sent, every member); else (request_payload, "request")
    when this call did not diverge from the frozen intent; else None: this
    call's arguments differ and the agent did not say what was frozen, so
    nothing is safe to send. Never the answer's ``payload``: those are the
    normalized key fields (money as integer cents in a string).
    """
    value = answer.get("input") if answer else None
    if isinstance(value, dict):
        return value, "intentd"
    if answer and answer.get("diverged"):
        return None
    return request_payload, "request"


class _FrozenInputUnavailable(Exception):
    """Diverged arguments, no frozen input: nothing is sent (on recover the
    earlier attempt may have acted, so the action stays uncertain)."""


class _FrozenInputUnavailableRetriable(Retriable):
    """The same on a fresh grant: nothing acted under it, so it is released."""


class _Step:
    """What happened inside the provider step, for the outcome."""

    def __init__(self) -> None:
        self.act: Any = None
        self.call_error: Optional[BaseException] = None
        self.returned = False
        self.found = False
        self.result: Any = None


def _frozen_message(act: Any) -> str:
    return (f"the arguments differ from the intent frozen for {act.intent_ref} in "
            f"{', '.join(act.diverged_fields)}, and this intentd agent does not return the "
            "frozen arguments (the begin answer has no input member)")


def _check_anchor(value: Any) -> Anchor:
    if isinstance(value, Mapping):
        value = Anchor(value.get("tenant_id"), value.get("intent_ref"), value.get("payload"))
    if (not isinstance(value, tuple) or len(value) != 3
            or not all(isinstance(v, str) and v.strip() for v in value[:2])
            or not (value[2] is None or isinstance(value[2], dict))):
        raise TypeError("anchor must return Anchor(tenant_id, intent_ref, payload=None) with "
                        "non-empty strings and payload a dict")
    return Anchor(*value)


def _error_value(exc: BaseException) -> Any:
    given = getattr(exc, "error", None)
    if given is not None:
        return given
    return {"type": type(exc).__name__, "message": str(exc)}


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class GuardedTool:
    """A decorated tool; see the module's docstring and guarded_tool."""

    def __init__(self, client: Any, action_type: str, fn: Callable[..., Any], *,
                 anchor: Callable[..., Any], status: Optional[Callable[..., Any]] = None,
                 lease_ms: int = 30000, in_flight_wait: float = 10.0, poll_max: float = 0.25,
                 retriable: Tuple[Type[BaseException], ...] = (),
                 terminal: Tuple[Type[BaseException], ...] = ()):
        if not callable(anchor) or not callable(fn):
            raise TypeError("guarded_tool: anchor and the tool must be callables")
        if status is not None and not callable(status):
            raise TypeError("guarded_tool: status must be a callable")
        self.is_async = inspect.iscoroutinefunction(fn)
        if self.is_async != inspect.iscoroutinefunction(client.begin):
            raise TypeError("guarded_tool: an async def tool needs an AsyncClient, a plain "
                            "function a Client")
        self.client = client
        self.action_type = action_type
        self.fn = fn
        self.anchor = anchor
        self.status = status
        self.in_flight_wait = in_flight_wait
        self.retriable = (Retriable,) + tuple(retriable)
        self.terminal = (Terminal,) + tuple(terminal)
        self._options = dict(lease_ms=lease_ms, wait=in_flight_wait, poll_max=poll_max,
                             retriable=tuple(retriable), terminal=tuple(terminal))
        functools.update_wrapper(self, fn)

    def __call__(self, args: Any, context: Any = None) -> Any:
        """Runs one tool call: a ToolOutcome (a coroutine of one for an
        async tool). Never raises for intentd, provider or anchor errors:
        they are outcomes with is_error."""
        if self.is_async:
            return self._run_async(args, context)
        return self._run_sync(args, context)

    # -- sync ------------------------------------------------------------------

    def _run_sync(self, args: Any, context: Any) -> ToolOutcome:
        try:
            anchored = _check_anchor(self.anchor(args, context))
        except Exception as exc:
            return self._anchor_failed(exc)
        payload = anchored.payload if anchored.payload is not None else args
        step = _Step()
        try:
            with self.client.action(anchored.tenant_id, anchored.intent_ref, self.action_type,
                                    payload, **self._options) as act:
                step.act = act
                if act.should_call:
                    act.result = self._provide_sync(act, payload, args, context, step)
        except Exception as exc:
            return self._thrown(exc, step, anchored)
        return self._settled(act, step)

    def _provide_sync(self, act: Any, payload: Any, args: Any, context: Any,
                      step: _Step) -> Any:
        info = self._info(act, args, context)
        try:
            if act.recovering and self.status is not None:
                found = self.status(info)
                if found is not None:
                    return self._returned(step, found, found=True)
            return self._returned(step, self.fn(self._frozen(act, payload), info))
        except Exception as exc:
            step.call_error = exc
            raise

    # -- async -----------------------------------------------------------------

    async def _run_async(self, args: Any, context: Any) -> ToolOutcome:
        try:
            anchored = _check_anchor(await _maybe_await(self.anchor(args, context)))
        except Exception as exc:
            return self._anchor_failed(exc)
        payload = anchored.payload if anchored.payload is not None else args
        step = _Step()
        try:
            async with self.client.action(anchored.tenant_id, anchored.intent_ref,
                                          self.action_type, payload, **self._options) as act:
                step.act = act
                if act.should_call:
                    act.result = await self._provide_async(act, payload, args, context, step)
        except Exception as exc:
            return self._thrown(exc, step, anchored)
        return self._settled(act, step)

    async def _provide_async(self, act: Any, payload: Any, args: Any, context: Any,
                             step: _Step) -> Any:
        info = self._info(act, args, context)
        try:
            if act.recovering and self.status is not None:
                found = await _maybe_await(self.status(info))
                if found is not None:
                    return self._returned(step, found, found=True)
            return self._returned(step, await self.fn(self._frozen(act, payload), info))
        except Exception as exc:
            step.call_error = exc
            raise

    # -- shared ----------------------------------------------------------------

    def _info(self, act: Any, args: Any, context: Any) -> CallInfo:
        return CallInfo(act.tenant_id, act.intent_ref, act.action_type, act.key, act.txid,
                        act.recovering, act.attempt, args, context, dict(act.money))

    @staticmethod
    def _frozen(act: Any, payload: Any) -> Any:
        frozen = frozen_input(act.begin, payload)
        if frozen is None:
            if act.recovering:
                raise _FrozenInputUnavailable(_frozen_message(act))
            raise _FrozenInputUnavailableRetriable(
                _frozen_message(act), error={"reason": "frozen_input_unavailable",
                                             "diverged_fields": act.diverged_fields})
        return frozen[0]

    @staticmethod
    def _returned(step: _Step, result: Any, found: bool = False) -> Any:
        step.returned, step.found, step.result = True, found, result
        return result

    def _anchor_failed(self, exc: Exception) -> ToolOutcome:
        if isinstance(exc, AnchorRefused):
            return ToolOutcome("refused", action_type=self.action_type,
                               error={"code": AnchorRefused.code, "message": str(exc)})
        return ToolOutcome("error", action_type=self.action_type, error={
            "code": "anchor_error", "message": f"the tool's anchor function failed: {exc}"})

    @staticmethod
    def _base(act: Any) -> Dict[str, Any]:
        return dict(intent_ref=act.intent_ref, action_type=act.action_type, txid=act.txid,
                    diverged_fields=act.diverged_fields)

    def _settled(self, act: Any, step: _Step) -> ToolOutcome:
        """The action helper returned: replayed, completed now, or failed
        for good now."""
        base = self._base(act)
        if act.replayed:
            if act.failed:
                return ToolOutcome("failed", replay=True, error=act.error, **base)
            return ToolOutcome("replayed", replay=True, result=act.response, **base)
        if act.failed:
            return ToolOutcome("failed", error=act.error, **base)
        if step.found:
            return ToolOutcome("recovered", replay=True, result=act.response, **base)
        return ToolOutcome("executed", result=act.response, recovering=act.recovering, **base)

    def _thrown(self, exc: Exception, step: _Step, anchored: Anchor) -> ToolOutcome:
        """The action helper raised: still in flight, a provider error, or
        an intentd error."""
        if isinstance(exc, PendingApproval):
            return ToolOutcome("pending_approval", intent_ref=anchored.intent_ref,
                               action_type=self.action_type,
                               txid=exc.key[:TXID_LENGTH] if exc.key else None,
                               error={"code": "pending_approval", "message": exc.reason})
        if isinstance(exc, StillInFlight):
            return ToolOutcome("in_progress", intent_ref=anchored.intent_ref,
                               action_type=self.action_type,
                               txid=exc.key[:TXID_LENGTH] if exc.key else None,
                               waited=self.in_flight_wait)
        act = step.act
        base = (self._base(act) if act is not None
                else dict(intent_ref=anchored.intent_ref, action_type=self.action_type))
        call_error = step.call_error
        if isinstance(call_error, (_FrozenInputUnavailable, _FrozenInputUnavailableRetriable)):
            return ToolOutcome("error", error={"code": "frozen_input_unavailable",
                                               "message": str(call_error)}, **base)
        if call_error is not None:
            recorded = exc is call_error
            value = _error_value(call_error)
            if isinstance(call_error, self.retriable):
                return ToolOutcome("released", error=value, recorded=recorded, **base)
            if isinstance(call_error, self.terminal):
                return ToolOutcome("failed", error=value, recorded=recorded, **base)
            return ToolOutcome("unknown", error=value, **base)
        failure: Dict[str, Any] = {"code": getattr(exc, "code", None) or "tool_error",
                                   "message": getattr(exc, "message", None) or str(exc)}
        if getattr(exc, "field", None):
            failure["field"] = exc.field  # type: ignore[attr-defined]
        if step.returned:
            # The provider acted and intentd could not store it (lease lost
            # to a newer attempt, storage error): the next call finds it.
            return ToolOutcome("recovered" if step.found else "executed", replay=step.found,
                               result=step.result, error=failure, recorded=False,
                               recovering=act.recovering, **base)
        if not isinstance(exc, IntentdError):
            failure["code"] = "tool_error"
        return ToolOutcome("error", error=failure, **base)


def guarded_tool(client: Any, action_type: str, *, anchor: Callable[..., Any],
                 status: Optional[Callable[..., Any]] = None, lease_ms: int = 30000,
                 in_flight_wait: float = 10.0, poll_max: float = 0.25,
                 retriable: Tuple[Type[BaseException], ...] = (),
                 terminal: Tuple[Type[BaseException], ...] = ()
                 ) -> Callable[[Callable[..., Any]], GuardedTool]:
    """Decorates ``fn(input, call)``, the provider call, into a guarded tool
    called as ``tool(args, context)`` → ToolOutcome.

    client: a Client for a plain function, an AsyncClient for ``async def``.
    anchor(args, context) → Anchor(tenant_id, intent_ref, payload=None), from
        server-side knowledge; raise AnchorRefused to refuse. payload
        defaults to args. For an async tool it may be async.
    fn(input, call): input is the payload as first frozen (not this call's
        arguments when they differ); call is a CallInfo (txid, key,
        recovering…). Its return value is stored and replayed. Raise
        Retriable when the provider surely did not act, Terminal when it
        refused for good; anything else leaves the outcome unknown.
    status(call): on recover, the provider's record of call.txid, or None
        when there is none (then fn runs again under the same txid).
    lease_ms: the lease, renewed every third of it while fn runs.
    in_flight_wait: seconds a call waits for another one holding the action
        before answering in_progress; poll_max: the longest sleep between.
    retriable / terminal: your provider library's exception classes that
        mean "did not act" / "refused for good".
    """
    def wrap(fn: Callable[..., Any]) -> GuardedTool:
        return GuardedTool(client, action_type, fn, anchor=anchor, status=status,
                           lease_ms=lease_ms, in_flight_wait=in_flight_wait,
                           poll_max=poll_max, retriable=retriable, terminal=terminal)
    return wrap

