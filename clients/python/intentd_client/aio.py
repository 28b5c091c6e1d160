"""The asyncio client: the same API as Client, with coroutines.

One connection per AsyncClient; requests are serialized by an asyncio.Lock,
so tasks of one event loop may share it (not threads, not loops).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional

from . import _wire
from ._flow import MIN_LEASE_MS, ActionOptions, ActionState
from .errors import (IntentdError, InvalidState, LeaseLost, MissingField, ProtocolError,
                     Timeout, Unavailable)


class AsyncClient:
    """See Client for the arguments; they mean the same here."""

    def __init__(self, socket_path: Optional[str] = None, *, timeout: float = 10.0,
                 reconnect_timeout: float = 10.0, backoff_initial: float = 0.05,
                 backoff_max: float = 2.0,
                 max_frame_bytes: Optional[int] = _wire.DEFAULT_MAX_FRAME_BYTES):
        self.socket_path = _wire.socket_path_from(socket_path)
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_frame_bytes = max_frame_bytes
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._ids = itertools.count(1)
        self._lock: Optional[asyncio.Lock] = None
        self._opened = False
        self.reconnects = 0

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        await self._drop()

    async def _drop(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass

    async def _connect(self) -> None:
        if self._reader is not None and (self._reader.at_eof() or self._reader._buffer):
            # The agent closed this idle connection (restart, frame_too_large)
            # or sent something nobody asked for: start on a fresh one.
            await self._drop()
        if self._writer is None:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.socket_path,
                                             limit=_wire.MAX_RESPONSE_BYTES),
                self.timeout)
            if self._opened:
                self.reconnects += 1
            self._opened = True

    async def _exchange(self, line: bytes, state: Dict[str, bool]) -> bytes:
        await self._connect()
        assert self._reader is not None and self._writer is not None
        self._writer.write(line)
        await self._writer.drain()
        state["sent"] = True
        return await self._reader.readline()

    async def request(self, op: str, **args: Any) -> Dict[str, Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            request_id = next(self._ids)
            line = _wire.encode_request(op, request_id, args, self.max_frame_bytes)
            give_up_at = time.monotonic() + self.reconnect_timeout
            attempt = 0
            while True:
                state = {"sent": False}
                try:
                    reply = await asyncio.wait_for(self._exchange(line, state), self.timeout)
                    if not reply.endswith(b"\n"):
                        raise ConnectionResetError("the agent closed the connection")
                    return _wire.decode_response(reply[:-1], request_id)
                except asyncio.TimeoutError:
                    await self._drop()
                    raise Timeout(f"{op}: no answer from {self.socket_path} within "
                                  f"{self.timeout} s") from None
                except (ProtocolError, asyncio.LimitOverrunError, ValueError) as e:
                    await self._drop()
                    if isinstance(e, ProtocolError):
                        raise
                    raise ProtocolError(f"{op}: the agent's answer is too long") from None
                except IntentdError as e:
                    if e.code in ("frame_too_large", "shutting_down"):
                        await self._drop()  # the agent closes the connection
                    if e.code not in _wire.RETRY_CODES:
                        raise
                    failure: BaseException = e
                except (OSError, asyncio.IncompleteReadError) as e:
                    await self._drop()
                    if state["sent"] and op not in _wire.RESENDABLE_OPS:
                        raise Unavailable(_wire.lost_after_sending(op, args)) from None
                    failure = e
                delay = _wire.backoff_delay(attempt, self.backoff_initial, self.backoff_max)
                if time.monotonic() + delay > give_up_at:
                    if isinstance(failure, IntentdError):
                        raise failure
                    raise Unavailable(f"cannot reach the agent at {self.socket_path}: "
                                      f"{failure or 'connection closed'}") from None
                attempt += 1
                await asyncio.sleep(delay)

    # -- one method per op ---------------------------------------------------

    async def ping(self) -> Dict[str, Any]:
        return await self.request("ping")

    async def derive(self, tenant_id: str, action_type: str, payload: Dict[str, Any], *,
                     rules_version: Optional[int] = None) -> Dict[str, Any]:
        return await self.request("derive", tenant_id=tenant_id, action_type=action_type,
                                  payload=payload, rules_version=rules_version)

    async def freeze(self, tenant_id: str, intent_ref: str, action_type: str,
                     payload: Dict[str, Any]) -> Dict[str, Any]:
        return await self.request("freeze", tenant_id=tenant_id, intent_ref=intent_ref,
                                  action_type=action_type, payload=payload)

    async def begin(self, tenant_id: str, intent_ref: str, action_type: str,
                    payload: Optional[Dict[str, Any]] = None, *,
                    lease_ms: Optional[int] = None,
                    on_divergence: Optional[str] = None) -> Dict[str, Any]:
        return await self.request("begin", tenant_id=tenant_id, intent_ref=intent_ref,
                                  action_type=action_type, payload=payload, lease_ms=lease_ms,
                                  on_divergence=on_divergence)

    async def complete(self, tenant_id: str, key: str, lease_token: int,
                       response: Any) -> Dict[str, Any]:
        return await self.request("complete", tenant_id=tenant_id, key=key,
                                  lease_token=lease_token,
                                  response=_wire.or_json_null(response))

    async def fail(self, tenant_id: str, key: str, lease_token: int, error: Any, *,
                   retriable: bool) -> Dict[str, Any]:
        return await self.request("fail", tenant_id=tenant_id, key=key,
                                  lease_token=lease_token, error=_wire.or_json_null(error),
                                  retriable=bool(retriable))

    async def renew(self, tenant_id: str, key: str, lease_token: int, *,
                    lease_ms: Optional[int] = None) -> Dict[str, Any]:
        return await self.request("renew", tenant_id=tenant_id, key=key,
                                  lease_token=lease_token, lease_ms=lease_ms)

    async def status(self, tenant_id: str, key: str) -> Dict[str, Any]:
        return await self.request("status", tenant_id=tenant_id, key=key)

    async def lookup(self, tenant_id: str, intent_ref: str,
                     action_type: str) -> Dict[str, Any]:
        return await self.request("lookup", tenant_id=tenant_id, intent_ref=intent_ref,
                                  action_type=action_type)

    async def amend(self, tenant_id: str, intent_ref: str, action_type: str,
                    payload: Dict[str, Any], *, force: bool = False) -> Dict[str, Any]:
        return await self.request("amend", tenant_id=tenant_id, intent_ref=intent_ref,
                                  action_type=action_type, payload=payload,
                                  force=force or None)

    async def uncertain(self, tenant_id: Optional[str] = None, *,
                        limit: Optional[int] = None) -> List[Dict[str, Any]]:
        return (await self.request("uncertain", tenant_id=tenant_id, limit=limit))["actions"]

    async def pending(self, tenant_id: Optional[str] = None, *,
                      limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """See Client.pending."""
        return (await self.request("pending", tenant_id=tenant_id, limit=limit))["intents"]

    async def approve(self, tenant_id: str, intent_ref: str, action_type: str, *,
                      note: Optional[str] = None) -> Dict[str, Any]:
        """See Client.approve."""
        return await self.request("approve", tenant_id=tenant_id, intent_ref=intent_ref,
                                  action_type=action_type, note=note)

    async def deny(self, tenant_id: str, intent_ref: str, action_type: str, *,
                   note: Optional[str] = None) -> Dict[str, Any]:
        """See Client.deny."""
        return await self.request("deny", tenant_id=tenant_id, intent_ref=intent_ref,
                                  action_type=action_type, note=note)

    async def stats(self) -> Dict[str, Any]:
        return await self.request("stats")

    async def seen(self, tenant_id: str, channel: str, message_id: str, *,
                   ttl_ms: Optional[int] = None, meta: Any = None,
                   lease_ms: Optional[int] = None) -> Dict[str, Any]:
        """See Client.seen (with lease_ms: the claim variant)."""
        return await self.request("seen", tenant_id=tenant_id, channel=channel,
                                  message_id=message_id, ttl_ms=ttl_ms, meta=meta,
                                  lease_ms=lease_ms)

    async def seen_batch(self, tenant_id: str, channel: str, messages: Any, *,
                         ttl_ms: Optional[int] = None, meta: Any = None,
                         lease_ms: Optional[int] = None) -> List[Dict[str, Any]]:
        """See Client.seen_batch."""
        return (await self.request("seen", tenant_id=tenant_id, channel=channel,
                                   messages=_wire.seen_entries(messages), ttl_ms=ttl_ms,
                                   meta=meta, lease_ms=lease_ms))["results"]

    async def done(self, tenant_id: str, channel: str, message_id: str,
                   lease_token: int) -> Dict[str, Any]:
        """See Client.done."""
        return await self.request("done", tenant_id=tenant_id, channel=channel,
                                  message_id=message_id, lease_token=lease_token)

    async def release(self, tenant_id: str, channel: str, message_id: str,
                      lease_token: int) -> Dict[str, Any]:
        """See Client.release."""
        return await self.request("release", tenant_id=tenant_id, channel=channel,
                                  message_id=message_id, lease_token=lease_token)

    async def forget(self, tenant_id: str, channel: str, message_id: str) -> Dict[str, Any]:
        """See Client.forget (admin)."""
        return await self.request("forget", tenant_id=tenant_id, channel=channel,
                                  message_id=message_id)

    # -- the flow helper -----------------------------------------------------

    def action(self, tenant_id: str, intent_ref: str, action_type: str,
               payload: Any = None, **options: Any) -> "AsyncAction":
        """``async with client.action(...) as act:``; see Action. ``payload``
        may be a function (sync or async) returning it, called only when
        the intent does not exist yet. begin protects the money; seen in
        front of it only saves the model call."""
        return AsyncAction(self, tenant_id, intent_ref, action_type, payload, **options)

    async def run_action(self, tenant_id: str, intent_ref: str, action_type: str,
                         payload: Any,
                         call: Callable[["AsyncAction"], Awaitable[Any]],
                         **options: Any) -> "AsyncAction":
        """Awaits `call(act)` only on execute/recover; see Client.run_action."""
        async with self.action(tenant_id, intent_ref, action_type, payload, **options) as act:
            if act.should_call:
                act.result = await call(act)
        return act


class AsyncAction(ActionState):
    """The asyncio twin of Action: the lease is renewed by a task."""

    def __init__(self, client: AsyncClient, tenant_id: str, intent_ref: str,
                 action_type: str, payload: Any, **options: Any):
        super().__init__(tenant_id, intent_ref, action_type, payload, ActionOptions(**options))
        self._client = client
        self._renewer: Optional[asyncio.Task] = None

    async def _begin_once(self) -> Dict[str, Any]:
        try:
            return await self._client.begin(**self._begin_args())
        except MissingField as e:
            if not self._needs_payload(e):
                raise
        assert self._extract is not None
        payload = self._extract()
        if inspect.isawaitable(payload):
            payload = await payload
        self._set_extracted(payload)
        return await self._client.begin(**self._begin_args())

    async def __aenter__(self) -> "AsyncAction":
        deadline = time.monotonic() + self.options.wait
        while True:
            resp = await self._begin_once()
            if resp.get("decision") != "in_flight":
                break
            await asyncio.sleep(self._in_flight_sleep(resp, deadline - time.monotonic()))
        self._apply_begin(resp)
        if self.should_call and self.options.renew:
            self._renewer = asyncio.ensure_future(self._renew_loop())
        return self

    async def _renew_loop(self) -> None:
        interval = self.options.lease_ms / 3000.0
        while True:
            await asyncio.sleep(interval)
            try:
                resp = await self._client.renew(self.tenant_id, self.key, self.lease_token,
                                                lease_ms=self.options.lease_ms)
                self.lease_until_ms = resp.get("lease_until_ms", self.lease_until_ms)
            except (LeaseLost, InvalidState):
                self.lease_lost = True
                return
            except IntentdError:
                continue

    async def _stop_renewing(self) -> None:
        task, self._renewer = self._renewer, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        await self._stop_renewing()
        if not self.should_call:
            return False
        what, value = self._outcome(exc)
        c = self._client
        if what == "complete":
            await c.complete(self.tenant_id, self.key, self.lease_token, value)
            self.status, self.response = "completed", value
            return False
        if what == "fail_retriable":
            resp = await c.fail(self.tenant_id, self.key, self.lease_token, value,
                                retriable=True)
            self.status, self.error = resp.get("status", "released"), value
            return False
        if what == "fail_terminal":
            resp = await c.fail(self.tenant_id, self.key, self.lease_token, value,
                                retriable=False)
            self.status, self.error = resp.get("status", "failed"), value
            return True
        try:
            await c.renew(self.tenant_id, self.key, self.lease_token, lease_ms=MIN_LEASE_MS)
        except IntentdError:
            pass
        return False
