"""Meta redelivers a WhatsApp webhook; the receiver de-duplicates with `seen`.

A WhatsApp Cloud API webhook body, signed with X-Hub-Signature-256 under a
throwaway app secret, is POSTed to a small receiver. Then Meta redelivers
the same webhook (the same bytes, the same signature), and once sends a
webhook carrying one new message and one it delivered before; a forged
webhook (signed with another secret) comes too. Two receivers get the same
deliveries:

naive  checks the signature, answers 200 and hands every message of the body
       to the bot: each redelivered message costs another model call.
seen   checks the signature, answers 200, records all the body's events with
       one batch `seen` (intentd_client.webhook.first_sightings) and hands
       only the first sightings to the bot.

The bot here is the model call: the fake world's POST /model, which counts
the calls per message id. The money behind the model call is begin/complete's
job (the queue part of the demo); `seen` only saves the model call.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import os
import queue
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

from intentd_client.webhook import (SIGNATURE_HEADER, first_sightings, message_ids,
                                    verify_signature)

from bot import TENANT, World

CHANNEL = "whatsapp"
PHONE_NUMBER_ID = "106540352242922"
MODES = ("webhook-naive", "webhook-seen")


def sign(secret: bytes, raw: bytes) -> str:
    return "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()


def _wamid(rng: random.Random, phone: str) -> str:
    """An id shaped like the Cloud API's: wamid. + base64 of the sender and
    a random part."""
    noise = bytes(rng.randrange(256) for _ in range(20))
    raw = b"\x15\x02\x00\x12\x18\x14" + phone.encode() + noise
    return "wamid.HBgN" + base64.b64encode(raw).decode()


def make_messages(rng: random.Random, n: int = 5) -> List[dict]:
    """Inbound WhatsApp messages asking for a Pix charge, as the Cloud API
    sends them; the text is what the model reads."""
    people = [("5511987654321", "Ana Souza"), ("5521998765432", "Carlos Lima"),
              ("5531991234567", "Beatriz Rocha")]
    out = []
    for i in range(1, n + 1):
        phone, name = people[(i - 1) % len(people)]
        ref = f"FAT-2026-WHK{i:03d}"
        reais = rng.choice([180, 250, 1800, 99, 420])
        valor = f"{reais:,}".replace(",", ".") + ",00"
        out.append({"ref": ref, "name": name, "message": {
            "from": phone, "id": _wamid(rng, phone), "timestamp": str(1764700000 + i),
            "type": "text",
            "text": {"body": f"Oi! Pode mandar o Pix da fatura {ref} de R$ {valor} para a "
                             f"chave 111.222.333-96? Obrigado"}}})
    return out


def webhook_body(messages: List[dict], statuses: Optional[List[dict]] = None) -> bytes:
    """One Cloud API notification (field "messages"), serialized as Meta
    would send it: the raw bytes are what is signed."""
    contacts, seen_phones = [], set()
    for m in messages:
        if m["message"]["from"] not in seen_phones:
            seen_phones.add(m["message"]["from"])
            contacts.append({"profile": {"name": m["name"]}, "wa_id": m["message"]["from"]})
    value: Dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "5511940001234",
                     "phone_number_id": PHONE_NUMBER_ID},
        "contacts": contacts, "messages": [m["message"] for m in messages]}
    if statuses:
        value["statuses"] = statuses
    body = {"object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"field": "messages",
                                                             "value": value}]}]}
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


class _CountingClient:
    """The intentd client as first_sightings sees it, counting its calls."""

    def __init__(self, client: Any):
        self.client = client
        self.max_frame_bytes = client.max_frame_bytes
        self.calls = 0

    def seen_batch(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.client.seen_batch(*args, **kwargs)


class Receiver:
    """A webhook receiver on 127.0.0.1: POST /webhook checks the signature
    (403), answers 200, and a worker thread hands the body's messages to the
    bot: all of them (naive), or only the first sightings (seen)."""

    def __init__(self, mode: str, app_secret: bytes, world_url: str,
                 client: Optional[Any] = None):
        self.mode = mode
        self.app_secret = app_secret
        self.world_url = world_url
        self.client = _CountingClient(client) if client is not None else None
        self.bodies: "queue.Queue[bytes]" = queue.Queue()
        self.handed: List[str] = []  # message ids given to the bot, in order
        self.errors: List[str] = []
        handler = type("Handler", (_Handler,), {"receiver": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        threading.Thread(target=self._work, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def _work(self) -> None:
        while True:
            raw = self.bodies.get()
            try:
                self._process(raw)
            except Exception as e:  # noqa: BLE001 - reported by the checks
                self.errors.append(f"{self.mode}: {e!r}")
            finally:
                self.bodies.task_done()

    def _process(self, raw: bytes) -> None:
        body = json.loads(raw)
        if self.client is None:
            events = message_ids(body)
        else:
            events = first_sightings(self.client, TENANT, body, CHANNEL)
        for event in events:
            if event.kind == "message":
                self.handed.append(event.id)
                self._bot(event.id, event.item)

    def _bot(self, message_id: str, message: dict) -> None:
        """The bot's model call, named by message id for the world's count."""
        world = World(self.world_url, self.mode, message_id, 1)
        del world.headers["X-Bot-Pid"]  # no process for the chaos plan to kill
        text = (message.get("text") or {}).get("body", "")
        world.post("/model", {"text": text}, **{"X-Message-Id": message_id})

    def drain(self) -> None:
        self.bodies.join()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    receiver: Receiver

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/webhook" or not verify_signature(
                self.receiver.app_secret, raw, self.headers.get(SIGNATURE_HEADER)):
            return self._reply(403, b"forbidden")
        self._reply(200, b"ok")  # at once: Meta only needs the 200
        self.receiver.bodies.put(raw)

    def _reply(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _meta_post(port: int, raw: bytes, signature: str) -> int:
    """What Meta's webhook delivery does: POST the raw body, signed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/webhook", body=raw, headers={
            "Content-Type": "application/json", SIGNATURE_HEADER: signature,
            "User-Agent": "facebookexternalua"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def run(client: Any, world: Any, world_url: str, seed: int) -> Dict[str, Any]:
    """Sends the deliveries to both receivers and gathers the figures."""
    rng = random.Random(f"{seed}/webhook")
    app_secret = os.urandom(32).hex().encode()  # throwaway, never a real one
    msgs = make_messages(rng)
    m1, m2, m3, m4, m5 = msgs
    status = {"id": "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjQ1NjdBQkNERUYwMTIzNDU2AA==",
              "status": "delivered", "timestamp": "1764700001",
              "recipient_id": m1["message"]["from"]}
    first = webhook_body([m1, m2, m3], [status])
    mixed = webhook_body([m4, m2])
    forged = webhook_body([m5])
    deliveries = [
        ("the webhook: 3 messages and a status", first, sign(app_secret, first)),
        ("Meta redelivers the same webhook", first, sign(app_secret, first)),
        ("a webhook with 1 new and 1 old message", mixed, sign(app_secret, mixed)),
        ("a forged webhook (another secret)", forged, sign(b"not-the-app-secret", forged)),
    ]
    stats_before = client.stats()
    receivers = {"webhook-naive": Receiver("webhook-naive", app_secret, world_url),
                 "webhook-seen": Receiver("webhook-seen", app_secret, world_url, client)}
    t0 = time.monotonic()
    answers: Dict[str, List[int]] = {mode: [] for mode in MODES}
    delivered: Dict[str, int] = {}  # message id -> accepted deliveries
    try:
        for _label, raw, signature in deliveries:
            for mode, r in receivers.items():
                answers[mode].append(_meta_post(r.port, raw, signature))
            accepted = answers["webhook-seen"][-1] == 200
            for event in message_ids(json.loads(raw)):
                if event.kind == "message":
                    delivered[event.id] = delivered.get(event.id, 0) + int(accepted)
            for r in receivers.values():
                r.drain()  # the next delivery comes after the work: counts are exact
    finally:
        for r in receivers.values():
            r.close()
    stats_after = client.stats()
    calls = {mode: dict(world.model_calls_by_message[mode]) for mode in MODES}
    return {
        "deliveries": [(label, answers["webhook-naive"][i], answers["webhook-seen"][i])
                       for i, (label, _, _) in enumerate(deliveries)],
        "messages": [{"id": m["message"]["id"], "ref": m["ref"],
                      "delivered": delivered.get(m["message"]["id"], 0),
                      "calls": {mode: calls[mode].get(m["message"]["id"], 0)
                                for mode in MODES}} for m in msgs],
        "model_calls": {mode: world.model_calls[mode] for mode in MODES},
        "seen_calls": receivers["webhook-seen"].client.calls,
        "accepted_posts": sum(1 for code in answers["webhook-seen"] if code == 200),
        "errors": [e for r in receivers.values() for e in r.errors],
        "stats_seen": _seen_delta(stats_before, stats_after),
        "seconds": time.monotonic() - t0,
    }


def _seen_delta(before: dict, after: dict) -> Optional[Dict[str, int]]:
    """The agent's own count of the step's sightings (stats "seen"), if it
    reports one."""
    b, a = before.get("seen"), after.get("seen")
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    return {k: a.get(k, 0) - b.get(k, 0) for k in ("first", "duplicates", "reclaimed")}
