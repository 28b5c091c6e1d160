"""The blocking client: one Unix socket connection, one request at a time.

Thread safety: a Client may be shared between threads; requests are
serialized by a lock (the action helper's lease-renewal thread relies on it).
"""

from __future__ import annotations

import itertools
import select
import socket
import threading
import time
from typing import Any, Dict, List, Optional

from . import _wire
from .errors import IntentdError, ProtocolError, Timeout, Unavailable


class _Closed(Exception):
    """The agent closed the connection."""


class Client:
    """A connection to the intentd agent.

    socket_path: the agent's socket; default $INTENTD_SOCKET, else
        /run/intentd/intentd.sock. The connection opens on first use.
    timeout: seconds to wait for one answer (and to connect); on expiry the
        connection is dropped and Timeout is raised.
    reconnect_timeout: how long to keep reconnecting (capped exponential
        backoff with jitter, from backoff_initial up to backoff_max seconds)
        when the agent cannot be reached or answers overloaded/shutting_down,
        before raising Unavailable (or that error). 0 disables retries.
    max_frame_bytes: requests longer than this are refused locally with
        FrameTooLarge (the agent's default limit); None disables the check.
    """

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
        self._sock: Optional[socket.socket] = None
        self._buf = b""
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self.reconnects = 0  # connections opened after the first one
        self._opened = False

    # -- connection ----------------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is not None and self._stale(self._sock):
            self._drop()
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(self.socket_path)
            except BaseException:
                s.close()
                raise
            if self._opened:
                self.reconnects += 1
            self._opened = True
            self._sock = s
        return self._sock

    @staticmethod
    def _stale(sock: socket.socket) -> bool:
        """True when the agent closed this idle connection (it restarted, or
        closed after frame_too_large), or sent something nobody asked for:
        either way the next request must go on a fresh connection."""
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def _read_line(self, sock: socket.socket) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                return line
            if len(self._buf) > _wire.MAX_RESPONSE_BYTES:
                raise ProtocolError("the agent's answer exceeds 16 MiB without a newline")
            chunk = sock.recv(65536)
            if not chunk:
                raise _Closed("the agent closed the connection")
            self._buf += chunk

    # -- requests ------------------------------------------------------------

    def request(self, op: str, **args: Any) -> Dict[str, Any]:
        """Sends one request and returns the answer's members (without `id`
        and `ok`). Raises the typed IntentdError of an error answer."""
        with self._lock:
            request_id = next(self._ids)
            line = _wire.encode_request(op, request_id, args, self.max_frame_bytes)
            give_up_at = time.monotonic() + self.reconnect_timeout
            attempt = 0
            while True:
                sent = False
                try:
                    sock = self._connect()
                    sock.sendall(line)
                    sent = True
                    return _wire.decode_response(self._read_line(sock), request_id)
                except (socket.timeout, TimeoutError):
                    self._drop()
                    raise Timeout(f"{op}: no answer from {self.socket_path} within "
                                  f"{self.timeout} s") from None
                except ProtocolError:
                    self._drop()
                    raise
                except IntentdError as e:
                    if e.code in ("frame_too_large", "shutting_down"):
                        self._drop()  # the agent closes the connection after these
                    if e.code not in _wire.RETRY_CODES:
                        raise
                    failure: BaseException = e
                except (OSError, _Closed) as e:
                    self._drop()
                    if sent and op not in _wire.RESENDABLE_OPS:
                        raise Unavailable(_wire.lost_after_sending(op, args)) from None
                    failure = e
                delay = _wire.backoff_delay(attempt, self.backoff_initial, self.backoff_max)
                if time.monotonic() + delay > give_up_at:
                    if isinstance(failure, IntentdError):
                        raise failure
                    raise Unavailable(f"cannot reach the agent at {self.socket_path}: "
                                      f"{failure or 'connection closed'}") from None
                attempt += 1
                time.sleep(delay)

    # -- one method per op (docs/protocol.md, "Operations") ---------------

    def ping(self) -> Dict[str, Any]:
        return self.request("ping")

    def derive(self, tenant_id: str, action_type: str, payload: Dict[str, Any], *,
               rules_version: Optional[int] = None) -> Dict[str, Any]:
        return self.request("derive", tenant_id=tenant_id, action_type=action_type,
                            payload=payload, rules_version=rules_version)

    def freeze(self, tenant_id: str, intent_ref: str, action_type: str,
               payload: Dict[str, Any]) -> Dict[str, Any]:
        return self.request("freeze", tenant_id=tenant_id, intent_ref=intent_ref,
                            action_type=action_type, payload=payload)

    def begin(self, tenant_id: str, intent_ref: str, action_type: str,
              payload: Optional[Dict[str, Any]] = None, *, lease_ms: Optional[int] = None,
              on_divergence: Optional[str] = None) -> Dict[str, Any]:
        return self.request("begin", tenant_id=tenant_id, intent_ref=intent_ref,
                            action_type=action_type, payload=payload, lease_ms=lease_ms,
                            on_divergence=on_divergence)

    def complete(self, tenant_id: str, key: str, lease_token: int,
                 response: Any) -> Dict[str, Any]:
        return self.request("complete", tenant_id=tenant_id, key=key,
                            lease_token=lease_token, response=_wire.or_json_null(response))

    def fail(self, tenant_id: str, key: str, lease_token: int, error: Any, *,
             retriable: bool) -> Dict[str, Any]:
        return self.request("fail", tenant_id=tenant_id, key=key, lease_token=lease_token,
                            error=_wire.or_json_null(error), retriable=bool(retriable))

    def renew(self, tenant_id: str, key: str, lease_token: int, *,
              lease_ms: Optional[int] = None) -> Dict[str, Any]:
        return self.request("renew", tenant_id=tenant_id, key=key, lease_token=lease_token,
                            lease_ms=lease_ms)

    def status(self, tenant_id: str, key: str) -> Dict[str, Any]:
        return self.request("status", tenant_id=tenant_id, key=key)

    def lookup(self, tenant_id: str, intent_ref: str, action_type: str) -> Dict[str, Any]:
        return self.request("lookup", tenant_id=tenant_id, intent_ref=intent_ref,
                            action_type=action_type)

    def amend(self, tenant_id: str, intent_ref: str, action_type: str,
              payload: Dict[str, Any], *, force: bool = False) -> Dict[str, Any]:
        return self.request("amend", tenant_id=tenant_id, intent_ref=intent_ref,
                            action_type=action_type, payload=payload, force=force or None)

    def uncertain(self, tenant_id: Optional[str] = None, *,
                  limit: Optional[int] = None) -> List[Dict[str, Any]]:
        return self.request("uncertain", tenant_id=tenant_id, limit=limit)["actions"]

    def pending(self, tenant_id: Optional[str] = None, *,
                limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Intents the policy holds for approval, oldest first."""
        return self.request("pending", tenant_id=tenant_id, limit=limit)["intents"]

    def approve(self, tenant_id: str, intent_ref: str, action_type: str, *,
                note: Optional[str] = None) -> Dict[str, Any]:
        """Approves a pending intent (admin): its next begin executes."""
        return self.request("approve", tenant_id=tenant_id, intent_ref=intent_ref,
                            action_type=action_type, note=note)

    def deny(self, tenant_id: str, intent_ref: str, action_type: str, *,
             note: Optional[str] = None) -> Dict[str, Any]:
        """Denies a pending intent (admin): its action ends failed ("denied")."""
        return self.request("deny", tenant_id=tenant_id, intent_ref=intent_ref,
                            action_type=action_type, note=note)

    def stats(self) -> Dict[str, Any]:
        return self.request("stats")

    def seen(self, tenant_id: str, channel: str, message_id: str, *,
             ttl_ms: Optional[int] = None, meta: Any = None,
             lease_ms: Optional[int] = None) -> Dict[str, Any]:
        """Records one sighting of an inbound message (a webhook's message id).

        The answer: ``first`` (True: this is the first sighting, process it;
        False: a duplicate, drop it), ``state`` ("seen", "processing" or
        "done"), ``count`` (sightings so far), ``first_seen_at_ms``,
        ``expires_at_ms`` and ``meta`` (the first sighting's, when one was
        stored). ``ttl_ms``: keep the record that long after this sighting
        (default: the agent's retention, at least 7 days).

        ``lease_ms`` makes it a claim: a first sighting then carries
        ``lease_token`` and ``lease_until_ms``; call ``done`` with that token
        once the message is processed. If the processor dies first, the lease
        runs out and the next claim gets ``first`` True again with the next
        token (``lease_token > 1``: process it again). A duplicate of a live
        claim carries ``retry_after_ms``.

        Needs an agent with the op (else UnknownOp). Not resent after a
        broken connection: Unavailable, outcome unknown.
        """
        return self.request("seen", tenant_id=tenant_id, channel=channel,
                            message_id=message_id, ttl_ms=ttl_ms, meta=meta, lease_ms=lease_ms)

    def seen_batch(self, tenant_id: str, channel: str, messages: Any, *,
                   ttl_ms: Optional[int] = None, meta: Any = None,
                   lease_ms: Optional[int] = None) -> List[Dict[str, Any]]:
        """`seen` for 1..1000 messages at once (ids, or dicts with
        ``message_id`` and ``meta``; ``meta`` here is the default of entries
        without their own); returns the results in request order, each with
        ``message_id`` and the members of a single `seen` answer. An id
        repeated in the batch is answered as if sent one after the other."""
        return self.request("seen", tenant_id=tenant_id, channel=channel,
                            messages=_wire.seen_entries(messages), ttl_ms=ttl_ms, meta=meta,
                            lease_ms=lease_ms)["results"]

    def done(self, tenant_id: str, channel: str, message_id: str,
             lease_token: int) -> Dict[str, Any]:
        """Records that a message claimed by ``seen(..., lease_ms=...)`` was
        processed: ``{"state": "done"}``; later claims read it as a
        duplicate. Repeating it with the same token changes nothing.
        LeaseLost: the lease expired and a newer claim took the message over
        (stop; that processor owns it now). InvalidState: a plain sighting,
        a token never granted, or done under another token. NotFound: no
        live record (never seen, forgotten or expired)."""
        return self.request("done", tenant_id=tenant_id, channel=channel,
                            message_id=message_id, lease_token=lease_token)

    def release(self, tenant_id: str, channel: str, message_id: str,
                lease_token: int) -> Dict[str, Any]:
        """Gives a message claimed by ``seen(..., lease_ms=...)`` back
        unprocessed (the model call failed, the bot is stopping): the next
        delivery takes it over at once as a first sighting, instead of
        waiting out the lease. ``{"state": "processing", "lease_until_ms":
        now}`` (the claim ended). Fenced like
        ``done``: LeaseLost when a newer claim took the message over,
        InvalidState for a message done or a token never granted.
        Repeating it with the same token succeeds again."""
        return self.request("release", tenant_id=tenant_id, channel=channel,
                            message_id=message_id, lease_token=lease_token)

    def forget(self, tenant_id: str, channel: str, message_id: str) -> Dict[str, Any]:
        """Admin: drops the record of a message so that it reads as never
        seen (the next ``seen`` answers first=True). ``{"forgotten": True}``
        when a live record was dropped, else False. Forbidden without admin
        rights under access rules."""
        return self.request("forget", tenant_id=tenant_id, channel=channel,
                            message_id=message_id)

    # -- the flow helper ---------------------------------------------------

    def action(self, tenant_id: str, intent_ref: str, action_type: str,
               payload: Any = None, **options: Any) -> "Action":
        """The begin → provider call → complete/fail flow as a context
        manager; see intentd_client.action.Action for the options.
        ``payload``: the dict, or a function returning it (the model call),
        called only when the intent does not exist yet.

        This is what protects the money: one provider call per intent,
        however often the message is redelivered. ``seen`` (and the webhook
        helpers) in front of it only save the model call a redelivered
        message would cost; they never replace begin/complete."""
        from .action import Action
        return Action(self, tenant_id, intent_ref, action_type, payload, **options)

    def run_action(self, tenant_id: str, intent_ref: str, action_type: str,
                   payload: Any, call: Any, **options: Any) -> "Action":
        """Runs `call(act)` only when the agent grants execute or recover; its
        return value is stored as the response. Returns the finished Action
        (act.replayed, act.response, act.failed, act.error). As with
        action(): begin protects the money, seen saves the model call.

        On recover (act.recovering) an earlier attempt died with the outcome
        unknown: `call` must check with the provider (act.txid, act.key) or
        repeat the call with the same key, never charge under a new one.
        Where `intentd reconcile` is configured for the action type (or
        serve --reconcile-every), the agent usually resolves such an action
        from the provider's record first, and the next delivery gets replay
        (charged) or execute with the same key (not charged); see "When to
        rely on reconcile" in Action's docstring."""
        with self.action(tenant_id, intent_ref, action_type, payload, **options) as act:
            if act.should_call:
                act.result = call(act)
        return act
