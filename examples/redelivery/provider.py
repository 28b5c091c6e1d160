"""The demo's fake world, one local HTTP server on 127.0.0.1:

POST /charge  a payment provider that honours Idempotency-Key: the first
              request per key executes (a real charge, counted per intent),
              later ones get the stored first response back. It acts BEFORE
              answering, and may be slow, so a bot that dies mid-call leaves
              a charge behind without knowing it.
POST /model   a fake model call (8,000 input + 600 output tokens) that
              extracts valor and chave_pix_destino from the customer's
              message, and sometimes words its output differently.
POST /event   bots report what they skipped and decided.
GET /billing/open-invoice?phone=N  the company's billing system: the open
              invoice of the customer with this WhatsApp number (200
              {"invoice": ..., "cliente_id": ...}, 404 when there is none).
              The bot anchors its intent on it: a reference that existed
              before the customer wrote, and that every redelivery finds again.
GET /charge/KEY  the provider's own record of the charge made under
              Idempotency-Key KEY: 200 {"charge": {...}}, or 404 when no
              request with that key was executed. What the reconcile hook
              (provider_status.py) asks.

Model calls are counted per mode, and per message id when the caller names
one (X-Message-Id: the webhook step's WhatsApp message ids).

The chaos plan decides, per (intent_ref, delivery number), whether the bot
is SIGKILLed during the model call or right after the provider acted, or
whether the provider is too slow for the queue's visibility timeout.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
import urllib.parse
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

INPUT_TOKENS = 8000
OUTPUT_TOKENS = 600


_MONEY = re.compile(r"R\$\s*([\d.]+),(\d{2})")
_CPF = re.compile(r"\b(\d{3}\.\d{3}\.\d{3}-\d{2})\b")


def extract(text: str) -> dict:
    """What a perfect extractor reads from the customer's message:
    "R$ 1.800,00" -> "1800.00", the CPF as written."""
    m, c = _MONEY.search(text), _CPF.search(text)
    if not m or not c:
        return {}
    return {"valor": f"{m.group(1).replace('.', '')}.{m.group(2)}",
            "chave_pix_destino": c.group(1)}


class World:
    """Everything the server counts, per mode ("naive" / "intentd")."""

    def __init__(self, plan: Dict[Tuple[str, int], str], seed: int, charge_delay: float,
                 slow_delay: float, model_delay: float):
        self.plan = plan
        self.seed = seed
        self.charge_delay = charge_delay
        self.slow_delay = slow_delay
        self.model_delay = model_delay
        self.lock = threading.Lock()
        self.stored: Dict[str, dict] = {}  # Idempotency-Key -> first response
        self.charges: Dict[str, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
        self.replays: Dict[str, int] = defaultdict(int)
        self.model_calls: Dict[str, int] = defaultdict(int)
        self.model_variants: Dict[str, int] = defaultdict(int)
        self.model_calls_by_message: Dict[str, Dict[str, int]] = defaultdict(
            lambda: defaultdict(int))
        self.kills: Dict[str, int] = defaultdict(int)
        # Per mode and invoice (X-Intent-Ref): model calls, and the kills
        # during one (they strike before the intent is frozen).
        self.model_calls_by_ref: Dict[str, Dict[str, int]] = defaultdict(
            lambda: defaultdict(int))
        self.model_kills_by_ref: Dict[str, Dict[str, int]] = defaultdict(
            lambda: defaultdict(int))
        self.events: Dict[str, List[dict]] = defaultdict(list)
        self.charge_posts: Dict[str, int] = defaultdict(int)  # POST /charge per key
        self.status_lookups: Dict[str, int] = defaultdict(int)  # GET /charge/KEY per key
        self._model_rng: Dict[str, random.Random] = {}
        # The billing system: WhatsApp number -> its open invoice.
        self.open_invoices: Dict[str, dict] = {}

    def _kill(self, mode: str, pid: int) -> None:
        if pid <= 0:
            return  # no bot process named (kill(0) would hit the whole group)
        with self.lock:
            self.kills[mode] += 1
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def charge(self, mode: str, key: str, body: dict, delivery: Tuple[str, int],
               pid: int) -> Optional[dict]:
        """Returns the response, or None when the caller was killed."""
        step = self.plan.get(delivery)
        with self.lock:
            self.charge_posts[key] += 1
            first = self.stored.get(key)
            if first is None:
                n = sum(len(v) for v in self.charges[mode].values()) + 1
                first = {"charge_id": f"ch_{mode}_{n:04d}", "status": "paid",
                         "valor": body.get("valor"), "txid": body.get("txid"),
                         "intent_ref": body.get("intent_ref")}
                self.stored[key] = first
                self.charges[mode][body.get("intent_ref", "?")].append(str(body.get("valor")))
                replayed = False
            else:
                self.replays[mode] += 1
                replayed = True
        if step == "kill_charge":
            time.sleep(0.05)  # the charge went out; the bot dies waiting for the answer
            self._kill(mode, pid)
            return None
        time.sleep(self.slow_delay if step == "slow" else self.charge_delay)
        return dict(first, replayed=replayed)

    def lookup(self, key: str) -> Optional[dict]:
        """The charge made under this Idempotency-Key, None when there is none.
        A charge is stored before the provider answers, so a caller that died
        waiting for the answer still finds it here."""
        with self.lock:
            self.status_lookups[key] += 1
            first = self.stored.get(key)
            return None if first is None else dict(first)

    def model(self, mode: str, text: str, delivery: Tuple[str, int],
              pid: int, message_id: Optional[str] = None) -> Optional[dict]:
        with self.lock:
            self.model_calls[mode] += 1
            self.model_calls_by_ref[mode][delivery[0]] += 1
            if message_id:
                self.model_calls_by_message[mode][message_id] += 1
            rng = self._model_rng.setdefault(mode + delivery[0], random.Random(
                f"{self.seed}/{mode}/{delivery[0]}"))
            roll = rng.random()
        time.sleep(self.model_delay)
        if self.plan.get(delivery) == "kill_model":
            with self.lock:
                self.model_kills_by_ref[mode][delivery[0]] += 1
            self._kill(mode, pid)  # tokens spent, nothing charged
            return None
        truth = extract(text)
        out = dict(truth)
        # The model is not deterministic: same meaning, other wording...
        if roll < 0.25:
            out["chave_pix_destino"] = "".join(c for c in out["chave_pix_destino"] if c.isdigit())
        elif roll < 0.45:
            out["valor"] = out["valor"].rstrip("0").rstrip(".")
        # ...and now and then another value altogether (a digit too many).
        elif roll < 0.60:
            out["valor"] = truth["valor"].replace(".", "0.", 1)
        if out != truth:
            with self.lock:
                self.model_variants[mode] += 1
        return {"extraction": out, "usage": {"input_tokens": INPUT_TOKENS,
                                             "output_tokens": OUTPUT_TOKENS}}

    def event(self, mode: str, event: dict) -> None:
        with self.lock:
            self.events[mode].append(event)


class _Handler(BaseHTTPRequestHandler):
    world: World

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/billing/open-invoice?"):
            query = urllib.parse.parse_qs(self.path.split("?", 1)[1])
            invoice = self.world.open_invoices.get(query.get("phone", [""])[0])
            if invoice is None:
                return self._send(404, {"error": "no open invoice for this number"})
            return self._send(200, invoice)
        if not self.path.startswith("/charge/"):
            return self._send(404, {"error": "no such path"})
        key = urllib.parse.unquote(self.path[len("/charge/"):])
        charge = self.world.lookup(key)
        if charge is None:
            return self._send(404, {"error": "no charge with this Idempotency-Key"})
        self._send(200, {"charge": charge})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        mode = self.headers.get("X-Mode", "?")
        pid = int(self.headers.get("X-Bot-Pid", "0"))
        delivery = (self.headers.get("X-Intent-Ref", "?"), int(self.headers.get("X-Delivery", "0")))
        if self.path == "/charge":
            key = self.headers.get("Idempotency-Key")
            if not key:
                return self._send(400, {"error": "Idempotency-Key required"})
            out = self.world.charge(mode, key, body, delivery, pid)
        elif self.path == "/model":
            out = self.world.model(mode, body.get("text", ""), delivery, pid,
                                   self.headers.get("X-Message-Id"))
        elif self.path == "/event":
            self.world.event(mode, body)
            out = {"ok": True}
        else:
            return self._send(404, {"error": "no such path"})
        if out is None:
            self.close_connection = True  # the caller is dead
            return
        self._send(200, out)

    def _send(self, code: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(world: World) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"world": world})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
