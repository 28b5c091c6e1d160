"""WhatsApp Cloud API webhooks: check the signature, list the events, keep
only those seen for the first time (the agent's ``seen`` op).

Meta retries a webhook it did not get a 200 for (for days), and may deliver
one notification more than once: de-duplication is the receiver's job. ::

    from intentd_client import Client
    from intentd_client.webhook import first_sightings, verify_signature

    if not verify_signature(APP_SECRET, raw_body, headers.get("X-Hub-Signature-256")):
        return 403
    # answer 200 now, then in the background:
    found = first_sightings(client, "acme", json.loads(raw_body))
    for event in found:
        bot.handle(event.item)          # the message (or status) object as Meta sent it
    for event in found.rejected:        # ids the agent cannot record (blank, > 256 bytes)
        log.warning("dropped %r: %s", event.id, event.reason)

Which to use when:

- Plain (the default): at most once into the model. Record the events when
  the webhook arrives, answer 200 at once, hand only first sightings to the
  bot. If the process dies after ``seen`` and before the bot handled an
  event, that event is lost (its redelivery reads as a duplicate). Right
  when a lost message is cheaper than a second model call, or when the
  processing is quick and the webhook is answered after it.
- Claim (``lease_ms=N``): at least once, never two at a time. Each first
  sighting carries ``lease_token``; handle it inside
  ``with processing(client, tenant_id, event):``, which calls ``done`` when
  the block ends and ``release`` when it raises (the next delivery then
  takes the event at once instead of waiting out the lease). If the
  processor dies first, its lease runs out and the next delivery gets the
  event again (``event.lease_token > 1``). A
  duplicate arriving while a live claim holds the event is dropped and
  listed in the result's ``in_progress`` (with ``retry_after_ms``). A
  redelivery must come for this to help: answer Meta only after ``done``
  (Meta retries what got no 200), and not with 200 while ``in_progress`` is
  not empty. Right for the model step when losing a message is not
  acceptable; pick a lease longer than the processing takes.

Either way the money is protected by ``begin``/``complete`` (client.action,
client.run_action): ``seen`` only saves the model call in front of it.

Standard library only. ``first_sightings_async`` is the twin for an
AsyncClient.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
from typing import (Any, AsyncIterator, Dict, Iterator, List, NamedTuple, Optional, Sequence,
                    Tuple)

from . import _wire
from .errors import IntentdError, InvalidField, ProtocolError

SIGNATURE_HEADER = "X-Hub-Signature-256"
SIGNATURE_PREFIX = "sha256="
# Entries of one batch `seen` the agent accepts.
MAX_SEEN_BATCH = 1000
# The longest message id the agent records, in UTF-8 bytes (docs/protocol.md, `seen`).
MAX_MESSAGE_ID_BYTES = 256


def verify_signature(app_secret: Any, raw_body: Any, header_value: Optional[str]) -> bool:
    """True when ``header_value`` (the X-Hub-Signature-256 header) is
    ``sha256=`` followed by the hex HMAC-SHA256 of ``raw_body`` under the
    app secret.

    Returns False — never raises — for a bad request: a missing header
    (None), an empty one, another prefix (``sha1=``), a digest of the wrong
    length or not hex. The digests are compared in constant time.

    Raises TypeError / ValueError for a programming error instead: an empty
    or missing app secret (it would make every signature forgeable), or a
    body that is not bytes (sign-check the raw bytes as received; a JSON
    body parsed and serialized again does not match).
    """
    if isinstance(app_secret, str):
        key = app_secret.encode("utf-8")
    elif isinstance(app_secret, (bytes, bytearray)):
        key = bytes(app_secret)
    else:
        raise TypeError("verify_signature: app_secret must be str or bytes (the app's secret "
                        "from the Meta app dashboard)")
    if not key:
        raise ValueError("verify_signature: app_secret is empty; refusing to check signatures "
                         "with an empty key")
    if not isinstance(raw_body, (bytes, bytearray, memoryview)):
        raise TypeError("verify_signature: raw_body must be the request body as received "
                        f"(bytes), not {type(raw_body).__name__}")
    if not isinstance(header_value, str):
        return False
    value = header_value.strip()
    if not value.startswith(SIGNATURE_PREFIX):
        return False
    try:
        received = value[len(SIGNATURE_PREFIX):].lower().encode("ascii")
    except UnicodeEncodeError:
        return False
    expected = hmac.new(key, bytes(raw_body), hashlib.sha256).hexdigest().encode("ascii")
    if len(received) != len(expected):
        return False
    return hmac.compare_digest(received, expected)


class WebhookEvent(NamedTuple):
    """One message or status of a webhook body.

    kind: "message" (an inbound message) or "status" (sent, delivered,
        read, failed… of a message the business sent).
    id: the wamid.
    key: what `seen` records: the id of a message; ``id + ":" + status``
        of a status (each status of a message is its own event; "" when
        the status has none).
    status: the status value, None for a message.
    item: the message or status object as Meta sent it.
    metadata: the change's ``metadata`` (phone_number_id,
        display_phone_number), {} when absent.
    contact: for a message, the entry of ``contacts`` whose wa_id is the
        sender (profile name), else None.
    entry_id: the entry's id (the WhatsApp Business Account id), or None.
    lease_token, lease_until_ms: claim mode only (first_sightings with
        lease_ms), on a first sighting: pass lease_token to ``done`` once the
        event is handled; above 1, an earlier claim's processor died.
    retry_after_ms: claim mode only, on an event of ``in_progress``: when
        the live claim another processor holds expires.
    reason: on an event of ``rejected`` only: why it was not recorded.
    """

    kind: str
    id: str
    key: str
    status: Optional[str]
    item: Dict[str, Any]
    metadata: Dict[str, Any]
    contact: Optional[Dict[str, Any]]
    entry_id: Any
    lease_token: Optional[int] = None
    lease_until_ms: Optional[int] = None
    retry_after_ms: Optional[int] = None
    reason: Optional[str] = None


class Sightings(List[WebhookEvent]):
    """What first_sightings returns: the first sightings, a list of
    WebhookEvent in body order; ``in_progress``: in claim mode, the events
    of the body that another processor holds a live claim on (each with
    ``retry_after_ms``), dropped from the list; and ``rejected``: events
    whose id the agent cannot record (blank, longer than 256 bytes, not a
    string), each with its ``reason``. The other events of the body are
    recorded and returned all the same: one bad id never blocks a body."""

    def __init__(self, events: Any = (), in_progress: Any = (), rejected: Any = ()):
        super().__init__(events)
        self.in_progress: List[WebhookEvent] = list(in_progress)
        self.rejected: List[WebhookEvent] = list(rejected)


def _dicts(value: Any) -> Iterator[Dict[str, Any]]:
    """The dict elements of a list; nothing for anything else."""
    if isinstance(value, list):
        for v in value:
            if isinstance(v, dict):
                yield v


def message_ids(body: Any) -> List[WebhookEvent]:
    """Every ``messages[].id`` and ``statuses[].id`` of a parsed Cloud API
    webhook body, in order (entries, their changes, a change's messages then
    its statuses). Tolerant: missing or mistyped members are skipped, and
    changes whose ``field`` is not "messages" are ignored. Raises TypeError
    when ``body`` is not a dict (parse the JSON first)."""
    return [e for e in _events(body) if isinstance(e.item.get("id"), str)]


def _events(body: Any) -> List[WebhookEvent]:
    """message_ids, and the messages and statuses whose id is present but
    not a string (JSON text as their id), for first_sightings to report."""
    if not isinstance(body, dict):
        raise TypeError("message_ids: the webhook body must be the parsed JSON object "
                        f"(a dict), not {type(body).__name__}; json.loads the raw body first")
    events: List[WebhookEvent] = []
    for entry in _dicts(body.get("entry")):
        entry_id = entry.get("id")
        for change in _dicts(entry.get("changes")):
            field = change.get("field")
            if field is not None and field != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict):
                continue
            metadata = value.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            contacts = list(_dicts(value.get("contacts")))
            for msg in _dicts(value.get("messages")):
                mid = msg.get("id")
                if mid is None or mid == "":
                    continue
                if not isinstance(mid, str):
                    mid = json.dumps(mid)  # kept, to be rejected by name (_plan)
                sender = msg.get("from")
                contact = next((c for c in contacts
                                if sender is not None and c.get("wa_id") == sender), None)
                events.append(WebhookEvent("message", mid, mid, None, msg, metadata, contact,
                                           entry_id))
            for st in _dicts(value.get("statuses")):
                sid = st.get("id")
                if sid is None or sid == "":
                    continue
                if not isinstance(sid, str):
                    sid = json.dumps(sid)
                status = st.get("status") if isinstance(st.get("status"), str) else ""
                events.append(WebhookEvent("status", sid, f"{sid}:{status}", status, st,
                                           metadata, None, entry_id))
    return events


def _json_len(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _chunks(keys: Sequence[str], tenant_id: str, channel: str, ttl_ms: Optional[int],
            max_frame_bytes: Optional[int],
            lease_ms: Optional[int] = None) -> Iterator[List[str]]:
    """Batches of at most MAX_SEEN_BATCH keys whose request line stays
    within the client's frame limit (1000 long wamids exceed 64 KiB)."""
    budget = None
    if max_frame_bytes is not None:
        envelope: Dict[str, Any] = {"id": 10 ** 19, "op": "seen", "tenant_id": tenant_id,
                                    "channel": channel, "messages": []}
        if ttl_ms is not None:
            envelope["ttl_ms"] = ttl_ms
        if lease_ms is not None:
            envelope["lease_ms"] = lease_ms
        budget = max_frame_bytes - _json_len(envelope)
    chunk: List[str] = []
    used = 0
    for key in keys:
        size = _json_len({"message_id": key}) + 1  # and a comma
        if chunk and (len(chunk) >= MAX_SEEN_BATCH
                      or (budget is not None and used + size > budget)):
            yield chunk
            chunk, used = [], 0
        chunk.append(key)
        used += size
    if chunk:
        yield chunk


def id_problem(event: WebhookEvent) -> Optional[str]:
    """Why the agent would refuse to record ``event``'s key, or None."""
    raw = event.item.get("id")
    if not isinstance(raw, str):
        return f"its id is a JSON {type(raw).__name__}, not a string"
    if not event.key.strip():
        return "its id is blank"
    size = len(event.key.encode("utf-8", "surrogatepass"))
    if size > MAX_MESSAGE_ID_BYTES:
        return (f"its id is {size} bytes (with the status, for a status event); the agent "
                f"records at most {MAX_MESSAGE_ID_BYTES}")
    return None


def _plan(body: Any) -> Tuple[List[WebhookEvent], List[str], List[WebhookEvent]]:
    """The events, each key once (a repeat inside one body is a duplicate
    too), their keys, and the events rejected before asking the agent."""
    unique: Dict[str, WebhookEvent] = {}
    rejected: List[WebhookEvent] = []
    for event in _events(body):
        problem = id_problem(event)
        if problem is not None:
            rejected.append(event._replace(reason=problem))
        else:
            unique.setdefault(event.key, event)
    return list(unique.values()), list(unique), rejected


_ENTRY_FIELD = re.compile(r"^messages\[(\d+)\]")


def _refused_entry(error: IntentdError, chunk: Sequence[str]) -> Optional[int]:
    """The index in ``chunk`` of the one entry an InvalidField answer names
    (``messages[N]`` or ``messages[N].message_id``), or None."""
    if not isinstance(error, InvalidField) or not error.field:
        return None
    m = _ENTRY_FIELD.match(error.field)
    if m is None or int(m.group(1)) >= len(chunk):
        return None
    return int(m.group(1))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Found:
    """The answers gathered so far: first sightings and live claims held
    elsewhere, by key."""

    def __init__(self, claim: bool, rejected: Sequence[WebhookEvent]):
        self.claim = claim
        self.firsts: Dict[str, Dict[str, Any]] = {}
        self.busy: Dict[str, Dict[str, Any]] = {}
        self.rejected: List[WebhookEvent] = list(rejected)
        self.refused: Dict[str, str] = {}  # key -> the agent's reason

    def add(self, chunk: Sequence[str], results: Any) -> None:
        if not isinstance(results, list) or len(results) != len(chunk):
            raise ProtocolError(f"seen: {len(chunk)} messages sent, the answer's results do "
                                f"not match: {results!r:.200}")
        for key, r in zip(chunk, results):
            if (not isinstance(r, dict) or r.get("message_id") != key
                    or not isinstance(r.get("first"), bool)):
                raise ProtocolError(f"seen: result {r!r:.200} does not answer {key!r}")
            if r["first"]:
                if self.claim and not _is_int(r.get("lease_token")):
                    raise ProtocolError(f"seen: a claimed first sighting without a lease_token: "
                                        f"{r!r:.200}")
                self.firsts[key] = r
            elif self.claim and r.get("state") == "processing":
                self.busy[key] = r

    def sightings(self, events: Sequence[WebhookEvent]) -> Sightings:
        def claimed(ev: WebhookEvent) -> WebhookEvent:
            r = self.firsts[ev.key]
            if not self.claim:
                return ev
            until = r.get("lease_until_ms")
            return ev._replace(lease_token=r["lease_token"],
                               lease_until_ms=until if _is_int(until) else None)

        def held(ev: WebhookEvent) -> WebhookEvent:
            retry = self.busy[ev.key].get("retry_after_ms")
            return ev._replace(retry_after_ms=retry if _is_int(retry) else None)

        refused = [ev._replace(reason=self.refused[ev.key]) for ev in events
                   if ev.key in self.refused]
        return Sightings([claimed(ev) for ev in events if ev.key in self.firsts],
                         [held(ev) for ev in events if ev.key in self.busy],
                         self.rejected + refused)

    def refuse(self, error: IntentdError, chunk: List[str]) -> bool:
        """When ``error`` refuses one entry of ``chunk`` by name: records
        why, drops it from ``chunk`` and returns True (send the rest)."""
        i = _refused_entry(error, chunk)
        if i is None:
            return False
        self.refused[chunk.pop(i)] = error.message or str(error)
        return True


def _seen_options(ttl_ms: Optional[int], lease_ms: Optional[int]) -> Dict[str, Any]:
    # lease_ms only when given: a client wrapper written before the claim
    # variant keeps working in the plain mode.
    return {"ttl_ms": ttl_ms} if lease_ms is None else {"ttl_ms": ttl_ms, "lease_ms": lease_ms}


def first_sightings(client: Any, tenant_id: str, body: Any, channel: str = "whatsapp", *,
                    ttl_ms: Optional[int] = None,
                    lease_ms: Optional[int] = None) -> Sightings:
    """The events of ``body`` (see message_ids) that the agent has not seen
    before, in order; hand these, and only these, to the bot.

    One ``seen_batch`` call per 1000 events (fewer when the request would
    exceed the client's frame limit); none when the body has no events. An
    event repeated inside the body counts once.

    ``lease_ms``: the claim mode (see the module's "Which to use when"):
    each returned event carries ``lease_token`` (and ``lease_until_ms``);
    call ``client.done(tenant_id, channel, event.key, event.lease_token)``
    once it is handled (LeaseLost from done: the lease expired and another
    processor took the event over: stop). The result's ``in_progress``
    lists the events a live claim elsewhere holds, with ``retry_after_ms``.
    Without lease_ms each event is recorded as seen before the bot handles
    it (at most once).

    An event whose id the agent cannot record (blank, over 256 bytes, not
    a string; or one the agent refuses by name) is listed in the result's
    ``rejected`` with its ``reason``, and the body's other events are
    recorded and returned as usual: log the rejected ones, and answer the
    webhook 200 all the same (a redelivery would be refused again).

    Raises what seen_batch raises otherwise (UnknownOp from an agent
    without the op). When a later batch fails after earlier ones were
    recorded, the error carries ``first_sightings``: the first sightings
    of the batches that succeeded, which no redelivery will report as
    first again (in claim mode: not before their lease expires).
    """
    events, keys, rejected = _plan(body)
    found = _Found(lease_ms is not None, rejected)
    frame = getattr(client, "max_frame_bytes", _wire.DEFAULT_MAX_FRAME_BYTES)
    for chunk in _chunks(keys, tenant_id, channel, ttl_ms, frame, lease_ms):
        while chunk:
            try:
                found.add(chunk, client.seen_batch(tenant_id, channel, chunk,
                                                   **_seen_options(ttl_ms, lease_ms)))
                break
            except IntentdError as e:
                if found.refuse(e, chunk):
                    continue
                e.first_sightings = found.sightings(events)  # type: ignore[attr-defined]
                raise
    return found.sightings(events)


async def first_sightings_async(client: Any, tenant_id: str, body: Any,
                                channel: str = "whatsapp", *,
                                ttl_ms: Optional[int] = None,
                                lease_ms: Optional[int] = None) -> Sightings:
    """first_sightings with an AsyncClient."""
    events, keys, rejected = _plan(body)
    found = _Found(lease_ms is not None, rejected)
    frame = getattr(client, "max_frame_bytes", _wire.DEFAULT_MAX_FRAME_BYTES)
    for chunk in _chunks(keys, tenant_id, channel, ttl_ms, frame, lease_ms):
        while chunk:
            try:
                found.add(chunk, await client.seen_batch(tenant_id, channel, chunk,
                                                         **_seen_options(ttl_ms, lease_ms)))
                break
            except IntentdError as e:
                if found.refuse(e, chunk):
                    continue
                e.first_sightings = found.sightings(events)  # type: ignore[attr-defined]
                raise
    return found.sightings(events)


def _claim_args(event: WebhookEvent) -> int:
    if not _is_int(event.lease_token):
        raise ValueError(f"processing: event {event.key!r} carries no lease_token; claim it "
                         "with first_sightings(..., lease_ms=N)")
    return event.lease_token  # type: ignore[return-value]


@contextlib.contextmanager
def processing(client: Any, tenant_id: str, event: WebhookEvent,
               channel: str = "whatsapp") -> Iterator[WebhookEvent]:
    """Handle one claimed event (first_sightings with lease_ms)::

        for event in first_sightings(client, "acme", body, lease_ms=120_000):
            with processing(client, "acme", event):
                bot.handle(event)

    When the block ends, ``done`` records the event handled. When it
    raises, ``release`` gives the claim back so that the next delivery
    takes the event at once (the money stays protected by begin/complete:
    a charge started inside is recovered with its own key), and the
    exception goes on. LeaseLost from either means that the lease ran out
    and another processor took the event over: ``done`` raises it (that
    processor owns the outcome now), ``release`` swallows it. A ``release``
    that cannot reach the agent is swallowed too: the lease runs out.
    """
    token = _claim_args(event)
    try:
        yield event
    except BaseException:
        try:
            client.release(tenant_id, channel, event.key, token)
        except IntentdError:
            pass
        raise
    client.done(tenant_id, channel, event.key, token)


@contextlib.asynccontextmanager
async def processing_async(client: Any, tenant_id: str, event: WebhookEvent,
                           channel: str = "whatsapp") -> AsyncIterator[WebhookEvent]:
    """processing with an AsyncClient (``async with``)."""
    token = _claim_args(event)
    try:
        yield event
    except BaseException:
        try:
            await client.release(tenant_id, channel, event.key, token)
        except IntentdError:
            pass
        raise
    await client.done(tenant_id, channel, event.key, token)
